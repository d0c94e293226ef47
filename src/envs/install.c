/* Installing an environment: the runtime's installer runs in a sandbox of
 * its own, with only the new environment's directory writable and its own
 * network setting, then the directory is renamed into place. */
#include "base/capture.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "egress/policy.h"
#include "egress/rules.h"
#include "engine/engine.h"
#include "envs/deps.h"
#include "images/roots.h"
#include "languages/runtime.h"
#include "runbox.h"
#include "sandbox/cgroup.h"
#include "sandbox/net.h"
#include "sandbox/sandbox.h"
#include "sandbox/uids.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define INSTALL_ENV_MAX 64
#define INSTALL_MEMORY_MB 2048
#define INSTALL_PIDS 1024

/* The installer's environment: a fixed base, plus the operator's pip and
 * npm settings (PIP_INDEX_URL, NPM_CONFIG_REGISTRY, ...) so a mirror works.
 * Copies: the sandbox's init wipes runbox's own environment strings. */
static char **install_env(void)
{
    static const char *const base[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp",
                                       "TMPDIR=/tmp", "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1"};
    char **envp = calloc(INSTALL_ENV_MAX, sizeof *envp);
    size_t n = 0;
    for (size_t i = 0; envp && i < sizeof base / sizeof base[0]; i++)
        envp[n++] = strdup(base[i]);
    for (char **e = environ; envp && *e && n < INSTALL_ENV_MAX - 1; e++)
        if (!strncmp(*e, "PIP_", 4) || !strncasecmp(*e, "npm_config_", 11))
            envp[n++] = strdup(*e);
    for (size_t i = 0; envp && i < n; i++)
        if (!envp[i])
            envp[i] = strdup("RUNBOX_UNSET=1");
    return envp;
}

static void free_env(char **envp)
{
    for (size_t i = 0; envp && envp[i]; i++)
        free(envp[i]);
    free(envp);
}

static rbx_net_mode install_network(const rbx_engine *engine)
{
    if (engine->config.install_network_host)
        return RBX_NET_HOST;
    /* Without a network helper, a requirement the system already satisfies
     * still installs; one that needs a download fails with pip's message. */
    return rbx_net_helper_available() ? RBX_NET_OUTSIDE : RBX_NET_LOOPBACK;
}

/* Runs the installer; fills *ok and the installer's output. */
static rbx_status run_installer(rbx_engine *engine, const rbx_runtime *runtime, rbx_root *root,
                                const rbx_requirements *reqs, const char *dir, bool *ok,
                                char **output, rbx_error *err)
{
    char *argv[4 + 64 + 1] = {"sh", "-c", (char *)runtime->install, "sh"};
    size_t argc = 4;
    for (size_t i = 0; i < reqs->count && argc < 4 + 64; i++)
        argv[argc++] = reqs->specs[i];
    argv[argc] = NULL;
    char **envp = install_env();
    if (!envp)
        return rbx_fail(err, RBX_ESYSTEM, "out of memory");
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    rbx_sandbox_spec spec = {
        .interpreter = "/bin/sh",
        .argv = argv,
        .envp = envp,
        .root = rbx_root_plan_of(root),
        .root_request = {.binds = {{.host = dir, .inside = runtime->env_inside, .writable = true}},
                         .bind_count = 1,
                         .become_root = engine->is_root},
        .code_fd = null_fd,
        .is_root = engine->is_root,
        .network = install_network(engine),
        /* Builds (sdists, native npm modules) may use the operator's whole
         * allowance of cores, never more. */
        .limits = {.memory_bytes = (uint64_t)INSTALL_MEMORY_MB << 20,
                   .pids = INSTALL_PIDS,
                   .cpu_quota_us = (uint64_t)(engine->config.max_cpus * RBX_CPU_PERIOD_US)},
        .file_size_max = engine->config.disk_cap_bytes,
    };
    spec.root_request.nameserver = spec.network == RBX_NET_OUTSIDE;
    /* Installs follow the operator's egress policy (not a request's
     * narrowing: the package index is the operator's to allow); a mirror
     * on a private address is allowed with --egress-allow, or reached
     * with --install-network host. */
    rbx_egress_plan egress = {0};
    if (spec.network == RBX_NET_OUTSIDE) {
        if (rbx_egress_plan_make(&egress, engine->egress, NULL, err) != RBX_OK) {
            if (null_fd >= 0)
                close(null_fd);
            free_env(envp);
            return err->status;
        }
        spec.egress = &egress;
    }
    spec.template_ns = rbx_root_template_ns(root);
    rbx_capture out;
    rbx_capture_init(&out, engine->config.install_output_cap);
    rbx_watch *watch = calloc(1, sizeof *watch);
    rbx_sandbox sandbox;
    rbx_status status = watch ? rbx_sandbox_start(&spec, &sandbox, err)
                              : rbx_fail(err, RBX_ESYSTEM, "out of memory");
    if (spec.template_ns >= 0)
        close(spec.template_ns);
    if (null_fd >= 0)
        close(null_fd);
    free_env(envp);
    if (status == RBX_OK) {
        /* stdout and stderr go to one capture: the installer's own story. */
        *watch = (rbx_watch){.timeout_s = engine->config.install_timeout_s,
                             .cancel_fd = -1,
                             .kill_fd = -1,
                             .out = &out,
                             .err = &out};
        rbx_exit_report report;
        bool reported = rbx_supervise(&sandbox, watch, &report);
        rbx_egress_report refused = {0};
        rbx_sandbox_egress_report(&sandbox, &refused);
        rbx_sandbox_close(&sandbox);
        if (refused.refused) {
            char note[RBX_EGRESS_REPORT_MAX * 130 + 120];
            size_t n = (size_t)snprintf(note, sizeof note,
                                        "\nrunbox: the egress policy refused %llu connection "
                                        "attempts or lookups of the installer:",
                                        (unsigned long long)refused.refused);
            for (size_t i = 0; i < refused.count && n < sizeof note; i++)
                n += (size_t)snprintf(note + n, sizeof note - n, " %s", refused.to[i]);
            if (n < sizeof note)
                n += (size_t)snprintf(note + n, sizeof note - n, "\n");
            rbx_capture_add(&out, note, n < sizeof note ? n : sizeof note - 1);
        }
        *ok = reported && !watch->timed_out && WIFEXITED(report.wait_status) &&
              WEXITSTATUS(report.wait_status) == 0;
        uint64_t dropped;
        size_t len;
        *output = rbx_capture_finish(&out, "installer output", &dropped, &len);
        if (watch->timed_out)
            status = rbx_fail(err, RBX_EINVAL, "the install timed out after %g s",
                              engine->config.install_timeout_s);
    }
    rbx_capture_free(&out);
    free(watch);
    rbx_egress_plan_free(&egress);
    return status;
}

