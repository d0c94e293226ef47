/* What every execution's program is given, whoever runs it (the flow, a
 * prepared sandbox, a kernel): its environment, its code as the bootstrap
 * reads it, its limits and whether it has the network; and the result's
 * account of what its egress policy refused. A module of its own below the
 * flow, the pool and the kernels, which all use it. */
#include "execution/given.h"
#include "base/error.h"
#include "base/trace.h"
#include "egress/rules.h"
#include "engine/engine.h"
#include "runbox.h"
#include "sandbox/cgroup.h"
#include "sandbox/mount.h"
#include "sandbox/net.h"
#include "sandbox/sandbox.h"
#include "sessions/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The environment every program gets: these, its session's id, then the
 * request's own variables. Nothing is inherited from runbox's environment. */
static const char *const fixed_env[] = {
    "PATH=/usr/local/bin:/usr/bin:/bin",
    ("HOME=" RBX_SANDBOX_HOME), /* one element: parenthesized for clang */
    "LANG=C.UTF-8",
    "TERM=dumb",
    "TMPDIR=/tmp",
    "USER=runbox",
    "LOGNAME=runbox",
    /* bash reads the user database for SHELL when it is unset (the name
     * service's socket twice, nsswitch.conf, /etc/passwd; strace of a cold
     * run): pooled bash CPU 6.77 -> 6.70 ms (bench/RESULTS.md, issue 31). */
    "SHELL=/bin/bash",
    "PYTHONUNBUFFERED=1", /* output must reach the agent as it is printed, not at exit */
};
#define FIXED_ENV_COUNT (sizeof fixed_env / sizeof fixed_env[0])

char **rbx_execution_env(const rbx_request *request, const rbx_session *session, const char *extra)
{
    size_t asked = request ? request->env_count : 0;
    char **envp = calloc(FIXED_ENV_COUNT + 2 + asked + 1, sizeof *envp);
    if (!envp)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < FIXED_ENV_COUNT; i++)
        envp[n++] = strdup(fixed_env[i]);
    char session_id[RBX_SESSION_ID_MAX + 32];
    snprintf(session_id, sizeof session_id, "RUNBOX_SESSION_ID=%s", session->id);
    envp[n++] = strdup(session_id);
    if (extra)
        envp[n++] = strdup(extra);
    for (size_t i = 0; i < asked; i++) {
        const char *entry = request->env[i];
        size_t name_len = (size_t)(strchr(entry, '=') - entry);
        size_t slot = n;
        for (size_t j = 0; j < n; j++)
            if (envp[j] && strncmp(envp[j], entry, name_len + 1) == 0)
                slot = j; /* a request's value replaces a default */
        if (slot < n)
            free(envp[slot]);
        envp[slot] = strdup(entry);
        if (slot == n)
            n++;
    }
    for (size_t i = 0; i < n; i++)
        if (!envp[i]) {
            for (size_t j = 0; j < n; j++)
                free(envp[j]);
            free(envp);
            return NULL;
        }
    return envp;
}

void rbx_execution_env_free(char **envp)
{
    if (!envp)
        return;
    for (char **e = envp; *e; e++)
        free(*e);
    free(envp);
}

/* The bootstrap's input (runtime.c): with envp, the environment's entries
 * (a prepared sandbox's program started before it was known), then an
 * empty entry and the code. Returns a malloc'ed buffer and its length. */
static char *delimited_payload(const rbx_request *request, char *const *envp, size_t *len)
{
    size_t size = request->code_len + 1;
    for (char *const *e = envp; e && *e; e++)
        size += strlen(*e) + 1;
    char *payload = malloc(size);
    if (!payload)
        return NULL;
    size_t at = 0;
    for (char *const *e = envp; e && *e; e++) {
        size_t n = strlen(*e) + 1;
        memcpy(payload + at, *e, n);
        at += n;
    }
    payload[at++] = 0;
    memcpy(payload + at, request->code, request->code_len);
    *len = size;
    return payload;
}

/* Counted: "%010zu%010zu" (the exports' length, the code's), the exports
 * ("export 'NAME=VALUE'" lines, a quote inside written '\''), the code.
 * Bash reads a socket a byte at a time up to a delimiter (it cannot give
 * back what it read past one), but a count it reads in blocks: an
 * execution's 200 bytes of environment were 200 system calls. */
#define COUNT_DIGITS 10
#define COUNT_MAX 10000000000ULL /* 10^COUNT_DIGITS */
static char *counted_payload(const rbx_request *request, char *const *envp, size_t *len)
{
    size_t script = 0;
    for (char *const *e = envp; e && *e; e++) {
        script += sizeof "export ''\n" - 1;
        for (const char *c = *e; *c; c++)
            script += *c == '\'' ? 4 : 1;
    }
    if (script >= COUNT_MAX || request->code_len >= COUNT_MAX)
        return NULL;
    size_t size = 2 * COUNT_DIGITS + script + request->code_len;
    char *payload = malloc(size + 1);
    if (!payload)
        return NULL;
    size_t at = (size_t)snprintf(payload, size + 1, "%010zu%010zu", script, request->code_len);
    for (char *const *e = envp; e && *e; e++) {
        memcpy(payload + at, "export '", 8);
        at += 8;
        for (const char *c = *e; *c; c++) {
            if (*c == '\'') {
                memcpy(payload + at, "'\\''", 4);
                at += 4;
            } else {
                payload[at++] = *c;
            }
        }
        memcpy(payload + at, "'\n", 2);
        at += 2;
    }
    memcpy(payload + at, request->code, request->code_len);
    *len = size;
    return payload;
}

char *rbx_code_payload(const rbx_request *request, char *const *envp, bool counted, size_t *len)
{
    return counted ? counted_payload(request, envp, len) : delimited_payload(request, envp, len);
}

void rbx_execution_egress_result(rbx_sandbox *sandbox, rbx_result *result, rbx_trace *trace)
{
    rbx_egress_report report = {0};
    int64_t from = rbx_now_us();
    rbx_sandbox_egress_report(sandbox, &report);
    if (trace && sandbox->egress)
        trace->egress_us += rbx_now_us() - from;
    result->egress_denied = report.refused;
    result->egress_denied_count = report.count;
    memcpy(result->egress_denied_to, report.to, sizeof report.to);
}

/* An explicit --network where none can be had is an error; the default
 * quietly becomes loopback-only, and the result's "network" says so. */
bool rbx_execution_wants_network(const rbx_engine *engine, const rbx_request *request)
{
    if (request->network >= 0)
        return request->network != 0;
    return !engine->config.network_off && rbx_net_helper_available();
}

rbx_cgroup_limits rbx_execution_limits(const rbx_engine *engine, const rbx_request *request)
{
    uint32_t memory_mb = request->memory_mb ? request->memory_mb : engine->config.memory_mb;
    double cpus = request->cpus > 0 ? request->cpus : engine->config.cpus;
    const rbx_runtime *runtime = rbx_runtime_find(request->language);
    return (rbx_cgroup_limits){.memory_bytes = (uint64_t)memory_mb << 20,
                               .pids = engine->config.pids_max,
                               .cpu_weight = engine->config.cpu_weight,
                               .cpu_quota_us = (uint64_t)(cpus * RBX_CPU_PERIOD_US + 0.5),
                               .reserved_bytes = runtime ? (uint64_t)runtime->reserved_mb << 20 : 0};
}
