/* Session ids and session file paths, which every front end takes from
 * the client and the engine turns into host paths. Each is compared with a
 * reference written from the documentation alone: the id with the
 * documented pattern (RBX_SESSION_ID_PATTERN, compiled as a POSIX regular
 * expression), the path with the rules of sessions/files.c, spelled out. */
#include "fuzz.h"

#include "runbox.h"
#include "sessions/files.h"

#include <regex.h>

static regex_t id_pattern;

/* sessions/files.c: relative; no "..", ".", empty or control-character
 * components; at most 1024 bytes, 32 levels, 255 bytes a component. */
static bool path_acceptable(const char *path)
{
    size_t len = strlen(path);
    if (len == 0 || len > 1024 || path[0] == '/' || path[len - 1] == '/')
        return false;
    int depth = 0;
    const char *start = path;
    for (const char *p = path;; p++) {
        if (*p && *p != '/') {
            if ((unsigned char)*p < 0x20)
                return false;
            continue;
        }
        size_t n = (size_t)(p - start);
        bool dots = (n == 1 && start[0] == '.') || (n == 2 && start[0] == '.' && start[1] == '.');
        if (n == 0 || n > 255 || dots || ++depth > 32)
            return false;
        if (!*p)
            return true;
        start = p + 1;
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    return regcomp(&id_pattern, "^" RBX_SESSION_ID_PATTERN "$", REG_EXTENDED | REG_NOSUB);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstring(data, size);
    bool id_valid = rbx_session_id_valid(text);
    FUZZ_CHECK(id_valid == (regexec(&id_pattern, text, 0, NULL, 0) == 0));
    if (id_valid) /* a directory name of its own under sessions/ */
        FUZZ_CHECK(!strchr(text, '/') && strcmp(text, ".") && strcmp(text, ".."));
    rbx_error err = {0};
    bool path_ok = rbx_file_path_check(text, &err) == RBX_OK;
    FUZZ_CHECK(path_ok == path_acceptable(text));
    if (!path_ok)
        FUZZ_CHECK(err.status == RBX_EINVAL && err.message[0]);
    else
        FUZZ_CHECK(text[0] != '/' && strncmp(text, "../", 3) && !strstr(text, "/../") &&
                   strcmp(text, "..") &&
                   (strlen(text) < 3 || strcmp(text + strlen(text) - 3, "/..")));
    free(text);
    return 0;
}
