/* Implements: tests of the status codes and the error record (status.h; style.md "Errors"):
 * every status has a distinct message, input errors exit 2 and the rest 1, and fsmoe_fail
 * records exactly one formatted message (truncated, never overflowing). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "status.h"

static void test_strerror(void **state)
{
    (void)state;
    assert_string_equal(fsmoe_strerror(FSMOE_OK), "success");
    assert_string_equal(fsmoe_strerror(FSMOE_ERR_PARSE), "not valid YAML");
    for (int a = 0; a < FSMOE_STATUS_COUNT; a++) {
        const char *sa = fsmoe_strerror((fsmoe_status)a);
        assert_non_null(sa);
        assert_true(strlen(sa) > 0);
        assert_string_not_equal(sa, "unknown status");
        for (int b = a + 1; b < FSMOE_STATUS_COUNT; b++)
            assert_string_not_equal(sa, fsmoe_strerror((fsmoe_status)b));
    }
    assert_string_equal(fsmoe_strerror(FSMOE_STATUS_COUNT), "unknown status");
    assert_string_equal(fsmoe_strerror((fsmoe_status)-1), "unknown status");
}

static void test_exit_codes(void **state)
{
    (void)state;
    /* the contract: usage and input errors 2, everything else 1, success 0 */
    static const int want[FSMOE_STATUS_COUNT] = {
        [FSMOE_OK] = 0,           [FSMOE_ERR_USAGE] = 2,   [FSMOE_ERR_IO] = 1,
        [FSMOE_ERR_PARSE] = 2,    [FSMOE_ERR_SCHEMA] = 2,  [FSMOE_ERR_VALUE] = 2,
        [FSMOE_ERR_NOMEM] = 1,    [FSMOE_ERR_SOLVER] = 1,  [FSMOE_ERR_INTERNAL] = 1, [FSMOE_ERR_MPI] = 1, [FSMOE_ERR_CUDA] = 1, [FSMOE_ERR_CUBLAS] = 1, [FSMOE_ERR_NCCL] = 1, [FSMOE_ERR_TIMEOUT] = 1,
    };
    for (int s = 0; s < FSMOE_STATUS_COUNT; s++)
        assert_int_equal(fsmoe_exit_code((fsmoe_status)s), want[s]);
}

static void test_fail_formats(void **state)
{
    (void)state;
    fsmoe_error err = {0};
    fsmoe_status st = fsmoe_fail(&err, FSMOE_ERR_VALUE, "%s:%d:%d: experts: %d is not divisible by ep=%d",
                                 "models/x.yaml", 14, 9, 6, 4);
    assert_int_equal(st, FSMOE_ERR_VALUE);
    assert_int_equal(err.status, FSMOE_ERR_VALUE);
    assert_string_equal(err.msg, "models/x.yaml:14:9: experts: 6 is not divisible by ep=4");
    /* a second failure replaces the first: one message per failure */
    fsmoe_fail(&err, FSMOE_ERR_IO, "b");
    assert_int_equal(err.status, FSMOE_ERR_IO);
    assert_string_equal(err.msg, "b");
    /* NULL record: the status still comes back */
    assert_int_equal(fsmoe_fail(NULL, FSMOE_ERR_SCHEMA, "dropped %d", 1), FSMOE_ERR_SCHEMA);
}

static void test_fail_truncates(void **state)
{
    (void)state;
    fsmoe_error err;
    memset(&err, 'x', sizeof err);
    char big[3 * FSMOE_ERROR_MAX];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    fsmoe_fail(&err, FSMOE_ERR_PARSE, "%s", big);
    assert_int_equal(strlen(err.msg), FSMOE_ERROR_MAX - 1);
    assert_int_equal(err.msg[FSMOE_ERROR_MAX - 1], '\0');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strerror),
        cmocka_unit_test(test_exit_codes),
        cmocka_unit_test(test_fail_formats),
        cmocka_unit_test(test_fail_truncates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
