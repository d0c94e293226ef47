/* Unit tests of capture.c: the bounded head-and-tail capture of a stream
 * and the UTF-8 helpers. */
#include "unit_util.h"

#include "base/capture.h"
#include "runbox.h"

#include <malloc.h>

#define FFFD "\xEF\xBF\xBD"

/* ---- helpers ---------------------------------------------------------- */

/* Deterministic ASCII: the byte a test stream holds at offset o. Looks
 * random enough that a misplaced byte range cannot match by chance. */
static char pattern_byte(uint64_t o)
{
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    uint64_t x = (o + 1) * 0x9E3779B97F4A7C15ull;
    return alnum[(x >> 40) % 62];
}

static char *pattern(size_t len)
{
    char *data = malloc(len + 1);
    assert_non_null(data);
    for (size_t i = 0; i < len; i++)
        data[i] = pattern_byte(i);
    data[len] = 0;
    return data;
}

/* Feeds data to a fresh capture in chunks of chunk bytes (0: in one add). */
static char *capture_in_chunks(size_t cap, const char *data, size_t len, size_t chunk,
                               const char *stream, uint64_t *dropped, size_t *out_len)
{
    rbx_capture capture;
    assert_int_equal(rbx_capture_init(&capture, cap), 0);
    if (chunk == 0)
        chunk = len ? len : 1;
    for (size_t at = 0; at < len; at += chunk)
        rbx_capture_add(&capture, data + at, len - at < chunk ? len - at : chunk);
    char *text = rbx_capture_finish(&capture, stream, dropped, out_len);
    assert_non_null(text);
    assert_null(capture.head);
    assert_null(capture.tail);
    return text;
}

/* What a capture of ASCII data must return: the first cap/2 bytes, one
 * marker line, the last cap - cap/2 bytes. */
static char *expected_capture(size_t cap, const char *data, size_t len, const char *stream,
                              size_t *out_len)
{
    size_t head = cap / 2, tail = cap - head;
    char *out = malloc(len + 256);
    assert_non_null(out);
    if (len <= cap) {
        memcpy(out, data, len);
        *out_len = len;
        return out;
    }
    size_t at = 0;
    memcpy(out, data, head);
    at += head;
    at += (size_t)sprintf(out + at, "\n[runbox: %zu bytes of %s left out here]\n", len - cap,
                          stream);
    memcpy(out + at, data + len - tail, tail);
    at += tail;
    *out_len = at;
    return out;
}

static size_t count_occurrences(const char *hay, size_t len, const char *needle)
{
    size_t n = 0, nlen = strlen(needle);
    for (size_t i = 0; i + nlen <= len; i++)
        if (memcmp(hay + i, needle, nlen) == 0)
            n++;
    return n;
}

