/* Unit tests of api/percent.c: percent-decoding as E2B's metadata filter
 * and MCP's resource URIs read it. A broken escape is refused rather than
 * kept as it stands, an encoded NUL is refused (a C string would end
 * there unseen), and no escape is read past the text's end. */
#include "unit_util.h"

#include "api/percent.h"

/* Decodes a copy of text; NULL when refused. */
static char *decoded(const char *text)
{
    char *copy = strdup(text);
    assert_non_null(copy);
    if (api_percent_decode(copy))
        return copy;
    free(copy);
    return NULL;
}

static void assert_decodes(const char *text, const char *expected)
{
    char *got = decoded(text);
    if (!got)
        fail_msg("\"%s\" was refused", text);
    assert_string_equal(got, expected);
    free(got);
}

static void assert_refused(const char *text)
{
    char *got = decoded(text);
    if (got)
        fail_msg("\"%s\" was taken as \"%s\"", text, got);
}

static void escapes_become_their_bytes(void **state)
{
    (void)state;
    assert_decodes("", "");
    assert_decodes("plain-text_1.~", "plain-text_1.~");
    assert_decodes("a%20b", "a b");
    assert_decodes("%2f%2F", "//"); /* either case of hex */
    assert_decodes("%41%42%43", "ABC");
    assert_decodes("%C3%A9t%C3%A9", "\xc3\xa9t\xc3\xa9");
    assert_decodes("%ff", "\xff");
    assert_decodes("100%25", "100%");
    assert_decodes("a+b", "a+b"); /* a form's '+' is the caller's concern */
}

static void text_is_decoded_once_per_call(void **state)
{
    (void)state;
    assert_decodes("%2541", "%41"); /* the decoded '%' starts no new escape */
    /* E2B's SDKs encode metadata twice: e2b_list.c decodes twice. */
    char text[] = "a%2520b";
    assert_true(api_percent_decode(text));
    assert_string_equal(text, "a%20b");
    assert_true(api_percent_decode(text));
    assert_string_equal(text, "a b");
}

static void broken_escapes_are_refused(void **state)
{
    (void)state;
    static const char *const broken[] = {
        "%", "a%", "%4", "a%4", "%4%41", "%zz", "%4z", "%z4", "%g0", "% 41",
        "%+1", "%-1", "%0x", "ok%2", "%%41", "%\xc3\xa9",
    };
    for (size_t i = 0; i < sizeof broken / sizeof *broken; i++)
        assert_refused(broken[i]);
}

static void an_encoded_nul_is_refused(void **state)
{
    (void)state;
    assert_refused("%00");
    assert_refused("a%00b");
    assert_refused("key%00.hidden");
    assert_decodes("%01", "\x01"); /* control bytes are the callers' to refuse */
}

static void one_escape_gives_its_byte(void **state)
{
    (void)state;
    assert_int_equal(api_percent_byte("%2F"), 0x2f);
    assert_int_equal(api_percent_byte("%2fzz"), 0x2f); /* what follows is not read */
    assert_int_equal(api_percent_byte("%FF"), 255);     /* never a negative char */
    assert_int_equal(api_percent_byte("%00"), 0);       /* the caller decides on NUL */
    assert_int_equal(api_percent_byte("%"), -1);
    assert_int_equal(api_percent_byte("%4"), -1);
    assert_int_equal(api_percent_byte("%zz"), -1);
    assert_int_equal(api_percent_byte("41"), -1);
    assert_int_equal(api_percent_byte(""), -1);
}

/* Escapes cut short at the very end of their allocation: under ASan a
 * read past the NUL would stop the test. */
static void a_cut_escape_is_not_read_past_its_end(void **state)
{
    (void)state;
    static const char *const cut[] = {"%", "%4", "x%", "x%a"};
    for (size_t i = 0; i < sizeof cut / sizeof *cut; i++) {
        size_t len = strlen(cut[i]);
        char *text = malloc(len + 1);
        assert_non_null(text);
        memcpy(text, cut[i], len + 1);
        assert_int_equal(api_percent_byte(strchr(text, '%')), -1);
        assert_false(api_percent_decode(text));
        free(text);
    }
}

static void a_long_text_decodes_whole(void **state)
{
    (void)state;
    size_t n = 100000;
    char *text = malloc(3 * n + 1), *expected = malloc(n + 1);
    assert_non_null(text);
    assert_non_null(expected);
    for (size_t i = 0; i < n; i++) {
        memcpy(text + 3 * i, "%41", 3);
        expected[i] = 'A';
    }
    text[3 * n] = 0;
    expected[n] = 0;
    assert_true(api_percent_decode(text));
    assert_string_equal(text, expected);
    free(text);
    free(expected);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(escapes_become_their_bytes),
        cmocka_unit_test(text_is_decoded_once_per_call),
        cmocka_unit_test(broken_escapes_are_refused),
        cmocka_unit_test(an_encoded_nul_is_refused),
        cmocka_unit_test(one_escape_gives_its_byte),
        cmocka_unit_test(a_cut_escape_is_not_read_past_its_end),
        cmocka_unit_test(a_long_text_decodes_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
