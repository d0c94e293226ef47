/* Classification reads a failed program's stderr, which the program wrote:
 * any bytes, any length, crafted to look like a traceback or not. Whatever
 * it says, error_type is one of the documented six (null exactly when the
 * program succeeded) and exception is a plain error name. The first bytes
 * pick the language and what happened; the rest is the stderr. */
#include "fuzz.h"

#include "languages/classify.h"
#include "languages/runtime.h"
#include "runbox.h"

#include <ctype.h>

static const char *const types[] = {"SyntaxError", "TimeoutError",    "MemoryError",
                                    "ImportError", "PermissionError", "RuntimeError"};

static void check_exception(const char *exception)
{
    if (!exception)
        return;
    /* A name as the program printed it: one word of [A-Za-z0-9_.] (a
     * program may print "pkg.1: ..." after a traceback, so not always an
     * identifier), never a line break or the message after the colon. */
    FUZZ_CHECK(exception[0] && strlen(exception) < 1024);
    for (const char *p = exception; *p; p++)
        FUZZ_CHECK(isalnum((unsigned char)*p) || *p == '_' || *p == '.');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size};
    const rbx_runtime *runtime =
        rbx_runtime_find(rbx_runtime_name(fuzz_byte(&in) % rbx_runtime_count()));
    uint8_t facts = fuzz_byte(&in);
    rbx_outcome outcome = {
        .syntax_error = facts & 1,
        .timed_out = facts & 2,
        .oom_killed = facts & 4,
        .cancelled = facts & 8,
        .exit_code = fuzz_byte(&in),
        .signal = (facts & 16) ? fuzz_byte(&in) % 65 : 0,
    };
    /* stderr arrives NUL-terminated from the capture, its length beside it. */
    char *stderr_text = fuzz_cstring(in.data, in.size);
    const char *error_type;
    char *exception;
    rbx_classify(runtime, &outcome, stderr_text, in.size, &error_type, &exception);

    bool failed = (facts & 15) || outcome.exit_code || outcome.signal;
    FUZZ_CHECK(!error_type == !failed);
    if (error_type) {
        bool known = false;
        for (size_t i = 0; i < sizeof types / sizeof *types; i++)
            known |= !strcmp(error_type, types[i]);
        FUZZ_CHECK(known);
    }
    if (outcome.syntax_error)
        FUZZ_CHECK(!strcmp(error_type, "SyntaxError") && !strcmp(exception, "SyntaxError"));
    if (!strcmp(runtime->name, "python") && exception)
        FUZZ_CHECK(!strchr(exception, '.')); /* the class, not its module */
    check_exception(exception);
    free(exception);
    free(stderr_text);
    return 0;
}
