/* Implements: the stderr progress bar (progress.h). */
#include "progress.h"

#include <stdio.h>

#include "measure.h"

void progress_init(progress *p, long total, int enabled)
{
    p->enabled = enabled;
    p->total = total > 0 ? total : 1;
    p->done = 0;
    p->t0 = measure_now();
    p->drawn = 0;
}

void progress_step(progress *p, const char *label)
{
    p->done++;
    if (!p->enabled)
        return;
    enum { WIDTH = 30 };
    long fill = p->done * WIDTH / p->total;
    if (fill > WIDTH)
        fill = WIDTH;
    char bar[WIDTH + 1];
    for (int i = 0; i < WIDTH; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[WIDTH] = '\0';
    /* Extra passes (sizes that need more runs) come on top of the planned rows: hold at 99 %. */
    long pct = p->done * 100 / p->total;
    fprintf(stderr, "\r\033[K[%s] %3ld%% %6.1f s  %s", bar, pct > 99 ? 99 : pct,
            measure_now() - p->t0, label ? label : "");
    fflush(stderr);
    p->drawn = 1;
}

void progress_clear(progress *p)
{
    if (p->enabled && p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        p->drawn = 0;
    }
}

void progress_finish(progress *p)
{
    progress_clear(p);
}