/* An independent strict UTF-8 check (RFC 3629), not the code under test. */
static bool valid_utf8(const char *text, size_t len)
{
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n;
        if (s[i] < 0x80) {
            i++;
            continue;
        } else if ((s[i] & 0xE0) == 0xC0) {
            n = 2;
            cp = s[i] & 0x1F;
        } else if ((s[i] & 0xF0) == 0xE0) {
            n = 3;
            cp = s[i] & 0x0F;
        } else if ((s[i] & 0xF8) == 0xF0) {
            n = 4;
            cp = s[i] & 0x07;
        } else
            return false;
        if (i + n > len)
            return false;
        for (size_t k = 1; k < n; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        static const uint32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_for_len[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += n;
    }
    return true;
}

static char *sanitize(const char *data, size_t len, size_t *out_len)
{
    char *out = rbx_utf8_sanitize(data, len, out_len);
    assert_non_null(out);
    assert_int_equal(out[*out_len], 0);
    assert_true(valid_utf8(out, *out_len));
    return out;
}

static void assert_sanitized_to(const char *data, size_t len, const char *expected,
                                size_t expected_len)
{
    size_t out_len;
    char *out = sanitize(data, len, &out_len);
    assert_int_equal(out_len, expected_len);
    assert_memory_equal(out, expected, expected_len);
    free(out);
}

#define ASSERT_SANITIZED(in, out) assert_sanitized_to(in, sizeof in - 1, out, sizeof out - 1)

/* ---- capture ---------------------------------------------------------- */

static void empty_stream_gives_empty_text(void **state)
{
    (void)state;
    uint64_t dropped = 99;
    size_t len = 99;
    char *text = capture_in_chunks(64, "", 0, 0, "stdout", &dropped, &len);
    assert_int_equal(len, 0);
    assert_string_equal(text, "");
    assert_int_equal(dropped, 0);
    free(text);
}

static void stream_under_cap_is_kept_verbatim(void **state)
{
    (void)state;
    const char *data = "line one\nline two\n\ttabbed \xC3\xA9t\xC3\xA9\n";
    uint64_t dropped;
    size_t len;
    char *text = capture_in_chunks(64, data, strlen(data), 0, "stdout", &dropped, &len);
    assert_int_equal(len, strlen(data));
    assert_string_equal(text, data);
    assert_int_equal(dropped, 0);
    free(text);
}

static void stream_of_exactly_cap_bytes_has_no_marker(void **state)
{
    (void)state;
    char *data = pattern(64);
    uint64_t dropped;
    size_t len;
    char *text = capture_in_chunks(64, data, 64, 0, "stdout", &dropped, &len);
    assert_int_equal(len, 64);
    assert_memory_equal(text, data, 64);
    assert_int_equal(dropped, 0);
    assert_null(strstr(text, "[runbox:"));
    free(text);
    free(data);
}

static void one_byte_over_cap_drops_exactly_one_byte(void **state)
{
    (void)state;
    char *data = pattern(65);
    uint64_t dropped;
    size_t len;
    char *text = capture_in_chunks(64, data, 65, 0, "stdout", &dropped, &len);
    assert_int_equal(dropped, 1);
    /* head: bytes 0..31, then the marker, then tail: bytes 33..64 */
    const char *marker = "\n[runbox: 1 bytes of stdout left out here]\n";
    assert_int_equal(len, 32 + strlen(marker) + 32);
    assert_memory_equal(text, data, 32);
    assert_memory_equal(text + 32, marker, strlen(marker));
    assert_memory_equal(text + 32 + strlen(marker), data + 33, 32);
    free(text);
    free(data);
}

static void stream_past_cap_keeps_head_marker_and_tail(void **state)
{
    (void)state;
    char *data = pattern(10000);
    uint64_t dropped;
    size_t len, expected_len;
    char *text = capture_in_chunks(100, data, 10000, 0, "stdout", &dropped, &len);
    char *expected = expected_capture(100, data, 10000, "stdout", &expected_len);
    assert_int_equal(dropped, 9900);
    assert_int_equal(len, expected_len);
    assert_memory_equal(text, expected, len);
    assert_int_equal(count_occurrences(text, len, "[runbox: 9900 bytes of stdout left out here]"),
                     1);
    assert_int_equal(count_occurrences(text, len, "[runbox:"), 1);
    free(expected);
    free(text);
    free(data);
}

static void marker_names_the_stream(void **state)
{
    (void)state;
    char *data = pattern(200);
    uint64_t dropped;
    size_t len;
    char *text = capture_in_chunks(64, data, 200, 0, "stderr", &dropped, &len);
    assert_int_equal(dropped, 136);
    assert_non_null(strstr(text, "\n[runbox: 136 bytes of stderr left out here]\n"));
    assert_null(strstr(text, "stdout"));
    free(text);
    free(data);
}

static void odd_cap_gives_the_extra_byte_to_the_tail(void **state)
{
    (void)state;
    char *data = pattern(300);
    uint64_t dropped;
    size_t len, expected_len;
    char *text = capture_in_chunks(65, data, 300, 7, "stdout", &dropped, &len);
    char *expected = expected_capture(65, data, 300, "stdout", &expected_len);
    assert_int_equal(dropped, 235);
    assert_int_equal(len, expected_len);
    assert_memory_equal(text, expected, len);
    assert_memory_equal(text + len - 33, data + 300 - 33, 33);
    free(expected);
    free(text);
    free(data);
}

static void many_small_adds_equal_one_big_add(void **state)
{
    (void)state;
    const size_t total = 50000, cap = 256;
    char *data = pattern(total);
    uint64_t dropped_big;
    size_t len_big;
    char *big = capture_in_chunks(cap, data, total, 0, "stdout", &dropped_big, &len_big);
    /* Chunks smaller than, equal to and larger than each half of the cap. */
    const size_t chunks[] = {1, 2, 3, 7, 31, 127, 128, 129, 200, 255, 256, 257, 1000, 4096};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        uint64_t dropped;
        size_t len;
        char *small = capture_in_chunks(cap, data, total, chunks[c], "stdout", &dropped, &len);
        assert_int_equal(dropped, dropped_big);
        assert_int_equal(len, len_big);
        assert_memory_equal(small, big, len);
        free(small);
    }
    size_t expected_len;
    char *expected = expected_capture(cap, data, total, "stdout", &expected_len);
    assert_int_equal(len_big, expected_len);
    assert_memory_equal(big, expected, expected_len);
    free(expected);
    free(big);
    free(data);
}

