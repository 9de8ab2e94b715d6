/* Implements: the progress bar of fsmoe-bench: one line on stderr, redrawn in place, only when
 * stderr is a terminal (or --progress), only on rank 0, cleared before table rows are printed
 * so that the nccl-tests table on stdout stays clean. */
#ifndef BENCH_PROGRESS_H
#define BENCH_PROGRESS_H

typedef struct {
    int enabled;
    long total, done;
    double t0;
    int drawn;
} progress;

void progress_init(progress *p, long total, int enabled);
void progress_step(progress *p, const char *label); /* one unit done, label = what is next;
                                                     * more steps than total hold at 99 % */
void progress_clear(progress *p);
void progress_finish(progress *p);

#endif