/* The installer ran arbitrary code (setup.py, npm scripts) with the
 * environment's directory writable: whatever it left at the metadata's name
 * is replaced, never followed or opened. */
static int write_meta(int envs_fd, const char *dir, const rbx_runtime *runtime,
                      const rbx_requirements *reqs, const char *description)
{
    json_t *specs = json_array();
    for (size_t i = 0; i < reqs->count; i++)
        json_array_append_new(specs, json_string(reqs->specs[i]));
    json_t *meta = json_pack("{s:s, s:o, s:I, s:s}", "runtime", runtime->name, "requirements",
                             specs, "created", (json_int_t)time(NULL), "description", description);
    char *text = meta ? json_dumps(meta, JSON_INDENT(1)) : NULL;
    json_decref(meta);
    int fd = openat(envs_fd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int rc = text && fd >= 0 ? rbx_write_new_file(fd, RBX_ENV_META, text, strlen(text)) : -1;
    if (fd >= 0)
        close(fd);
    free(text);
    return rc;
}

rbx_status rbx_env_install(rbx_engine *engine, const rbx_runtime *runtime, rbx_root *root,
                           const rbx_requirements *reqs, int dirfd, rbx_env *env,
                           const char *description, rbx_error *err)
{
    char temp[160], temp_path[4700], suffix[RBX_SESSION_ID_MAX + 1];
    rbx_session_id_new(suffix);
    snprintf(temp, sizeof temp, ".tmp-%s-%s", env->key, suffix);
    snprintf(temp_path, sizeof temp_path, "%s/envs/%s", engine->state_dir, temp);
    if (mkdirat(dirfd, temp, 0755) != 0 ||
        (engine->is_root && fchownat(dirfd, temp, RBX_HOST_UID_BASE + RBX_SANDBOX_UID,
                                     RBX_HOST_UID_BASE + RBX_SANDBOX_UID, 0) != 0))
        return rbx_fail(err, RBX_ESYSTEM, "cannot create the environment %s: %s", env->key,
                        strerror(errno));
    bool ok = false;
    char *output = NULL;
    rbx_status status = run_installer(engine, runtime, root, reqs, temp_path, &ok, &output, err);
    if (status == RBX_OK && ok && write_meta(dirfd, temp, runtime, reqs, description) == 0) {
        /* A stale directory of that name (a collision, or damage) goes first. */
        rbx_remove_tree(dirfd, env->key);
        if (renameat(dirfd, temp, dirfd, env->key) != 0)
            status = rbx_fail(err, RBX_ESYSTEM, "cannot put the environment %s in place: %s",
                              env->key, strerror(errno));
    } else if (status == RBX_OK) {
        env->failed = true;
        env->message = output;
        output = NULL;
    }
    if (status != RBX_OK && err && err->status == RBX_EINVAL) {
        /* A timed-out install is the requirements' failure, reported as a result. */
        env->failed = true;
        env->message = strdup(err->message);
        status = RBX_OK;
    }
    rbx_remove_tree(dirfd, temp); /* gone already when it was renamed */
    free(output);
    return status;
}
