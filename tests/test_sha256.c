/* Implements: tests of SHA-256 against the FIPS 180-2 / NIST CAVS example vectors, plus the file
 * path (digest of a file equals digest of its bytes) and the unreadable-file error. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sha256.h"

/* Published digests (FIPS 180-2 Appendix B; empty string from NIST's examples). */
static const struct {
    const char *msg;
    const char *hex;
} vectors[] = {
    {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
    {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    /* 896-bit message of the NIST examples (padding spills into a third block) */
    {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
     "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
};

static void test_vectors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        char hex[FSMOE_SHA256_HEX];
        fsmoe_sha256_hex(vectors[i].msg, strlen(vectors[i].msg), hex);
        assert_string_equal(hex, vectors[i].hex);
    }
}

/* One million 'a', fed in uneven pieces so that the block buffering is exercised. */
static void test_million_a(void **state)
{
    (void)state;
    char piece[997];
    memset(piece, 'a', sizeof piece);
    fsmoe_sha256_ctx c;
    fsmoe_sha256_init(&c);
    size_t left = 1000000;
    size_t step = 1;
    while (left > 0) {
        size_t n = step < left ? step : left;
        fsmoe_sha256_update(&c, piece, n);
        left -= n;
        step = (step * 7 + 13) % sizeof piece + 1; /* 1..997, never past piece */
    }
    unsigned char d[FSMOE_SHA256_BYTES];
    fsmoe_sha256_final(&c, d);
    char hex[FSMOE_SHA256_HEX];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Padding boundaries: 55, 56, 63, 64 bytes — compare one-shot against byte-by-byte. */
static void test_boundaries(void **state)
{
    (void)state;
    static const size_t lens[] = {55, 56, 57, 63, 64, 65, 119, 120, 128};
    char buf[128];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (char)('0' + i % 40);
    for (size_t j = 0; j < sizeof lens / sizeof lens[0]; j++) {
        char a[FSMOE_SHA256_HEX], b[FSMOE_SHA256_HEX];
        fsmoe_sha256_hex(buf, lens[j], a);
        fsmoe_sha256_ctx c;
        unsigned char d[32];
        fsmoe_sha256_init(&c);
        for (size_t i = 0; i < lens[j]; i++)
            fsmoe_sha256_update(&c, buf + i, 1);
        fsmoe_sha256_final(&c, d);
        for (int i = 0; i < 32; i++)
            snprintf(b + 2 * i, 3, "%02x", d[i]);
        assert_string_equal(a, b);
    }
    /* 56 'a' bytes is a known two-block case: digest from Python hashlib. */
    char hex[FSMOE_SHA256_HEX];
    memset(buf, 'a', 56);
    fsmoe_sha256_hex(buf, 56, hex);
    assert_string_equal(hex, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
}

static void test_file(void **state)
{
    (void)state;
    char path[] = "/tmp/fsmoe_sha256_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "abc", 3), 3);
    close(fd);
    char hex[FSMOE_SHA256_HEX];
    fsmoe_error err = {0};
    assert_int_equal(fsmoe_sha256_file(path, hex, &err), FSMOE_OK);
    assert_string_equal(hex, vectors[1].hex);
    unlink(path);
    assert_int_equal(fsmoe_sha256_file(path, hex, &err), FSMOE_ERR_IO);
    assert_non_null(strstr(err.msg, path));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_million_a),
        cmocka_unit_test(test_boundaries),
        cmocka_unit_test(test_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