static void irregular_adds_that_wrap_the_ring_keep_the_last_bytes(void **state)
{
    (void)state;
    /* cap 64: head 32, ring 32. Adds of varying size wrap the ring at
     * different positions, with one add larger than the ring in between. */
    const size_t sizes[] = {5, 30, 20, 1, 31, 33, 9, 17, 2, 40, 3, 25};
    size_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        total += sizes[i];
    char *data = pattern(total);
    rbx_capture capture;
    rbx_capture_init(&capture, 64);
    size_t at = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        rbx_capture_add(&capture, data + at, sizes[i]);
        at += sizes[i];
    }
    uint64_t dropped;
    size_t len, expected_len;
    char *text = rbx_capture_finish(&capture, "stdout", &dropped, &len);
    char *expected = expected_capture(64, data, total, "stdout", &expected_len);
    assert_int_equal(dropped, total - 64);
    assert_int_equal(len, expected_len);
    assert_memory_equal(text, expected, len);
    free(expected);
    free(text);
    free(data);
}

static void hundred_mib_stream_stays_within_the_cap(void **state)
{
    (void)state;
    const size_t cap = 1 << 20, chunk = 64 << 10;
    const uint64_t total = 100ull << 20;
    char *buf = malloc(chunk);
    assert_non_null(buf);
    rbx_capture capture;
    rbx_capture_init(&capture, cap);
    assert_int_equal(capture.head_cap + capture.tail_cap, cap);
    char *head = NULL, *tail = NULL;
    for (uint64_t at = 0; at < total; at += chunk) {
        for (size_t i = 0; i < chunk; i++)
            buf[i] = pattern_byte(at + i);
        rbx_capture_add(&capture, buf, chunk);
        /* Never more than the cap, and never a reallocation: the buffers
         * allocated on first use are the ones kept to the end. */
        assert_true(capture.head_len <= capture.head_cap);
        assert_true(capture.tail_len <= capture.tail_cap);
        assert_true(capture.tail_pos < capture.tail_cap);
        if (!head)
            head = capture.head;
        if (!tail)
            tail = capture.tail;
        assert_ptr_equal(capture.head, head);
        if (tail)
            assert_ptr_equal(capture.tail, tail);
    }
    /* Each buffer is no larger than its half of the cap (plus the
     * allocator's page rounding). */
    assert_true(malloc_usable_size(capture.head) < capture.head_cap + 8192);
    assert_true(malloc_usable_size(capture.tail) < capture.tail_cap + 8192);
    free(buf);
    assert_int_equal(capture.total, total);
    uint64_t dropped;
    size_t len;
    char *text = rbx_capture_finish(&capture, "stdout", &dropped, &len);
    assert_non_null(text);
    assert_int_equal(dropped, total - cap);
    char marker[96];
    int marker_len = snprintf(marker, sizeof marker,
                              "\n[runbox: %llu bytes of stdout left out here]\n",
                              (unsigned long long)(total - cap));
    assert_int_equal(len, cap + (size_t)marker_len);
    for (size_t i = 0; i < cap / 2; i++)
        if (text[i] != pattern_byte(i))
            fail_msg("head byte %zu differs", i);
    assert_memory_equal(text + cap / 2, marker, (size_t)marker_len);
    const char *kept_tail = text + cap / 2 + marker_len;
    for (size_t i = 0; i < cap / 2; i++)
        if (kept_tail[i] != pattern_byte(total - cap / 2 + i))
            fail_msg("tail byte %zu differs", i);
    free(text);
}

