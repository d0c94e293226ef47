/* Validation of a request, before anything touches the disk or spawns. */
#include "execution/request.h"
#include "base/capture.h"
#include "base/error.h"
#include "egress/policy.h"
#include "engine/engine.h"
#include "languages/runtime.h"
#include "runbox.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define RBX_ENV_MAX_COUNT 256
#define RBX_ENV_MAX_BYTES (64 * 1024)

/* Variables runbox sets itself: letting a request override them would break
 * the session model (HOME is the session) or hide runbox's own plumbing. */
static const char *const reserved_env[] = {"HOME", "PWD", "OLDPWD", "USER", "LOGNAME", NULL};

bool rbx_env_name_valid(const char *name, size_t len)
{
    if (len == 0 || len > 128)
        return false;
    if (!((name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z') ||
          name[0] == '_'))
        return false;
    for (size_t i = 1; i < len; i++) {
        char c = name[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    return true;
}

static rbx_status validate_env(const rbx_request *request, rbx_error *err)
{
    if (request->env_count > RBX_ENV_MAX_COUNT)
        return rbx_fail(err, RBX_EINVAL, "too many environment variables: %zu (at most %d)",
                        request->env_count, RBX_ENV_MAX_COUNT);
    size_t total = 0;
    for (size_t i = 0; i < request->env_count; i++) {
        const char *entry = request->env[i];
        if (!entry)
            return rbx_fail(err, RBX_EINVAL, "environment entry %zu is missing", i);
        const char *eq = strchr(entry, '=');
        if (!eq || !rbx_env_name_valid(entry, (size_t)(eq - entry)))
            return rbx_fail(err, RBX_EINVAL,
                            "invalid environment entry '%.64s': expected NAME=VALUE with NAME "
                            "matching [A-Za-z_][A-Za-z0-9_]*",
                            entry);
        for (const char *const *r = reserved_env; *r; r++)
            if (strlen(*r) == (size_t)(eq - entry) && strncmp(entry, *r, strlen(*r)) == 0)
                return rbx_fail(err, RBX_EINVAL,
                                "environment variable %s is set by runbox and cannot be "
                                "overridden",
                                *r);
        total += strlen(entry) + 1;
    }
    if (total > RBX_ENV_MAX_BYTES)
        return rbx_fail(err, RBX_EINVAL, "environment too large: %zu bytes (at most %d)", total,
                        RBX_ENV_MAX_BYTES);
    return RBX_OK;
}

/* The request's narrowing of the egress policy, checked before anything
 * runs (the network may be off: a wrong list is wrong anyway). */
static rbx_status validate_egress(const rbx_request *request, rbx_error *err)
{
    if (!request->egress_allow)
        return RBX_OK;
    rbx_egress_list list = {0};
    if (rbx_egress_narrowing_parse(&list, request, err) != RBX_OK)
        return err->status;
    rbx_egress_list_free(&list);
    return RBX_OK;
}

rbx_status rbx_request_validate(const rbx_engine *engine, const rbx_request *request,
                                const rbx_runtime **runtime, double *timeout_s, rbx_error *err)
{
    const rbx_config *config = &engine->config;
    if (!request->language || !*request->language) {
        char names[128];
        rbx_runtime_names(names, sizeof names);
        return rbx_fail(err, RBX_EINVAL, "no language given (accepted: %s)", names);
    }
    *runtime = rbx_runtime_find(request->language);
    if (!*runtime)
        return rbx_unknown_language(err, request->language);
    if (!request->code)
        return rbx_fail(err, RBX_EINVAL, "no code given");
    if (request->code_len > config->max_code_bytes)
        return rbx_fail(err, RBX_EINVAL, "code is %zu bytes, more than the limit of %zu bytes",
                        request->code_len, config->max_code_bytes);
    double timeout = request->timeout_s;
    if (timeout == 0)
        timeout = config->default_timeout_s;
    if (!isfinite(timeout) || timeout <= 0 || timeout > config->max_timeout_s)
        return rbx_fail(err, RBX_EINVAL,
                        "timeout %g s is out of bounds (accepted: more than 0 and at most %g "
                        "seconds)",
                        request->timeout_s, config->max_timeout_s);
    *timeout_s = timeout;
    if (request->session_id && !rbx_session_id_valid(request->session_id))
        return rbx_fail(err, RBX_EINVAL,
                        "invalid session id '%.80s': it must match " RBX_SESSION_ID_PATTERN,
                        request->session_id);
    if (request->memory_mb &&
        (request->memory_mb < 16 || request->memory_mb > config->max_memory_mb))
        return rbx_fail(err, RBX_EINVAL,
                        "memory limit %u MiB is out of bounds (accepted: 16 to %u MiB)",
                        request->memory_mb, config->max_memory_mb);
    if (request->cpus != 0 && (!isfinite(request->cpus) || request->cpus < RBX_CPUS_MIN ||
                               request->cpus > config->max_cpus))
        return rbx_fail(err, RBX_EINVAL,
                        "cpus %g is out of bounds (accepted: %g to %g cores; the operator's "
                        "maximum is --max-cpus)",
                        request->cpus, RBX_CPUS_MIN, config->max_cpus);
    if (validate_egress(request, err) != RBX_OK)
        return err->status;
    if (request->stateful && request->stdin_data)
        return rbx_fail(err, RBX_EINVAL,
                        "stdin is not taken by a stateful call (its kernel reads no input): "
                        "write the data to a file in the session instead");
    if (request->kernel_cwd) {
        size_t len = strlen(request->kernel_cwd);
        if (!request->stateful || request->kernel_cwd[0] != '/' || len > RBX_KERNEL_CWD_MAX ||
            rbx_utf8_valid_prefix(request->kernel_cwd, len) != len)
            return rbx_fail(err, RBX_EINVAL,
                            "a kernel's working directory must be an absolute path in UTF-8 of at "
                            "most %d bytes, for a stateful call",
                            RBX_KERNEL_CWD_MAX);
    }
    if (request->stdin_len && !request->stdin_data)
        return rbx_fail(err, RBX_EINVAL, "stdin length given without data");
    return validate_env(request, err);
}
