/* Implements: what the planner's tests share to read the shipped inputs: models/<model>.yaml and
 * clusters/<cluster>.yaml under $FSMOE_SOURCE_ROOT (else "."), failing the test on any error.
 * Include after cmocka.h. */
#ifndef FSMOE_TESTS_TEST_LOAD_H
#define FSMOE_TESTS_TEST_LOAD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "model.h"

/* cpath gets the profile's path (len bytes). */
static inline void test_load_inputs(const char *model, const char *cluster, fsmoe_model *m,
                                    fsmoe_cluster *c, char *cpath, size_t len)
{
    const char *r = getenv("FSMOE_SOURCE_ROOT");
    char mpath[1024];
    snprintf(mpath, sizeof mpath, "%s/models/%s.yaml", r ? r : ".", model);
    snprintf(cpath, len, "%s/clusters/%s.yaml", r ? r : ".", cluster);
    memset(c, 0, sizeof *c);
    fsmoe_error err = {0};
    if (fsmoe_model_load(mpath, m, &err) != FSMOE_OK || fsmoe_cluster_load(cpath, c, &err))
        fail_msg("%s", err.msg);
}

#endif
