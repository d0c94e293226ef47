/* Requirement specs, which reach pip and npm as arguments of an install:
 * each input is read as a Python (PEP 508) and as an npm spec, with URLs
 * and paths allowed and refused, at the sizes rbx_requirements_parse uses.
 * What is accepted must not be an installer option, must not smuggle a
 * shell character, must name no URL unless URLs are allowed, must install
 * the package the spec names (no other), and must be a fixed point:
 * normalizing it again changes nothing (it names the cached environment). */
#include "fuzz.h"

#include "envs/deps.h"

#include <ctype.h>

typedef bool (*normalizer)(const char *spec, bool allow_urls, char *out, size_t size, char *why,
                           size_t why_size);

static void check_accepted(const char *out, size_t size, bool python, bool allow_urls)
{
    FUZZ_CHECK(strnlen(out, size) < size && out[0]);
    FUZZ_CHECK(isalnum((unsigned char)out[0]) || (!python && out[0] == '@'));
    for (const unsigned char *p = (const unsigned char *)out; *p; p++)
        FUZZ_CHECK(*p >= 0x20 && *p != 0x7f && !strchr(";&$`'\"\\(){}#", *p));
    if (allow_urls)
        return;
    FUZZ_CHECK(!strchr(out, ':'));
    if (python)
        FUZZ_CHECK(!strchr(out, '/') && !strchr(out, '@'));
    else /* at most the scope's slash, right after "@scope" */
        FUZZ_CHECK(!strchr(out, '/') || (out[0] == '@' && !strchr(strchr(out, '/') + 1, '/')));
}

static bool name_char(char c)
{
    return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-';
}

/* PEP 503, written from the PEP: lowercase, runs of "-_." become "-". The
 * accepted spec starts with exactly this name, and nothing of a later word
 * is glued to it ("requests 2" is not the package requests2). */
static void check_python_name(const char *spec, const char *out)
{
    char name[RBX_SPEC_MAX + 1];
    size_t n = 0;
    for (const char *p = spec; name_char(*p); p++) {
        bool sep = *p == '-' || *p == '_' || *p == '.';
        if (!sep)
            name[n++] = (char)tolower((unsigned char)*p);
        else if (!n || name[n - 1] != '-')
            name[n++] = '-';
    }
    FUZZ_CHECK(!strncmp(out, name, n) && !name_char(out[n]));
}

static void normalize(normalizer fn, const char *spec, bool python, bool allow_urls)
{
    char out[RBX_SPEC_MAX + 1], why[300] = "";
    if (!fn(spec, allow_urls, out, sizeof out, why, sizeof why)) {
        FUZZ_CHECK(why[0]);
        return;
    }
    check_accepted(out, sizeof out, python, allow_urls);
    if (python)
        check_python_name(spec, out);
    char again[RBX_SPEC_MAX + 1];
    FUZZ_CHECK(fn(out, allow_urls, again, sizeof again, why, sizeof why));
    FUZZ_CHECK(!strcmp(out, again));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* rbx_requirements_parse refuses empty and longer specs before these run. */
    char *spec = fuzz_cstring(data, size);
    if (spec[0] && strlen(spec) <= RBX_SPEC_MAX) {
        for (int allow_urls = 0; allow_urls < 2; allow_urls++) {
            normalize(rbx_spec_python, spec, true, allow_urls);
            normalize(rbx_spec_npm, spec, false, allow_urls);
        }
    }
    free(spec);
    return 0;
}
