/* Requirement specs, per language: whether a string names a package the
 * language's installer may be given (pip's PEP 508 without markers, npm's
 * name@range), and its normalized form. Pure text checks: the languages'
 * table points at them, and the environments (envs/) use them, so they sit
 * with the languages, below both. */
#include "languages/runtime.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static bool fail_spec(char *why, size_t size, const char *spec, const char *what)
{
    snprintf(why, size, "requirement '%.80s' %s", spec, what);
    return false;
}

/* Characters that never belong in a spec: shell metacharacters, quotes,
 * whitespace other than spaces, control characters. */
static bool has_forbidden(const char *spec)
{
    for (const unsigned char *p = (const unsigned char *)spec; *p; p++)
        if (*p < 0x20 || *p == 0x7f || strchr(";&$`'\"\\(){}#\t", *p))
            return true;
    return false;
}

static bool name_char(int c)
{
    return isalnum(c) || c == '.' || c == '_' || c == '-';
}

/* PEP 508 without markers: name, optional [extras], optional version
 * specifiers. Normalized: PEP 503 name, sorted extras, no spaces. */
bool rbx_spec_python(const char *spec, bool allow_urls, char *out, size_t size, char *why,
                     size_t why_size)
{
    if (has_forbidden(spec) || strchr(spec, ';'))
        return fail_spec(why, why_size, spec, "contains a character that is not accepted");
    if (!isalnum((unsigned char)spec[0]))
        return fail_spec(why, why_size, spec,
                         "must start with a package name (options such as -e or --index-url "
                         "are not accepted)");
    char name[128];
    size_t n = 0;
    const char *p = spec;
    for (; name_char((unsigned char)*p) && n < sizeof name - 1; p++) {
        bool sep = *p == '.' || *p == '_' || *p == '-';
        if (sep && n && name[n - 1] == '-')
            continue; /* PEP 503: runs of . _ - become one - */
        name[n++] = sep ? '-' : (char)tolower((unsigned char)*p);
    }
    name[n] = 0;
    size_t o = (size_t)snprintf(out, size, "%s", name);
    while (*p == ' ')
        p++;
    if (*p == '[') {
        const char *close = strchr(p, ']');
        if (!close)
            return fail_spec(why, why_size, spec, "has an unclosed [extras] list");
        for (const char *q = p + 1; q < close; q++)
            if (!name_char((unsigned char)*q) && *q != ',' && *q != ' ')
                return fail_spec(why, why_size, spec, "has an invalid extra");
        o += (size_t)snprintf(out + o, size > o ? size - o : 0, "%.*s", (int)(close - p + 1), p);
        p = close + 1;
        while (*p == ' ')
            p++;
    }
    /* Only a version or a URL may follow: "requests 2" is not requests2. */
    if (*p && !strchr("<>=!~@", *p))
        return fail_spec(why, why_size, spec,
                         "has more than a package name before its version (e.g. numpy>=1.24, "
                         "requests[socks]==2.28.1)");
    if (*p == '@' && !allow_urls)
        return fail_spec(why, why_size, spec,
                         "names a URL or path: only package names and versions are accepted");
    for (; *p && o + 1 < size; p++) {
        if (*p == ' ') {
            /* Spaces may surround operators and commas ("numpy >= 1, < 2"),
             * never split a version: ">=1 extra" is not ">=1extra". */
            const char *next = p + strspn(p, " ");
            if (*next && o && isalnum((unsigned char)out[o - 1]) && isalnum((unsigned char)*next))
                return fail_spec(why, why_size, spec, "has a space inside a version");
            continue;
        }
        if (!allow_urls && !(isalnum((unsigned char)*p) || strchr("<>=!~.*+,-_", *p)))
            return fail_spec(why, why_size, spec,
                             "has a version part that is not accepted (e.g. numpy>=1.24, "
                             "requests[socks]==2.28.1)");
        out[o++] = *p;
    }
    out[o] = 0;
    return true;
}

/* npm specs: name or @scope/name, optional @version-range. */
bool rbx_spec_npm(const char *spec, bool allow_urls, char *out, size_t size, char *why,
                  size_t why_size)
{
    if (has_forbidden(spec))
        return fail_spec(why, why_size, spec, "contains a character that is not accepted");
    const char *p = spec;
    if (*p == '@') {
        const char *slash = strchr(p, '/');
        if (!slash || slash == p + 1)
            return fail_spec(why, why_size, spec, "has a scope but no package name");
        for (const char *q = p + 1; q < slash; q++)
            if (!name_char((unsigned char)*q) && *q != '~')
                return fail_spec(why, why_size, spec, "has an invalid scope");
        p = slash + 1;
    }
    if (!isalnum((unsigned char)*p))
        return fail_spec(why, why_size, spec,
                         "must be a package name (options, paths and URLs are not accepted)");
    while (name_char((unsigned char)*p) || *p == '~')
        p++;
    if (*p && *p != '@')
        return fail_spec(why, why_size, spec,
                         "is not an npm package spec (name, @scope/name, optionally @version)");
    if (*p == '@' && !allow_urls)
        for (const char *q = p + 1; *q; q++)
            if (!(isalnum((unsigned char)*q) || strchr(".^~<>=*|+- ", *q)))
                return fail_spec(why, why_size, spec,
                                 "has a version range that is not accepted (e.g. lodash@4.17.21, "
                                 "@scope/pkg@^1)");
    if (p[0] == '@' && !p[1])
        return fail_spec(why, why_size, spec, "has an empty version");
    snprintf(out, size, "%s", spec);
    return true;
}

