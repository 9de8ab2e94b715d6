/* Implements: table-driven tests of the command-line parsers (libfsmoe/cli.h): each row is
 * {input, expected status, expected value or message fragment} (libinput test-utils style). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "cli.h"

static void test_long(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        long lo, hi;
        fsmoe_status st;
        long value;
        const char *fragment;
    } rows[] = {
        {"1", 1, 1000000, FSMOE_OK, 1, NULL},
        {"1000000", 1, 1000000, FSMOE_OK, 1000000, NULL},
        {"-3", -5, 5, FSMOE_OK, -3, NULL},
        {"+7", 0, 10, FSMOE_OK, 7, NULL},
        {"abc", 1, 1000000, FSMOE_ERR_USAGE, 0, "--batch: 'abc' is not an integer (expected 1..1000000)"},
        {"12x", 1, 100, FSMOE_ERR_USAGE, 0, "'12x' is not an integer"},
        {"", 1, 100, FSMOE_ERR_USAGE, 0, "'' is not an integer"},
        {" 5", 1, 100, FSMOE_ERR_USAGE, 0, "is not an integer"},
        {"5 ", 1, 100, FSMOE_ERR_USAGE, 0, "is not an integer"},
        {"1.5", 1, 100, FSMOE_ERR_USAGE, 0, "is not an integer"},
        {"0", 1, 100, FSMOE_ERR_USAGE, 0, "--batch: 0 is out of range (expected 1..100)"},
        {"101", 1, 100, FSMOE_ERR_USAGE, 0, "out of range"},
        {"99999999999999999999999", 1, 100, FSMOE_ERR_USAGE, 0, "out of range"},
        {"0x10", 1, 100, FSMOE_ERR_USAGE, 0, "is not an integer"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        fsmoe_error err = {0};
        long v = -12345;
        fsmoe_status st = fsmoe_cli_long("--batch", rows[i].text, rows[i].lo, rows[i].hi, &v, &err);
        if (st != rows[i].st)
            fail_msg("row %zu '%s': status %d, expected %d (%s)", i, rows[i].text, st, rows[i].st,
                     err.msg);
        if (st == FSMOE_OK) {
            assert_int_equal(v, rows[i].value);
        } else {
            assert_int_equal(v, -12345); /* untouched on failure */
            if (!strstr(err.msg, rows[i].fragment))
                fail_msg("row %zu: message '%s' lacks '%s'", i, err.msg, rows[i].fragment);
        }
    }
    int iv = 0;
    assert_int_equal(fsmoe_cli_int("--dp", "4", 1, 8, &iv, NULL), FSMOE_OK);
    assert_int_equal(iv, 4);
    assert_int_equal(fsmoe_cli_int("--dp", "9", 1, 8, &iv, NULL), FSMOE_ERR_USAGE);
}

static void test_double(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        fsmoe_status st;
        double value;
        const char *fragment;
    } rows[] = {
        {"1.2", FSMOE_OK, 1.2, NULL},
        {"2", FSMOE_OK, 2.0, NULL},
        {"1e-6", FSMOE_OK, 1e-6, NULL},
        {"0", FSMOE_OK, 0.0, NULL},
        {"1.2.3", FSMOE_ERR_USAGE, 0, "--rtol: '1.2.3' is not a number"},
        {"x", FSMOE_ERR_USAGE, 0, "is not a number"},
        {"", FSMOE_ERR_USAGE, 0, "is not a number"},
        {"nan", FSMOE_ERR_USAGE, 0, "out of range"},
        {"inf", FSMOE_ERR_USAGE, 0, "out of range"},
        {"-0.5", FSMOE_ERR_USAGE, 0, "out of range (expected 0..100)"},
        {"1e400", FSMOE_ERR_USAGE, 0, "out of range"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        fsmoe_error err = {0};
        double v = -1;
        fsmoe_status st = fsmoe_cli_double("--rtol", rows[i].text, 0, 100, &v, &err);
        if (st != rows[i].st)
            fail_msg("row %zu '%s': status %d (%s)", i, rows[i].text, st, err.msg);
        if (st == FSMOE_OK)
            assert_true(v == rows[i].value);
        else if (!strstr(err.msg, rows[i].fragment))
            fail_msg("row %zu: message '%s' lacks '%s'", i, err.msg, rows[i].fragment);
    }
}

static void test_size(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        fsmoe_status st;
        long long value;
    } rows[] = {
        {"0", FSMOE_OK, 0},
        {"4096", FSMOE_OK, 4096},
        {"1K", FSMOE_OK, 1024},
        {"30M", FSMOE_OK, 30LL * 1024 * 1024},
        {"30m", FSMOE_OK, 30LL * 1024 * 1024},
        {"2G", FSMOE_OK, 2LL * 1024 * 1024 * 1024},
        {"8MiB", FSMOE_OK, 8LL * 1024 * 1024},
        {"1KB", FSMOE_ERR_USAGE, 0},
        {"1T", FSMOE_ERR_USAGE, 0},
        {"M", FSMOE_ERR_USAGE, 0},
        {"-1K", FSMOE_ERR_USAGE, 0},
        {"1.5M", FSMOE_ERR_USAGE, 0},
        {"9000000000G", FSMOE_ERR_USAGE, 0},
        {"5G", FSMOE_ERR_USAGE, 0}, /* above hi */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        fsmoe_error err = {0};
        long long v = -1;
        fsmoe_status st = fsmoe_cli_size("--size", rows[i].text, 0, 4LL << 30, &v, &err);
        if (st != rows[i].st)
            fail_msg("row %zu '%s': status %d (%s)", i, rows[i].text, st, err.msg);
        if (st == FSMOE_OK)
            assert_int_equal(v, rows[i].value);
        else
            assert_non_null(strstr(err.msg, "--size: "));
    }
}

static void test_enum(void **state)
{
    (void)state;
    static const fsmoe_cli_enum methods[] = {
        {"auto", 0}, {"fsmoe", 1}, {"fsmoe-paper", 2}, {"parm", 3}, {"monta", 4}, {NULL, 0}};
    int v = -1;
    assert_int_equal(fsmoe_cli_enum_parse("--method", "parm", methods, &v, NULL), FSMOE_OK);
    assert_int_equal(v, 3);
    assert_int_equal(fsmoe_cli_enum_parse("--method", "fsmoe-paper", methods, &v, NULL), FSMOE_OK);
    assert_int_equal(v, 2);
    fsmoe_error err = {0};
    v = -1;
    assert_int_equal(fsmoe_cli_enum_parse("--method", "Parm", methods, &v, &err), FSMOE_ERR_USAGE);
    assert_int_equal(v, -1);
    assert_string_equal(err.msg,
                        "--method: 'Parm' is not one of: auto, fsmoe, fsmoe-paper, parm, monta");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long),
        cmocka_unit_test(test_double),
        cmocka_unit_test(test_size),
        cmocka_unit_test(test_enum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