static void finish_replaces_invalid_utf8(void **state)
{
    (void)state;
    const char data[] = "ok \xFF\xFE done";
    uint64_t dropped;
    size_t len;
    char *text = capture_in_chunks(64, data, sizeof data - 1, 0, "stdout", &dropped, &len);
    const char expected[] = "ok " FFFD FFFD " done";
    assert_int_equal(len, sizeof expected - 1);
    assert_memory_equal(text, expected, len);
    assert_int_equal(dropped, 0);
    free(text);
}

static void finish_keeps_nul_bytes(void **state)
{
    (void)state;
    const char data[] = "a\0b\0\0c";
    uint64_t dropped;
    size_t len;
    char *text = capture_in_chunks(64, data, sizeof data - 1, 1, "stdout", &dropped, &len);
    assert_int_equal(len, 6);
    assert_memory_equal(text, data, 6);
    assert_int_equal(text[6], 0);
    free(text);
}

static void finish_is_valid_utf8_when_the_cut_splits_characters(void **state)
{
    (void)state;
    /* 3-byte characters: the head ends and the tail starts inside one. */
    char data[3 * 100];
    for (size_t i = 0; i < sizeof data; i += 3)
        memcpy(data + i, "\xE2\x82\xAC", 3); /* € */
    uint64_t dropped;
    size_t len;
    char *text = capture_in_chunks(64, data, sizeof data, 0, "stdout", &dropped, &len);
    assert_int_equal(dropped, sizeof data - 64);
    assert_true(valid_utf8(text, len));
    assert_int_equal(count_occurrences(text, len, "[runbox: 236 bytes of stdout left out here]"),
                     1);
    /* The whole characters on either side of the cut survive. */
    assert_memory_equal(text, "\xE2\x82\xAC\xE2\x82\xAC", 6);
    assert_memory_equal(text + len - 6, "\xE2\x82\xAC\xE2\x82\xAC", 6);
    free(text);
}

/* ---- rbx_utf8_sanitize ------------------------------------------------ */

static void sanitize_keeps_valid_text(void **state)
{
    (void)state;
    /* ASCII, 2-, 3- and 4-byte characters, and the edges of each range. */
    ASSERT_SANITIZED("plain ASCII\n", "plain ASCII\n");
    ASSERT_SANITIZED("caf\xC3\xA9 \xE2\x82\xAC \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80",
                     "caf\xC3\xA9 \xE2\x82\xAC \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80");
    ASSERT_SANITIZED("\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80\xEF\xBF\xBF",
                     "\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80\xEF\xBF\xBF");
    ASSERT_SANITIZED("\xF0\x90\x80\x80\xF4\x8F\xBF\xBF", "\xF0\x90\x80\x80\xF4\x8F\xBF\xBF");
    ASSERT_SANITIZED(FFFD, FFFD);
}

static void sanitize_replaces_invalid_bytes(void **state)
{
    (void)state;
    ASSERT_SANITIZED("a\xFF" "b", "a" FFFD "b");
    ASSERT_SANITIZED("a\xFE" "b", "a" FFFD "b");
    ASSERT_SANITIZED("\x80", FFFD);                 /* lone continuation byte */
    ASSERT_SANITIZED("x\xBF\x80y", "x" FFFD FFFD "y");
    ASSERT_SANITIZED("\xF5\x80\x80\x80", FFFD FFFD FFFD FFFD); /* lead byte past U+10FFFF */
    ASSERT_SANITIZED("\xF4\x90\x80\x80", FFFD FFFD FFFD FFFD); /* U+110000 */
    ASSERT_SANITIZED("\xC3(", FFFD "(");            /* lead byte then ASCII */
}

