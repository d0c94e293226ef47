/* Error classification: tells the agent what kind of failure it met, from
 * facts first (timeout, memory limit, syntax check, exit status) and from
 * the language's own uncaught-error report second. A program that exits 0
 * has no error, whatever it printed. */
#include "languages/classify.h"
#include "languages/runtime.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const char *find_last(const char *hay, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    if (n > len)
        return NULL;
    for (size_t i = len - n + 1; i-- > 0;)
        if (memcmp(hay + i, needle, n) == 0)
            return hay + i;
    return NULL;
}

static bool contains(const char *hay, size_t len, const char *needle)
{
    return find_last(hay, len, needle) != NULL;
}

/* Reads an exception name (dotted identifier) at p; returns its length when
 * it is followed by ':' or the end of the line, else 0. */
static size_t exception_name_at(const char *p, const char *end)
{
    const char *q = p;
    if (q >= end || !(isalpha((unsigned char)*q) || *q == '_'))
        return 0;
    while (q < end && (isalnum((unsigned char)*q) || *q == '_' || *q == '.'))
        q++;
    size_t len = (size_t)(q - p);
    /* Node adds the error code: "TypeError [ERR_X]: message". */
    if (q < end && *q == ' ' && q + 1 < end && q[1] == '[') {
        const char *close = memchr(q, ']', (size_t)(end - q));
        if (close && close + 1 < end && close[1] == ':')
            return len;
    }
    if (q < end && *q != ':' && *q != '\n' && *q != '\r')
        return 0;
    return len;
}

static char *dup_last_component(const char *name, size_t len)
{
    const char *dot = memrchr(name, '.', len);
    if (dot) {
        len -= (size_t)(dot + 1 - name);
        name = dot + 1;
    }
    return len ? strndup(name, len) : NULL;
}

/* Python: after the last traceback's header come indented frames, then the
 * exception's line at column 0 (its message may continue on more lines). */
static char *python_exception(const char *text, size_t len)
{
    const char *tb = find_last(text, len, "Traceback (most recent call last):");
    if (!tb)
        return NULL;
    const char *end = text + len;
    const char *line = memchr(tb, '\n', (size_t)(end - tb));
    while (line && ++line < end) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *line_end = nl ? nl : end;
        if (line < line_end && *line != ' ') {
            size_t n = exception_name_at(line, line_end);
            return n ? dup_last_component(line, n) : NULL;
        }
        line = nl;
    }
    return NULL;
}

/* Node: the uncaught error's line starts at column 0 with its name and is
 * followed by its stack ("    at ..."). Earlier lines may be the program's
 * own logging of other errors, so the last such line wins. */
static char *javascript_exception(const char *text, size_t len)
{
    const char *end = text + len;
    const char *best = NULL, *fallback = NULL;
    size_t best_len = 0, fallback_len = 0;
    for (const char *line = text; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *line_end = nl ? nl : end;
        size_t n = exception_name_at(line, line_end);
        if (n && n < 64 && (memmem(line, n, "Error", 5) || memmem(line, n, "Exception", 9))) {
            bool has_stack = nl && (size_t)(end - nl) > 8 && memcmp(nl + 1, "    at ", 7) == 0;
            if (has_stack) {
                best = line;
                best_len = n;
            }
            fallback = line;
            fallback_len = n;
        }
        line = nl ? nl + 1 : end;
    }
    if (!best) {
        best = fallback;
        best_len = fallback_len;
    }
    return best ? strndup(best, best_len) : NULL;
}

const char *rbx_classify_python(int exit_code, const char *text, size_t len, char **exception)
{
    *exception = python_exception(text, len);
    const char *name = *exception;
    if (!name)
        return "RuntimeError";
    if (!strcmp(name, "ModuleNotFoundError") || !strcmp(name, "ImportError"))
        return "ImportError";
    if (!strcmp(name, "PermissionError"))
        return "PermissionError";
    /* Writing to the read-only system raises a plain OSError (EROFS). */
    if (!strcmp(name, "OSError") && (contains(text, len, "[Errno 30] Read-only file system") ||
                                     contains(text, len, "[Errno 1] Operation not permitted")))
        return "PermissionError";
    if (!strcmp(name, "MemoryError"))
        return "MemoryError";
    return "RuntimeError";
}

const char *rbx_classify_javascript(int exit_code, const char *text, size_t len, char **exception)
{
    *exception = javascript_exception(text, len);
    if (contains(text, len, "JavaScript heap out of memory") ||
        contains(text, len, "Reached heap limit") ||
        contains(text, len, "Array buffer allocation failed") ||
        contains(text, len, "std::bad_alloc"))
        return "MemoryError";
    if (contains(text, len, "code: 'MODULE_NOT_FOUND'") ||
        contains(text, len, "code: 'ERR_MODULE_NOT_FOUND'") ||
        contains(text, len, "[ERR_MODULE_NOT_FOUND]"))
        return "ImportError";
    if (contains(text, len, "code: 'EACCES'") || contains(text, len, "code: 'EPERM'") ||
        contains(text, len, "code: 'EROFS'"))
        return "PermissionError";
    return "RuntimeError";
}

const char *rbx_classify_bash(int exit_code, const char *text, size_t len, char **exception)
{
    *exception = NULL;
    if (exit_code == 127)
        return "ImportError";
    /* bash's own allocator failing (xmalloc/xrealloc), or a tool saying so. */
    if (contains(text, len, ": cannot allocate ") || contains(text, len, "Cannot allocate memory"))
        return "MemoryError";
    if (exit_code == 126 || contains(text, len, ": Permission denied") ||
        contains(text, len, ": Read-only file system") ||
        contains(text, len, ": Operation not permitted"))
        return "PermissionError";
    return "RuntimeError";
}

void rbx_classify(const rbx_runtime *runtime, const rbx_outcome *outcome, const char *stderr_text,
                  size_t stderr_len, const char **error_type, char **exception)
{
    *exception = NULL;
    if (outcome->syntax_error) {
        *error_type = "SyntaxError";
        *exception = strdup("SyntaxError");
        return;
    }
    if (outcome->timed_out) {
        *error_type = "TimeoutError";
        return;
    }
    if (outcome->oom_killed) {
        *error_type = "MemoryError";
        return;
    }
    if (outcome->cancelled) {
        *error_type = "RuntimeError";
        return;
    }
    if (outcome->exit_code == 0 && outcome->signal == 0) {
        *error_type = NULL;
        return;
    }
    *error_type = runtime->classify(outcome->exit_code, stderr_text ? stderr_text : "",
                                    stderr_text ? stderr_len : 0, exception);
}
