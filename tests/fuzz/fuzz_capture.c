/* A program's output is untrusted bytes: it is kept within a cap (head,
 * marker, tail), made valid UTF-8, and cut at character boundaries while
 * it streams. The capture is checked against a plain model (keep all the
 * bytes, then take the head and the tail), the sanitizer against an
 * independent validator, and the boundary finder against the definition. */
#include "fuzz.h"

#include "base/capture.h"
#include "runbox.h"

/* Replays the input as chunks into a capture of a small cap (so the ring
 * wraps), and compares the result with the model's. */
static void check_capture(fuzz_input in)
{
    size_t cap = (fuzz_byte(&in) | (size_t)fuzz_byte(&in) << 8) % 4097;
    char *all = malloc(in.size + 1);
    size_t total = 0;
    rbx_capture capture;
    rbx_capture_init(&capture, cap);
    while (in.size) {
        size_t n = fuzz_byte(&in);
        if (n > in.size)
            n = in.size;
        rbx_capture_add(&capture, (const char *)in.data, n);
        memcpy(all + total, in.data, n);
        total += n;
        in.data += n;
        in.size -= n;
    }
    uint64_t dropped;
    size_t len;
    char *text = rbx_capture_finish(&capture, "stdout", &dropped, &len);
    FUZZ_CHECK(text && text[len] == 0 && fuzz_utf8_valid(text, len));

    size_t head_cap = cap / 2, tail_cap = cap - head_cap;
    char *raw = malloc(total + 200);
    size_t raw_len = total;
    if (total <= cap) {
        FUZZ_CHECK(dropped == 0);
        memcpy(raw, all, total);
    } else {
        FUZZ_CHECK(dropped == total - cap);
        memcpy(raw, all, head_cap);
        raw_len = head_cap + (size_t)sprintf(raw + head_cap,
                                             "\n[runbox: %zu bytes of stdout left out here]\n",
                                             total - cap);
        memcpy(raw + raw_len, all + total - tail_cap, tail_cap);
        raw_len += tail_cap;
    }
    size_t expected_len;
    char *expected = rbx_utf8_sanitize(raw, raw_len, &expected_len);
    FUZZ_CHECK(expected_len == len && !memcmp(expected, text, len));
    free(expected);
    free(raw);
    free(text);
    free(all);
}

static void check_sanitize(const uint8_t *data, size_t size)
{
    size_t len;
    char *text = rbx_utf8_sanitize((const char *)data, size, &len);
    FUZZ_CHECK(text && text[len] == 0 && len <= 3 * size && fuzz_utf8_valid(text, len));
    if (fuzz_utf8_valid((const char *)data, size)) /* valid text passes untouched */
        FUZZ_CHECK(len == size && !memcmp(text, data, size));

    /* Cut valid text anywhere: the complete prefix is the last character
     * boundary at or before the cut. */
    size_t cut = size ? data[0] % (len + 1) : 0;
    size_t boundary = cut;
    while (boundary > 0 && boundary < len && ((unsigned char)text[boundary] & 0xC0) == 0x80)
        boundary--;
    FUZZ_CHECK(rbx_utf8_complete_prefix(text, cut) == boundary);
    free(text);

    /* Raw bytes: at most the last three are held back, from a lead byte on. */
    size_t keep = rbx_utf8_complete_prefix((const char *)data, size);
    FUZZ_CHECK(keep <= size && size - keep <= 3);
    FUZZ_CHECK(keep == size || data[keep] >= 0xC0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_capture((fuzz_input){data, size});
    check_sanitize(data, size);
    return 0;
}
