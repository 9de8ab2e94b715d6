/* Implements: task.h. */
#include "task.h"

#include <stdio.h>

static const char *const names[FSMOE_TASK_COUNT] = {
    "attention", "ffn", "gate", "expert", "alltoall", "allgather", "reducescatter",
    "esp-allreduce", "mp-allreduce", "saa", "copy", "grad-allreduce", "elementwise", "head",
    "optimizer",
};

const char *fsmoe_task_name(fsmoe_task_kind k)
{
    return (unsigned)k < FSMOE_TASK_COUNT ? names[k] : "?";
}

int fsmoe_task_collective(fsmoe_task_kind k)
{
    return k == FSMOE_TASK_A2A || k == FSMOE_TASK_AG || k == FSMOE_TASK_RS ||
           k == FSMOE_TASK_AR_ESP || k == FSMOE_TASK_AR_MP || k == FSMOE_TASK_SAA ||
           k == FSMOE_TASK_GRAD_AR;
}

const char *fsmoe_anchor_name(fsmoe_anchor a)
{
    static const char *const at[FSMOE_AT_COUNT] = {"-",          "window",     "early-ready",
                                                   "dense-ready", "dispatched", "moe-ready",
                                                   "tail"};
    return (unsigned)a < FSMOE_AT_COUNT ? at[a] : "?";
}

const char *fsmoe_phase_name(int phase)
{
    static const char *const ph[] = {"fwd", "bwd", "tail"};
    return (unsigned)phase < 3 ? ph[phase] : "?";
}

const char *fsmoe_task_label(int phase, int layer, int chunk, fsmoe_task_kind k, char *buf,
                             int len)
{
    const char *p = fsmoe_phase_name(phase), *n = fsmoe_task_name(k);
    if (layer >= 0 && chunk >= 0)
        snprintf(buf, (size_t)len, "%s L%d c%d %s", p, layer, chunk, n);
    else if (layer >= 0)
        snprintf(buf, (size_t)len, "%s L%d %s", p, layer, n);
    else
        snprintf(buf, (size_t)len, "%s %s", p, n);
    return buf;
}
