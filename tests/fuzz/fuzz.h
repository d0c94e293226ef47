/* What every harness shares: libFuzzer's entry point, a way to fail that
 * libFuzzer reports with the input that caused it, and reference checks
 * written independently of the code under test (a check that reused the
 * product's own helper would agree with its bugs). */
#ifndef RBX_FUZZ_H
#define RBX_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional; the JSON harnesses fix jansson's hash seed there, so that an
 * object's keys come in the same order every run and a crash replays. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A broken invariant is a crash: abort() makes libFuzzer save the input. */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The input as a C string, as a front end would hand it on: it ends at the
 * first NUL, like argv, a URL or a NUL-refused JSON string. */
static inline char *fuzz_cstring(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        abort();
    memcpy(text, data, size);
    text[size] = 0;
    return text;
}

/* RFC 3629 by decoding: the code point must need exactly the bytes used
 * (no overlong form), not be a surrogate, and be at most U+10FFFF. */
static inline bool fuzz_utf8_valid(const char *text, size_t len)
{
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        size_t n = c < 0x80             ? 1
                   : (c & 0xE0) == 0xC0 ? 2
                   : (c & 0xF0) == 0xE0 ? 3
                   : (c & 0xF8) == 0xF0 ? 4
                                        : 0;
        if (n == 0 || i + n > len)
            return false;
        uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
        for (size_t k = 1; k < n; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        static const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += n;
    }
    return true;
}

/* Splits an input into pieces: the harness reads its knobs (a flag, a
 * size) first and the rest is the text under test. */
typedef struct fuzz_input {
    const uint8_t *data;
    size_t size;
} fuzz_input;

static inline uint8_t fuzz_byte(fuzz_input *in)
{
    if (!in->size)
        return 0;
    in->size--;
    return *in->data++;
}

#endif
