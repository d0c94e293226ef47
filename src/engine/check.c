/* runbox check: probes what this host lets runbox guarantee, in words. */
#include "base/error.h"
#include "egress/policy.h"
#include "engine/engine.h"
#include "execution/given.h"
#include "execution/policy.h"
#include "images/roots.h"
#include "languages/runtime.h"
#include "runbox.h"
#include "sandbox/cgroup.h"
#include "sandbox/criu.h"
#include "sandbox/net.h"
#include "sandbox/seccomp.h"
#include "sandbox/uids.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static rbx_check_item *add(rbx_check_item *items, size_t max, size_t *n, const char *name, bool ok,
                           bool essential, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

static rbx_check_item *add(rbx_check_item *items, size_t max, size_t *n, const char *name, bool ok,
                           bool essential, const char *fmt, ...)
{
    if (*n >= max)
        return NULL;
    rbx_check_item *item = &items[(*n)++];
    snprintf(item->name, sizeof item->name, "%s", name);
    item->ok = ok;
    item->essential = essential;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(item->detail, sizeof item->detail, fmt, ap);
    va_end(ap);
    return item;
}

static void check_cgroups(rbx_check_item *items, size_t max, size_t *n)
{
    const rbx_cgroup_support *cg = rbx_cgroup_probe();
    if (cg->mode == RBX_CGROUP_NONE) {
        add(items, max, n, "cgroups", false, false,
            "no cgroup access: memory and process limits fall back to rlimits (per process, "
            "weaker), and results say \"limits\": \"rlimits\" (%s)",
            cg->detail);
        return;
    }
    add(items, max, n, "cgroups", cg->memory && cg->pids, false,
        "cgroup %s: memory limit %s, process limit %s, CPU share %s (%s)",
        cg->mode == RBX_CGROUP_V2 ? "v2" : "v1", cg->memory ? "enforced" : "NOT available",
        cg->pids ? "enforced" : "NOT available", cg->cpu ? "enforced" : "not available",
        cg->detail);
}

/* A real run of code for a check (bash unless said), with the network on
 * or off. */
static rbx_status probe_in(rbx_engine *engine, const char *language, const char *code, bool network,
                           rbx_result *result, rbx_error *err)
{
    rbx_request request;
    rbx_request_init(&request);
    request.language = language;
    request.code = code;
    request.code_len = strlen(code);
    request.network = network;
    request.timeout_s = 10;
    return rbx_execute(engine, &request, NULL, NULL, result, err);
}

static rbx_status probe(rbx_engine *engine, const char *code, bool network, rbx_result *result,
                        rbx_error *err)
{
    return probe_in(engine, "bash", code, network, result, err);
}

/* Each language runs a line in a sandbox, through its bootstrap, and says
 * its version: an interpreter that exists but cannot run runbox's
 * bootstrap (Debian 12's own Node.js 18 lacks a vm constant it uses) fails
 * here rather than on an agent's first call. */
static void check_language(rbx_engine *engine, const rbx_runtime *runtime, rbx_check_item *items,
                           size_t max, size_t *n)
{
    char why[400];
    const rbx_root *root = engine->roots[0];
    if (!rbx_root_has_runtime(root, runtime, why, sizeof why)) {
        add(items, max, n, runtime->name, false, false, "%s", why);
        return;
    }
    if (!root->tree[0] && access(runtime->interpreter, X_OK) != 0) {
        add(items, max, n, runtime->name, false, false, "%s is missing", runtime->interpreter);
        return;
    }
    rbx_result result;
    rbx_error err = {0};
    if (probe_in(engine, runtime->name, runtime->version_code, false, &result, &err) != RBX_OK) {
        add(items, max, n, runtime->name, false, false, "%s: a run failed: %s",
            runtime->interpreter, err.message);
        return;
    }
    const char *out = result.output ? result.output : "";
    bool ok = result.success && *out;
    int len = (int)strcspn(out, "\n");
    if (ok)
        add(items, max, n, runtime->name, true, false, "%s %.*s runs in the sandbox",
            runtime->interpreter, len, out);
    else
        add(items, max, n, runtime->name, false, false,
            "%s cannot run runbox's bootstrap (runbox needs %s): %.200s", runtime->interpreter,
            runtime->needs, result.error && *result.error ? result.error : out);
    rbx_result_free(&result);
}

