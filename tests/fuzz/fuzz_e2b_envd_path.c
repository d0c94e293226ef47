/* E2B's paths (http/e2b_envd_view.c), which envd's routes take from the
 * SDK and turn into session paths: whatever is accepted must name the
 * session directory itself ("") or a path the engine's own check takes
 * (relative, no "." or ".." or empty components), and must be what the
 * path means by its text inside /home/user, which a reference written
 * from the rules (a stack of components) computes again. */
#include "fuzz.h"

#include "http/e2b_envd.h"
#include "sessions/files.h"

/* The reference: "~" and relative paths from /home/user, components
 * pushed and popped; NULL when the result is outside /home/user. */
static bool reference(const char *given, char *out, size_t size)
{
    char joined[2 * E2B_PATH_MAX];
    if (!given[0] || !strcmp(given, "~"))
        snprintf(joined, sizeof joined, "/home/user");
    else if (!strncmp(given, "~/", 2))
        snprintf(joined, sizeof joined, "/home/user/%s", given + 2);
    else if (given[0] == '/')
        snprintf(joined, sizeof joined, "%s", given);
    else
        snprintf(joined, sizeof joined, "/home/user/%s", given);
    const char *parts[E2B_PATH_MAX];
    size_t lens[E2B_PATH_MAX], n = 0;
    for (const char *p = joined; *p;) {
        size_t len = strcspn(p, "/");
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            if (n)
                n--;
        } else if (len && !(len == 1 && p[0] == '.')) {
            parts[n] = p;
            lens[n++] = len;
        }
        p += len + (p[len] == '/');
    }
    if (n < 2 || lens[0] != 4 || strncmp(parts[0], "home", 4) || lens[1] != 4 ||
        strncmp(parts[1], "user", 4))
        return false;
    size_t used = 0;
    out[0] = 0;
    for (size_t i = 2; i < n; i++)
        used += (size_t)snprintf(out + used, size - used, "%s%.*s", i > 2 ? "/" : "",
                                 (int)lens[i], parts[i]);
    return used < size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstring(data, size);
    char rel[1100], expected[2 * E2B_PATH_MAX];
    http_error err;
    bool accepted = e2b_envd_path(text, rel, sizeof rel, &err);
    if (strlen(text) <= E2B_PATH_MAX) {
        bool inside = reference(text, expected, sizeof expected);
        if (accepted)
            FUZZ_CHECK(inside && !strcmp(rel, expected));
        else
            FUZZ_CHECK(!inside || strlen(expected) >= sizeof rel);
    } else {
        FUZZ_CHECK(!accepted);
    }
    if (accepted && rel[0]) {
        FUZZ_CHECK(rel[0] != '/');
        /* Control characters and long components are the engine's to refuse. */
        rbx_error engine_err;
        if (rbx_file_path_check(rel, &engine_err) != RBX_OK)
            FUZZ_CHECK(engine_err.status == RBX_EINVAL);
        for (const char *p = rel; *p;) {
            size_t len = strcspn(p, "/");
            FUZZ_CHECK(len > 0 && !(len == 1 && p[0] == '.') &&
                       !(len == 2 && p[0] == '.' && p[1] == '.'));
            p += len + (p[len] == '/');
        }
    }
    free(text);
    return 0;
}