static void sanitize_replaces_overlong_encodings(void **state)
{
    (void)state;
    ASSERT_SANITIZED("\xC0\xAF", FFFD FFFD);             /* '/' in 2 bytes */
    ASSERT_SANITIZED("\xC1\xBF", FFFD FFFD);
    ASSERT_SANITIZED("\xC0\x80", FFFD FFFD);             /* NUL in 2 bytes */
    ASSERT_SANITIZED("\xE0\x80\xAF", FFFD FFFD FFFD);     /* '/' in 3 bytes */
    ASSERT_SANITIZED("\xE0\x9F\xBF", FFFD FFFD FFFD);     /* U+07FF in 3 bytes */
    ASSERT_SANITIZED("\xF0\x80\x80\xAF", FFFD FFFD FFFD FFFD);
    ASSERT_SANITIZED("\xF0\x8F\xBF\xBF", FFFD FFFD FFFD FFFD); /* U+FFFF in 4 bytes */
}

static void sanitize_replaces_surrogates(void **state)
{
    (void)state;
    ASSERT_SANITIZED("\xED\xA0\x80", FFFD FFFD FFFD); /* U+D800 */
    ASSERT_SANITIZED("\xED\xBF\xBF", FFFD FFFD FFFD); /* U+DFFF */
    /* A CESU-8 pair for U+1F600. */
    ASSERT_SANITIZED("\xED\xA0\xBD\xED\xB8\x80", FFFD FFFD FFFD FFFD FFFD FFFD);
    ASSERT_SANITIZED("\xED\x9F\xBF", "\xED\x9F\xBF"); /* U+D7FF is fine */
}

static void sanitize_replaces_a_truncated_sequence_by_one_replacement(void **state)
{
    (void)state;
    /* A valid prefix cut short is one U+FFFD (Unicode "maximal subpart"),
     * whether more text follows or the data ends. */
    ASSERT_SANITIZED("a\xE2\x82" "b", "a" FFFD "b");     /* € cut after 2 of 3 */
    ASSERT_SANITIZED("a\xF0\x9F\x98" "b", "a" FFFD "b"); /* 😀 cut after 3 of 4 */
    ASSERT_SANITIZED("a\xF0\x9F", "a" FFFD);
    ASSERT_SANITIZED("a\xC3", "a" FFFD);
    ASSERT_SANITIZED("a\xE2\x82", "a" FFFD);
    ASSERT_SANITIZED("\xE2\x82\xE2\x82\xAC", FFFD "\xE2\x82\xAC"); /* then a whole € */
    ASSERT_SANITIZED("\xF0\x9F\x98\xF0\x9F\x98\x80", FFFD "\xF0\x9F\x98\x80");
}

static void sanitize_keeps_nul_bytes(void **state)
{
    (void)state;
    const char in[] = "\0a\0\xC3\xA9\0";
    size_t out_len;
    char *out = sanitize(in, sizeof in - 1, &out_len);
    assert_int_equal(out_len, 6);
    assert_memory_equal(out, in, 6);
    free(out);
}

static void sanitize_of_empty_input_is_empty_string(void **state)
{
    (void)state;
    size_t out_len = 42;
    char *out = sanitize("", 0, &out_len);
    assert_int_equal(out_len, 0);
    assert_string_equal(out, "");
    free(out);
}

static void sanitize_reads_only_len_bytes(void **state)
{
    (void)state;
    size_t out_len;
    char *out = sanitize("abc\xFF", 3, &out_len);
    assert_int_equal(out_len, 3);
    assert_string_equal(out, "abc");
    free(out);
}

/* ---- rbx_utf8_complete_prefix ----------------------------------------- */

static void complete_prefix_of_complete_text_is_all_of_it(void **state)
{
    (void)state;
    assert_int_equal(rbx_utf8_complete_prefix("", 0), 0);
    assert_int_equal(rbx_utf8_complete_prefix("abc", 3), 3);
    assert_int_equal(rbx_utf8_complete_prefix("a\xC3\xA9", 3), 3);
    assert_int_equal(rbx_utf8_complete_prefix("\xE2\x82\xAC", 3), 3);
    assert_int_equal(rbx_utf8_complete_prefix("x\xF0\x9F\x98\x80", 5), 5);
    assert_int_equal(rbx_utf8_complete_prefix("a\0b", 3), 3);
}