/* Which images the store has and which one executions get. */
static void check_images(rbx_engine *engine, rbx_check_item *items, size_t max, size_t *n)
{
    rbx_image_info *infos = NULL;
    size_t count = 0;
    rbx_error err = {0};
    char names[700] = "";
    if (rbx_image_list(engine, &infos, &count, &err) != RBX_OK)
        snprintf(names, sizeof names, "(cannot list them: %.300s)", err.message);
    for (size_t i = 0; i < count; i++) {
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s (%.19s, %llu MiB%s%.40s)", i ? ", " : "",
                 infos[i].name, infos[i].digest, (unsigned long long)(infos[i].size_bytes >> 20),
                 infos[i].node[0] ? ", Node.js " : "", infos[i].node);
    }
    free(infos);
    const rbx_root *root = engine->roots[0];
    /* Falling back to the host's /usr is not an error (runbox works), but
     * a user who built the default image must see that it is not used. */
    if (engine->image_note[0] && !root->tree[0]) {
        add(items, max, n, "images", false, false, "%.600s; it has %s", engine->image_note,
            count ? names : "no image");
        return;
    }
    add(items, max, n, "images", true, false, "executions run on %s%s%s; the store (%s) has %s",
        root->tree[0] ? "image " : "",
        root->tree[0] ? root->image : "the host's /usr (--image host)", "", engine->images_dir,
        count ? names : "no image");
}

/* Whether this host can checkpoint a sandbox's process tree (hibernation
 * of stateful kernels, issue 34): a criu recent enough whose own check
 * passes. Not essential: without it kernels are stopped as before. */
static void check_checkpoints(rbx_engine *engine, rbx_check_item *items, size_t max, size_t *n)
{
    rbx_criu_support criu;
    rbx_criu_probe(engine->config.criu, engine->is_root, &criu);
    add(items, max, n, "checkpoints", criu.ok, false, "%s", criu.detail);
}

/* Whether a paused E2B sandbox's commands and terminals can be frozen
 * (and thawed by its resume), or are stopped at the pause. Not essential. */
static void check_freezer(rbx_check_item *items, size_t max, size_t *n)
{
    const rbx_cgroup_support *s = rbx_cgroup_probe();
    if (s->freezer)
        add(items, max, n, "freezer", true, false,
            "%s: a paused E2B sandbox's commands and terminals are frozen, and go on when it "
            "resumes",
            s->mode == RBX_CGROUP_V2 ? "cgroup v2's cgroup.freeze" : "a cgroup v1 freezer");
    else
        add(items, max, n, "freezer", false, false,
            "no cgroup freezer%s: a paused E2B sandbox's commands and terminals are stopped",
            s->mode == RBX_CGROUP_V1 ? " (no cgroup v1 freezer hierarchy is mounted)" : "");
}

/* One real execution proves namespaces, the new root, seccomp and the
 * interpreter together. */
static void check_end_to_end(rbx_engine *engine, rbx_check_item *items, size_t max, size_t *n)
{
    rbx_result result;
    rbx_error err = {0};
    if (probe(engine, "[ \"$(id -u)\" = 1000 ] && ! touch /usr/.rbx 2>/dev/null && echo isolated",
              false, &result, &err) != RBX_OK) {
        add(items, max, n, "sandbox", false, true, "a sandboxed run failed: %s", err.message);
        return;
    }
    bool ok = result.success && result.output && !strcmp(result.output, "isolated\n");
    add(items, max, n, "sandbox", ok, true,
        ok ? "a sandboxed run works: new user, PID, mount, IPC, UTS, cgroup and network "
             "namespaces, uid 1000 inside, read-only system, no capabilities, no_new_privs"
           : "a sandboxed run did not behave: %.300s",
        result.error ? result.error : "");
    rbx_result_free(&result);
}

/* An address of this host other than loopback, as text, or false. */
static bool host_address(char *text, size_t size)
{
    struct ifaddrs *all;
    if (getifaddrs(&all) != 0)
        return false;
    bool found = false;
    for (struct ifaddrs *i = all; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK))
            continue;
        found = inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, text,
                          (socklen_t)size) != NULL;
    }
    freeifaddrs(all);
    return found;
}

/* The egress policy, proven by a network-on run whose connection to one
 * of the host's own addresses is refused inside the sandbox: were the
 * policy broken, that connection would still stay on this machine. */
static void check_egress(rbx_engine *engine, rbx_check_item *items, size_t max, size_t *n)
{
    char policy[300];
    rbx_egress_policy_describe(engine->egress, policy, sizeof policy);
    if (!rbx_net_helper_available() || engine->egress->open) {
        add(items, max, n, "egress", engine->egress->open ? false : true, false, "%s%s",
            engine->egress->open ? "" : "(no network here) ", policy);
        return;
    }
    /* Without an address but loopback there is nothing to try a connection
     * to: the run still proves the rules could be installed. */
    char address[64], code[160] = "true";
    bool tried = host_address(address, sizeof address);
    if (tried)
        snprintf(code, sizeof code, "exec 3<>/dev/tcp/%s/9 && echo reached", address);
    rbx_result result;
    rbx_error err = {0};
    if (probe(engine, code, true, &result, &err) != RBX_OK) {
        add(items, max, n, "egress", false, false, "a network-on run failed: %s", err.message);
        return;
    }
    bool ok = tried
                  ? result.egress_denied > 0 && !(result.output && strstr(result.output, "reached"))
                  : result.success;
    add(items, max, n, "egress", ok, false, "%s: %s",
        !ok     ? "NOT enforced (a test run was not refused)"
        : tried ? "enforced by nftables in each sandbox"
                : "installed by nftables in each sandbox (no address but loopback to try)",
        policy);
    rbx_result_free(&result);
}

