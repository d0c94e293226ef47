/* Unit tests of api/base64.c: the base64 of envd's bytes, MCP's blobs
 * and the Authorization headers of E2B's SDKs. Decoding takes both
 * alphabets, padded or not, refuses anything else, and ends what it gives
 * with a NUL, which callers that look for a user's name rely on. */
#include "unit_util.h"

#include "api/base64.h"

static void assert_decodes(const char *text, const char *expected, size_t expected_len)
{
    char *out = NULL;
    size_t len = 0;
    if (!api_base64_decode(text, strlen(text), &out, &len))
        fail_msg("\"%s\" was refused", text);
    assert_int_equal(len, expected_len);
    assert_memory_equal(out, expected, len);
    assert_int_equal(out[len], 0);
    free(out);
}

static void assert_refused(const char *text, size_t len)
{
    char *out = (char *)"untouched";
    size_t out_len = 0;
    assert_false(api_base64_decode(text, len, &out, &out_len));
    assert_string_equal(out, "untouched");
}

static void both_alphabets_padded_or_not(void **state)
{
    (void)state;
    assert_decodes("", "", 0);
    assert_decodes("dXNlcjo=", "user:", 5);
    assert_decodes("dXNlcjo", "user:", 5);
    assert_decodes("cm9vdDo=", "root:", 5);
    assert_decodes("+/8=", "\xfb\xff", 2);
    assert_decodes("-_8", "\xfb\xff", 2); /* URL-safe, as proto3 JSON allows */
    assert_decodes("AAE=", "\x00\x01", 2);
}

static void what_is_not_base64_is_refused(void **state)
{
    (void)state;
    assert_refused("!!!", 3);
    assert_refused("dXNl cjo=", 9);
    assert_refused("dX=Ncjo=", 8);  /* padding only at the end */
    assert_refused("dXNlc", 5);     /* one character past a group: no byte */
    assert_refused("dXNl\0cjo=", 9); /* a NUL inside the text */
}

/* "user" has no ':' to stop a search for one: the NUL after it does
 * (e2b_process.c reads the name with strcspn). */
static void what_is_decoded_ends_with_a_nul(void **state)
{
    (void)state;
    static const char *const texts[] = {"dXNlcg==", "dXNlcg", "dQ", "dXM", "dXNl"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        char *out;
        size_t len;
        assert_true(api_base64_decode(texts[i], strlen(texts[i]), &out, &len));
        assert_int_equal(strcspn(out, ":"), len);
        free(out);
    }
}

static void encoding_round_trips(void **state)
{
    (void)state;
    unsigned char bytes[256];
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (unsigned char)(255 - i);
    for (size_t len = 0; len <= sizeof bytes; len += 37)
        for (int pad = 0; pad <= 1; pad++) {
            size_t text_len;
            char *text = api_base64_encode(bytes, len, pad, &text_len);
            assert_non_null(text);
            assert_int_equal(strlen(text), text_len);
            assert_decodes(text, (const char *)bytes, len);
            free(text);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(both_alphabets_padded_or_not),
        cmocka_unit_test(what_is_not_base64_is_refused),
        cmocka_unit_test(what_is_decoded_ends_with_a_nul),
        cmocka_unit_test(encoding_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