static void complete_prefix_holds_back_an_unfinished_sequence(void **state)
{
    (void)state;
    assert_int_equal(rbx_utf8_complete_prefix("ab\xC3", 3), 2);
    assert_int_equal(rbx_utf8_complete_prefix("ab\xE2", 3), 2);
    assert_int_equal(rbx_utf8_complete_prefix("ab\xE2\x82", 4), 2);
    assert_int_equal(rbx_utf8_complete_prefix("ab\xF0", 3), 2);
    assert_int_equal(rbx_utf8_complete_prefix("ab\xF0\x9F", 4), 2);
    assert_int_equal(rbx_utf8_complete_prefix("ab\xF0\x9F\x98", 5), 2);
    assert_int_equal(rbx_utf8_complete_prefix("\xE2\x82", 2), 0);
    assert_int_equal(rbx_utf8_complete_prefix("\xC3\xA9\xC3", 3), 2);
}

static void complete_prefix_does_not_hold_back_bytes_that_cannot_complete(void **state)
{
    (void)state;
    assert_int_equal(rbx_utf8_complete_prefix("a\xFF", 2), 2);
    assert_int_equal(rbx_utf8_complete_prefix("a\x80", 2), 2);
    assert_int_equal(rbx_utf8_complete_prefix("a\xC0", 2), 2);     /* always overlong */
    assert_int_equal(rbx_utf8_complete_prefix("a\xE0\x80", 3), 3); /* overlong already */
    assert_int_equal(rbx_utf8_complete_prefix("a\xED\xA0", 3), 3); /* surrogate already */
    assert_int_equal(rbx_utf8_complete_prefix("a\xF4\x90", 3), 3); /* past U+10FFFF */
    assert_int_equal(rbx_utf8_complete_prefix("a\xE2" "b", 3), 3); /* broken, not unfinished */
}

static void complete_prefix_only_looks_at_the_end(void **state)
{
    (void)state;
    /* An unfinished sequence followed by more text is not held back. */
    assert_int_equal(rbx_utf8_complete_prefix("\xE2\x82xyz", 5), 5);
    assert_int_equal(rbx_utf8_complete_prefix("\xF0\x9F" "abcdef", 8), 8);
    char long_text[4096];
    memset(long_text, 'x', sizeof long_text);
    memcpy(long_text + 100, "\xE2\x82", 2);
    memcpy(long_text + sizeof long_text - 2, "\xE2\x82", 2);
    assert_int_equal(rbx_utf8_complete_prefix(long_text, sizeof long_text),
                     sizeof long_text - 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_stream_gives_empty_text),
        cmocka_unit_test(stream_under_cap_is_kept_verbatim),
        cmocka_unit_test(stream_of_exactly_cap_bytes_has_no_marker),
        cmocka_unit_test(one_byte_over_cap_drops_exactly_one_byte),
        cmocka_unit_test(stream_past_cap_keeps_head_marker_and_tail),
        cmocka_unit_test(marker_names_the_stream),
        cmocka_unit_test(odd_cap_gives_the_extra_byte_to_the_tail),
        cmocka_unit_test(many_small_adds_equal_one_big_add),
        cmocka_unit_test(irregular_adds_that_wrap_the_ring_keep_the_last_bytes),
        cmocka_unit_test(hundred_mib_stream_stays_within_the_cap),
        cmocka_unit_test(finish_replaces_invalid_utf8),
        cmocka_unit_test(finish_keeps_nul_bytes),
        cmocka_unit_test(finish_is_valid_utf8_when_the_cut_splits_characters),
        cmocka_unit_test(sanitize_keeps_valid_text),
        cmocka_unit_test(sanitize_replaces_invalid_bytes),
        cmocka_unit_test(sanitize_replaces_overlong_encodings),
        cmocka_unit_test(sanitize_replaces_surrogates),
        cmocka_unit_test(sanitize_replaces_a_truncated_sequence_by_one_replacement),
        cmocka_unit_test(sanitize_keeps_nul_bytes),
        cmocka_unit_test(sanitize_of_empty_input_is_empty_string),
        cmocka_unit_test(sanitize_reads_only_len_bytes),
        cmocka_unit_test(complete_prefix_of_complete_text_is_all_of_it),
        cmocka_unit_test(complete_prefix_holds_back_an_unfinished_sequence),
        cmocka_unit_test(complete_prefix_does_not_hold_back_bytes_that_cannot_complete),
        cmocka_unit_test(complete_prefix_only_looks_at_the_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
