/* What happened to a program, named for the agent: error_type and the
 * language's own exception. */
#ifndef RBX_LANGUAGES_CLASSIFY_H
#define RBX_LANGUAGES_CLASSIFY_H

#include "languages/runtime.h"

typedef struct rbx_outcome {
    int exit_code;
    int signal;
    bool timed_out;
    bool oom_killed;
    bool cancelled;
    bool syntax_error;
} rbx_outcome;

/* Sets error_type and exception on result from what happened and what the
 * program wrote to stderr (only consulted when the program failed). */
void rbx_classify(const rbx_runtime *runtime, const rbx_outcome *outcome, const char *stderr_text,
                  size_t stderr_len, const char **error_type, char **exception);

#endif