/* The pool of prepared sandboxes, as long-lived front ends run it: made
 * here, filled, and proven by an execution it serves; what the waiting
 * sandboxes hold is what an idle server holds for them. */
static void check_pool(rbx_engine *engine, rbx_check_item *items, size_t max, size_t *n)
{
    char why[300];
    if (!rbx_engine_start_pool(engine, why, sizeof why)) {
        add(items, max, n, "pool", engine->config.pool_off, false,
            "no prepared sandboxes (%s): one-off executions start cold", why);
        return;
    }
    rbx_pool_stats pool;
    int64_t until = rbx_now_ms() + 20000;
    do {
        struct timespec pause = {.tv_nsec = 50 * 1000 * 1000};
        nanosleep(&pause, NULL);
        rbx_engine_pool_stats(engine, &pool);
    } while ((pool.ready < pool.target || !pool.idle_memory_bytes) && rbx_now_ms() < until);
    rbx_request plain;
    rbx_request_init(&plain);
    rbx_result result;
    rbx_error err = {0};
    bool network = rbx_execution_wants_network(engine, &plain);
    bool served = probe(engine, "echo pooled", network, &result, &err) == RBX_OK;
    served = served && result.pooled && result.output && !strcmp(result.output, "pooled\n");
    if (err.status == RBX_OK)
        rbx_result_free(&result);
    add(items, max, n, "pool", served, false,
        "%s: %zu prepared sandboxes ready (one a language, network %s), holding %.1f MiB "
        "while they wait (cap %.0f MiB, at most %zu sandboxes; --pool, --pool-memory)%s%s",
        served ? "one-off executions are served from prepared sandboxes"
               : "a prepared sandbox did NOT serve the test execution",
        pool.ready, network ? "on" : "off", (double)pool.idle_memory_bytes / 1048576.0,
        (double)pool.memory_cap_bytes / 1048576.0, pool.max,
        pool.last_failure[0] ? "; last failure: " : "", pool.last_failure);
}

size_t rbx_check(rbx_engine *engine, rbx_check_item *items, size_t max)
{
    size_t n = 0;
    add(items, max, &n, "user", true, false,
        engine->is_root ? "running as root: the sandbox's user maps to host uid %d, full "
                          "guarantees where the checks below pass"
                        : "running unprivileged (uid %d): the sandbox's user is your own uid",
        engine->is_root ? RBX_HOST_UID_BASE + RBX_SANDBOX_UID : (int)getuid());
    check_end_to_end(engine, items, max, &n);
    char why[256] = "";
    bool seccomp = rbx_seccomp_available(why, sizeof why) == 0;
    if (seccomp)
        snprintf(why, sizeof why, "%zu", rbx_seccomp_instructions());
    add(items, max, &n, "seccomp", seccomp, true,
        seccomp ? "the syscall policy (%s BPF instructions, compiled when runbox was built) is "
                  "installed before every program starts"
                : "cannot install the seccomp policy: %s",
        why);
    check_cgroups(items, max, &n);
    bool capped = engine->storage == RBX_STORAGE_BTRFS;
    add(items, max, &n, "disk", capped, false, "%s; %s", engine->storage_detail,
        capped ? "each execution's /tmp (and a one-off run's home) is capped scratch space on it"
               : "/tmp and one-off homes are sized tmpfs");
    bool net = rbx_net_helper_available();
    const char *helper = *rbx_net_helper_path() ? rbx_net_helper_path() : RBX_NET_HELPER;
    if (net)
        add(items, max, &n, "network", true, false,
            "--network works through %s (libslirp) with the host's loopback unreachable; "
            "--no-network leaves loopback only",
            helper);
    else
        add(items, max, &n, "network", false, false,
            "--network is unavailable (needs root, %s built beside runbox, libslirp0 and "
            "access to /dev/net/tun); executions run with loopback only",
            helper);
    /* The languages before the pool: once its thread runs, this process
     * can no longer make a cold sandbox's user namespace itself. */
    for (size_t i = 0; i < rbx_runtime_count(); i++)
        check_language(engine, rbx_runtime_find(rbx_runtime_name(i)), items, max, &n);
    check_images(engine, items, max, &n);
    check_egress(engine, items, max, &n);
    check_pool(engine, items, max, &n);
    check_checkpoints(engine, items, max, &n);
    check_freezer(items, max, &n);
    add(items, max, &n, "policy", true, false,
        engine->policy ? "%zu deny rules from %s (a convenience: isolation is the boundary)"
                       : "no deny rules%.0zu%.0s",
        rbx_policy_rule_count(engine->policy),
        engine->config.policy_file ? engine->config.policy_file : "");
    return n;
}
