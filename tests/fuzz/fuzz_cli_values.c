/* Values typed on the command line (and sent as "env" over HTTP): a number
 * of seconds (--timeout, --grace, sessions gc --idle) and --env NAME=VALUE
 * entries, which the engine validates before a program sees them. The
 * input is lines: the first a number of seconds, the others env entries.
 * Names are compared with the documented pattern as a POSIX regex. */
#include "fuzz.h"

#include "cli/cli.h"
#include "engine/engine.h"
#include "execution/request.h"
#include "languages/runtime.h"
#include "runbox.h"

#include <math.h>
#include <regex.h>

static regex_t name_pattern;
static rbx_engine engine; /* validation reads only the configuration */

static void check_seconds(const char *text)
{
    double seconds = -1;
    if (cli_parse_seconds(text, &seconds) == 0)
        FUZZ_CHECK(isfinite(seconds) && seconds > 0);
    else
        FUZZ_CHECK(seconds == -1); /* a refusal leaves the value alone */
}

static void check_env(char **entries, size_t count)
{
    size_t total = 0;
    for (size_t i = 0; i < count; i++) {
        const char *eq = strchr(entries[i], '=');
        size_t name_len = eq ? (size_t)(eq - entries[i]) : strlen(entries[i]);
        char *name = strndup(entries[i], name_len);
        bool documented = name_len <= 128 && !regexec(&name_pattern, name, 0, NULL, 0);
        FUZZ_CHECK(rbx_env_name_valid(entries[i], name_len) == documented);
        free(name);
        total += strlen(entries[i]) + 1;
    }
    rbx_request request;
    rbx_request_init(&request);
    request.language = "python";
    request.code = "";
    request.env = (const char *const *)entries;
    request.env_count = count;
    const rbx_runtime *runtime;
    double timeout_s;
    rbx_error err = {0};
    if (rbx_request_validate(&engine, &request, &runtime, &timeout_s, &err) != RBX_OK) {
        FUZZ_CHECK(err.status == RBX_EINVAL && err.message[0]);
        return;
    }
    FUZZ_CHECK(count <= 256 && total <= 64 * 1024);
    for (size_t i = 0; i < count; i++) {
        const char *eq = strchr(entries[i], '=');
        FUZZ_CHECK(eq && rbx_env_name_valid(entries[i], (size_t)(eq - entries[i])));
        FUZZ_CHECK(strncmp(entries[i], "HOME=", 5) && strncmp(entries[i], "PWD=", 4) &&
                   strncmp(entries[i], "USER=", 5) && strncmp(entries[i], "LOGNAME=", 8) &&
                   strncmp(entries[i], "OLDPWD=", 7));
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    rbx_config_defaults(&engine.config);
    return regcomp(&name_pattern, "^[A-Za-z_][A-Za-z0-9_]*$", REG_EXTENDED | REG_NOSUB);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstring(data, size);
    char **lines = calloc(size + 1, sizeof *lines);
    size_t count = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        lines[count++] = line;
    if (count) {
        check_seconds(lines[0]);
        check_env(lines + 1, count - 1);
    }
    free(lines);
    free(text);
    return 0;
}
