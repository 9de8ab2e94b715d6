/* Implements: Chrome trace-event JSON of a simulated iteration (sim_out.h): "X" (complete)
 * events with ts/dur in microseconds, one thread per resource lane named by "thread_name"
 * metadata, so Perfetto (ui.perfetto.dev) and chrome://tracing show the Gantt chart.
 * Relies on: sim_svg.c (lanes), libfsmoe atomic_file.h and json.h. */
#include "json.h"
#include "atomic_file.h"
#include "sim_out.h"

#include <stdlib.h>
#include <string.h>

fsmoe_status sim_write_trace(const sim *s, const char *title, const char *path, fsmoe_error *err)
{
    int *lane = malloc((size_t)(s->n_tasks > 0 ? s->n_tasks : 1) * sizeof *lane);
    int *lanes = malloc((size_t)(s->n_res > 0 ? s->n_res : 1) * sizeof *lanes);
    if (!lane || !lanes || !sim_out_lanes(s, lane, lanes)) {
        free(lane);
        free(lanes);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "%s: out of memory writing the trace", path);
    }
    fsmoe_atomic_file af;
    if (fsmoe_atomic_open(&af, path, err) != FSMOE_OK) {
        free(lane);
        free(lanes);
        return err ? err->status : FSMOE_ERR_IO;
    }
    FILE *f = af.f;
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":");
    fsmoe_json_string(f, title);
    fprintf(f, "}}");
    for (int r = 0; r < s->n_res; r++) {
        if (!sim_out_shown(s, r))
            continue;
        for (int l = 0; l < lanes[r]; l++) {
            char name[64];
            if (lanes[r] > 1)
                snprintf(name, sizeof name, "%s #%d", s->res[r].name, l + 1);
            else
                snprintf(name, sizeof name, "%s", s->res[r].name);
            fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
                       "\"args\":{\"name\":",
                    r * 100 + l + 1);
            fsmoe_json_string(f, name);
            fprintf(f, "}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
                       "\"args\":{\"sort_index\":%d}}",
                    r * 100 + l + 1, r * 100 + l + 1);
        }
    }
    char lb[64];
    for (int i = 0; i < s->n_tasks; i++) {
        const sim_task *t = &s->tasks[i];
        if (!sim_out_shown(s, t->resource))
            continue;
        fprintf(f, ",\n{\"name\":");
        fsmoe_json_string(f, sim_task_label(s, i, lb, sizeof lb));
        fprintf(f, ",\"cat\":");
        fsmoe_json_string(f, fsmoe_task_name(t->kind));
        fprintf(f, ",\"ph\":\"X\",\"ts\":%.6f,\"dur\":%.6f,\"pid\":1,\"tid\":%d,"
                   "\"args\":{\"bytes\":%.17g,\"alpha_s\":%.17g,\"work_s\":%.17g,"
                   "\"priority\":%d",
                t->start_s * 1e6, (t->end_s - t->start_s) * 1e6, t->resource * 100 + lane[i] + 1,
                t->bytes, t->alpha_s, t->work_s, t->priority);
        if (t->skew_s > 0.0)
            fprintf(f, ",\"skew_s\":%.17g", t->skew_s);
        /* a task of another kind the ranks meet in (sim.h SIM_TASK_MEETS), as fsmoe-run's
         * trace marks it */
        if (t->flags & SIM_TASK_MEETS)
            fprintf(f, ",\"meets\":1");
        fprintf(f, "}}");
    }
    fprintf(f, "\n]}\n");
    free(lane);
    free(lanes);
    return fsmoe_atomic_commit(&af, err);
}
