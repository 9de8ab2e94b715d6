/* Implements: where this rank sits in a multi-rank run (design.md §2, §10.1) and which part of
 * the data, the dense tensors and the experts it holds. Pure arithmetic (no MPI), so tests and
 * the checkpoint code can build any layout.
 *
 * Numbering follows libfsmoe/parallel.h: ranks are node-major; MP groups are blocks of mp
 * consecutive ranks and DP strides mp; ESP groups are blocks of esp consecutive ranks, EP
 * strides esp inside blocks of ep·esp consecutive ranks (the EP&ESP group), and EDP (the ranks
 * holding the same expert slice) strides ep·esp. The members of an MP group hold the same
 * samples (tensor parallelism duplicates the activations); DP groups hold different ones: the
 * global batch is dp · B samples, rank r holds samples [dp_rank·B, (dp_rank+1)·B) of it. Batch
 * contents depend on the seed and the step only, never on the world size, so world 1 with
 * batch dp·B sees exactly the samples of the whole world (the equivalence oracle). */
#ifndef RT_LAYOUT_H
#define RT_LAYOUT_H

typedef struct {
    int world, rank, gpus_per_node;
    int dp, mp, ep, esp, edp;       /* dp = world / mp; edp = world / (ep·esp) */
    int dp_rank, mp_rank, ep_rank, esp_rank, edp_rank; /* this rank's index in each group */
    long B, B_global, sample0;      /* samples per rank, in all, this rank's first */
    long E, E_local, expert0;       /* experts in all, on this rank, this rank's first */
} rt_layout;

/* Fills l for `rank` of `world` ranks with tensor parallelism mp, expert parallelism ep and
 * expert slicing esp over E experts, and B samples per rank. The caller has checked that mp
 * and ep·esp divide world and ep divides E. */
static inline rt_layout layout_make_mp(int world, int rank, int gpus_per_node, int mp, int ep,
                                       int esp, long E, long B)
{
    rt_layout l;
    l.world = world, l.rank = rank, l.gpus_per_node = gpus_per_node;
    l.mp = mp, l.ep = ep, l.esp = esp;
    l.dp = world / mp, l.edp = world / (ep * esp);
    l.mp_rank = rank % mp, l.dp_rank = rank / mp;
    l.esp_rank = rank % esp, l.ep_rank = rank / esp % ep, l.edp_rank = rank / (ep * esp);
    l.B = B, l.B_global = B * l.dp, l.sample0 = B * l.dp_rank;
    l.E = E, l.E_local = E / ep, l.expert0 = (long)l.ep_rank * (E / ep);
    return l;
}

/* The layout without tensor parallelism or expert slicing (mp = esp = 1). */
static inline rt_layout layout_make(int world, int rank, int gpus_per_node, int ep, long E, long B)
{
    return layout_make_mp(world, rank, gpus_per_node, 1, ep, 1, E, B);
}

#endif
