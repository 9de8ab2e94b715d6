/* Implements: FSMoE Table 4's configured-layer grid and the per-configuration plan (FSMoE §6,
 * design.md §11). See table4.h for the grid and its order.
 * Relies on: workload.c, pipeline_degree.c, parm_schedule.c, monta_a2a.c. */
#include "table4.h"

#include <string.h>

fsmoe_parallel table4_layout(const fsmoe_cluster *c)
{
    return fsmoe_parallel_common(c->nodes, c->gpus_per_node);
}

fsmoe_status table4_shape(char testbed, int i, const fsmoe_parallel *par, workload_shape *out,
                          fsmoe_error *err)
{
    static const long Bs[3] = {1, 2, 4};
    static const long heads[3] = {8, 16, 32};
    static const long L_a[3] = {512, 1024, 2048};
    static const long L_b[3] = {256, 512, 1024}; /* Testbed B's 2080 Ti have 11 GB */
    static const long Ms[3] = {1024, 2048, 4096};
    static const long HM[3] = {2, 3, 4};
    static const double fs[3] = {1.2, 2.4, 0.0}; /* 0 = none */
    const long *Ls;
    if (testbed == 'a' || testbed == 'A')
        Ls = L_a;
    else if (testbed == 'b' || testbed == 'B')
        Ls = L_b;
    else
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "table4: testbed '%c' is not 'a' or 'b'", testbed);
    if (i < 0 || i >= TABLE4_COUNT)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "table4: configuration %d is not in 0..%d", i,
                          TABLE4_COUNT - 1);
    memset(out, 0, sizeof *out);
    int rest = i;
    out->expert = (rest % 2) ? FSMOE_EXPERT_SWIGLU : FSMOE_EXPERT_GPT, rest /= 2;
    out->f = fs[rest % 3], rest /= 3;
    long hm = HM[rest % 3];
    rest /= 3;
    out->M = Ms[rest % 3], rest /= 3;
    out->L = Ls[rest % 3], rest /= 3;
    out->heads = heads[rest % 3], rest /= 3;
    out->B = Bs[rest % 3];
    out->H = hm * out->M;
    out->kv_heads = out->heads;
    out->E = par->ep; /* one expert per EP rank, as in the paper's configured layers */
    out->k = 2;
    out->vocab = 0;   /* no embedding in a configured layer */
    out->bytes_per_element = 4;
    return FSMOE_OK;
}

fsmoe_status table4_plan_config(const workload_shape *s, const fsmoe_parallel *par,
                                const workload_lines *w,
                                pipeline_method m, table4_plan *out, fsmoe_error *err)
{
    workload_layer_init(s, par, w, &out->layer);
    fsmoe_status st = pipeline_solve(&out->layer.fwd, m, &out->fwd, err);
    if (st != FSMOE_OK)
        return st;
    /* attention then MoE: the MoE backward comes first, before any DP gradient is ready */
    out->t_gar_s = 0.0;
    out->layer.bwd.t_gar = 0.0;
    st = pipeline_solve(&out->layer.bwd, m, &out->bwd, err);
    if (st != FSMOE_OK)
        return st;

    parm_choose(s, par, w, &out->parm);

    monta_entries me;
    monta_problem mp;
    monta_problem_init(&mp, s, par, w, &me);
    monta_solve(&mp, &out->monta);
    return FSMOE_OK;
}
