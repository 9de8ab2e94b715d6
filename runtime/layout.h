/* Implements: where this rank sits in a multi-rank run (design.md §2, §10.1) and which part of
 * the data and of the experts it holds. Pure arithmetic (no MPI), so tests and the checkpoint
 * code can build any layout.
 *
 * Numbering follows libfsmoe/parallel.h with mp = esp = 1 (MP and ESP arrive with the next
 * runtime work): EP groups are blocks of ep consecutive ranks, EDP groups (the ranks holding
 * the same experts) stride ep, and every rank holds different samples: the global batch is
 * world · B samples, rank r holds samples [r·B, (r+1)·B) of it. Batch contents depend on the
 * seed and the step only, never on the world size, so world 1 with batch world·B sees exactly
 * the samples of the whole world (the equivalence oracle). */
#ifndef RT_LAYOUT_H
#define RT_LAYOUT_H

typedef struct {
    int world, rank, gpus_per_node;
    int dp, ep, edp;                /* dp = world (mp = 1); edp = world / ep */
    int ep_rank, edp_rank;          /* this rank's index in its EP and EDP group */
    long B, B_global, sample0;      /* samples per rank, in all, this rank's first */
    long E, E_local, expert0;       /* experts in all, on this rank, this rank's first */
} rt_layout;

/* Fills l for `rank` of `world` ranks with expert parallelism ep over E experts and B samples
 * per rank. The caller has checked that ep divides world and E. */
static inline rt_layout layout_make(int world, int rank, int gpus_per_node, int ep, long E, long B)
{
    rt_layout l;
    l.world = world, l.rank = rank, l.gpus_per_node = gpus_per_node;
    l.dp = world, l.ep = ep, l.edp = world / ep;
    l.ep_rank = rank % ep, l.edp_rank = rank / ep;
    l.B = B, l.B_global = B * world, l.sample0 = B * rank;
    l.E = E, l.E_local = E / ep, l.expert0 = (long)(rank % ep) * (E / ep);
    return l;
}

#endif
