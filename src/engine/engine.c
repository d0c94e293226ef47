/* The engine object: operator configuration and the state directory. */
#include "engine/engine.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "egress/policy.h"
#include "execution/policy.h"
#include "images/roots.h"
#include "kernels/kernels.h"
#include "pool/pool.h"
#include "processes/processes.h"
#include "runbox.h"
#include "sandbox/cgroup.h"
#include "sandbox/net.h"
#include "sessions/scratch_spares.h"
#include "sessions/storage.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void rbx_config_defaults(rbx_config *config)
{
    memset(config, 0, sizeof *config);
    config->max_code_bytes = 1 << 20;
    config->default_timeout_s = 30;
    config->max_timeout_s = 300;
    config->output_cap_bytes = 1 << 20;
    config->disk_cap_bytes = 1ull << 30;
    config->memory_mb = 512;
    config->max_memory_mb = 8192;
    config->pids_max = 256;
    config->cpu_weight = 100;
    config->cpus = 1;
    config->max_requirements = 32;
    config->install_timeout_s = 300;
    config->install_output_cap = 64 * 1024;
    config->envs_cap_bytes = 10ull << 30;
    config->kernel_idle_s = 900;
    config->pool_max = 8;
    config->pool_memory_mb = 512;
    config->pool_idle_s = 30;
}

void rbx_request_init(rbx_request *request)
{
    memset(request, 0, sizeof *request);
    request->cancel_fd = -1;
    request->network = -1;
}

/* path as an absolute one (a relative one from the working directory), so
 * that what runbox records and passes on does not depend on where it ran. */
static bool absolute_path(char *out, size_t size, const char *path)
{
    char cwd[2048];
    if (path[0] != '/' && !getcwd(cwd, sizeof cwd))
        return false;
    /* Cut short, it would name another directory. */
    int len = path[0] == '/' ? snprintf(out, size, "%s", path)
                             : snprintf(out, size, "%s/%s", cwd, path);
    if (len < 0 || (size_t)len >= size) {
        errno = ENAMETOOLONG;
        return false;
    }
    return true;
}

static void default_state_dir(char *out, size_t size)
{
    if (geteuid() == 0) {
        snprintf(out, size, "/var/lib/runbox");
        return;
    }
    const char *xdg = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    if (xdg && xdg[0] == '/')
        snprintf(out, size, "%s/runbox", xdg);
    else if (home && home[0] == '/')
        snprintf(out, size, "%s/.local/state/runbox", home);
    else
        snprintf(out, size, "/tmp/runbox-%u", (unsigned)geteuid());
}

/* The image store every state directory of this user shares: images are
 * system software, built once per host (make deps), so a runbox given
 * another state directory still runs on them. Root's is the system's;
 * an ordinary user's is in their own data directory (XDG), and without
 * one the state directory's images/, a directory runbox checked is its
 * own (a guessed path in /tmp could be another user's, holding a
 * "default" image of their choosing). */
static void default_images_dir(char *out, size_t size, const char *state_dir)
{
    const char *xdg = getenv("XDG_DATA_HOME");
    const char *home = getenv("HOME");
    if (geteuid() == 0)
        snprintf(out, size, "/var/lib/runbox/images");
    else if (xdg && xdg[0] == '/')
        snprintf(out, size, "%s/runbox/images", xdg);
    else if (home && home[0] == '/')
        snprintf(out, size, "%s/.local/share/runbox/images", home);
    else
        snprintf(out, size, "%s/images", state_dir);
}

/* The state directory holds every session's files, every sandbox's scratch
 * space (/tmp, one-off homes), the environments, the kernels' locks and the
 * local socket: no host user but runbox's own (root, or the ordinary user
 * an unprivileged runbox runs as) may reach any of it. Sandboxes need no
 * way in: each opens its host directories (home, /tmp, environments,
 * image) by descriptor before it leaves runbox's uid (sandbox/mount.c), or
 * gets them as detached mounts from runbox (sandbox/template.c). So every
 * directory runbox makes in it is 0700; the state directory itself is made
 * 0711, searchable but not listable, so that other users may run on its
 * image store (images/: system software, readable like /usr), and one that
 * is more open is closed to that (one that is closed more, like systemd's
 * StateDirectoryMode=0700, stays so). A state directory another user owns
 * is refused: its owner could open it up at any time. */
static rbx_status open_state_dir(rbx_engine *engine, rbx_error *err)
{
    const char *fix = "choose another with --state-dir or RUNBOX_STATE_DIR";
    struct stat st;
    bool existed = stat(engine->state_dir, &st) == 0;
    if (rbx_mkdir_p(engine->state_dir, 0711) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot create state directory %s: %s (%s)",
                        engine->state_dir, strerror(errno), fix);
    int dir = open(engine->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0 || fstat(dir, &st) != 0) {
        rbx_status status = rbx_fail(err, RBX_ESYSTEM, "cannot open state directory %s: %s (%s)",
                                     engine->state_dir, strerror(errno), fix);
        if (dir >= 0)
            close(dir);
        return status;
    }
    rbx_status status = RBX_OK;
    if (st.st_uid != geteuid())
        status = rbx_fail(err, RBX_ESYSTEM,
                          "state directory %s belongs to uid %u, not to uid %u that runbox runs "
                          "as: its owner could open the sessions' files to anyone (%s)",
                          engine->state_dir, (unsigned)st.st_uid, (unsigned)geteuid(), fix);
    else if (fchmod(dir, existed ? 0700 | (st.st_mode & 0011) : 0711) != 0 ||
             (engine->trash_fd = rbx_private_dir_at(dir, "trash")) < 0)
        status = rbx_fail(err, RBX_ESYSTEM, "cannot prepare state directory %s: %s (%s)",
                          engine->state_dir, strerror(errno), fix);
    /* Made when first needed; an earlier runbox left environments 0711. */
    static const char *const later[] = {"envs", "templates"};
    for (size_t i = 0; status == RBX_OK && i < sizeof later / sizeof later[0]; i++) {
        int fd = openat(dir, later[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 && fchmod(fd, 0700) != 0)
            status = rbx_fail(err, RBX_ESYSTEM, "cannot close %s/%s to other users: %s",
                              engine->state_dir, later[i], strerror(errno));
        if (fd >= 0)
            close(fd);
    }
    close(dir);
    return status;
}

/* A process started with a closed stdin, stdout or stderr would get its
 * next pipe on that number, and a sandbox would then write into it. */
static void keep_standard_fds_open(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) < 0)
            return;
}

rbx_engine *rbx_engine_new(const rbx_config *config, rbx_error *err)
{
    keep_standard_fds_open();
    rbx_engine *engine = calloc(1, sizeof *engine);
    if (!engine) {
        rbx_fail(err, RBX_ESYSTEM, "out of memory");
        return NULL;
    }
    rbx_config_defaults(&engine->config);
    if (config) {
        /* Zero fields keep their default. */
        if (config->max_code_bytes)
            engine->config.max_code_bytes = config->max_code_bytes;
        if (config->default_timeout_s > 0)
            engine->config.default_timeout_s = config->default_timeout_s;
        if (config->max_timeout_s > 0)
            engine->config.max_timeout_s = config->max_timeout_s;
        if (config->output_cap_bytes)
            engine->config.output_cap_bytes = config->output_cap_bytes;
        engine->config.state_dir = config->state_dir;
        engine->config.network_off = config->network_off;
        engine->config.hibernate_off = config->hibernate_off;
        engine->config.hibernate_below_bytes = config->hibernate_below_bytes;
        if (config->disk_cap_bytes)
            engine->config.disk_cap_bytes = config->disk_cap_bytes;
        engine->config.storage_bytes = config->storage_bytes;
        engine->config.storage = config->storage;
        if (config->memory_mb)
            engine->config.memory_mb = config->memory_mb;
        if (config->max_memory_mb)
            engine->config.max_memory_mb = config->max_memory_mb;
        if (config->pids_max)
            engine->config.pids_max = config->pids_max;
        if (config->cpu_weight)
            engine->config.cpu_weight = config->cpu_weight;
        if (config->cpus > 0)
            engine->config.cpus = config->cpus;
        if (config->max_cpus > 0)
            engine->config.max_cpus = config->max_cpus;
        engine->config.policy_file = config->policy_file;
        if (config->max_requirements)
            engine->config.max_requirements = config->max_requirements;
        engine->config.allow_requirement_urls = config->allow_requirement_urls;
        if (config->install_timeout_s > 0)
            engine->config.install_timeout_s = config->install_timeout_s;
        if (config->install_output_cap)
            engine->config.install_output_cap = config->install_output_cap;
        engine->config.install_network_host = config->install_network_host;
        if (config->envs_cap_bytes)
            engine->config.envs_cap_bytes = config->envs_cap_bytes;
        if (config->kernel_idle_s > 0)
            engine->config.kernel_idle_s = config->kernel_idle_s;
        engine->config.max_kernels = config->max_kernels;
        engine->config.egress_allow = config->egress_allow;
        engine->config.egress_deny = config->egress_deny;
        engine->config.egress_allowlist_only = config->egress_allowlist_only;
        engine->config.egress_open = config->egress_open;
        engine->config.egress_resolver = config->egress_resolver;
        engine->config.egress_file = config->egress_file;
        engine->config.images_dir = config->images_dir;
        engine->config.image = config->image;
        engine->config.images_allowed = config->images_allowed;
        engine->config.criu = config->criu;
        engine->config.storage_later = config->storage_later;
        engine->config.pool_off = config->pool_off;
        if (config->pool_max)
            engine->config.pool_max = config->pool_max;
        if (config->pool_memory_mb)
            engine->config.pool_memory_mb = config->pool_memory_mb;
        if (config->pool_idle_s > 0)
            engine->config.pool_idle_s = config->pool_idle_s;
    }
    if (engine->config.default_timeout_s > engine->config.max_timeout_s)
        engine->config.default_timeout_s = engine->config.max_timeout_s;
    if (engine->config.max_cpus <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        engine->config.max_cpus = cores > 0 ? (double)cores : 1;
    }
    if (engine->config.cpus > engine->config.max_cpus)
        engine->config.cpus = engine->config.max_cpus;
    if (engine->config.memory_mb > engine->config.max_memory_mb)
        engine->config.memory_mb = engine->config.max_memory_mb;
    if (engine->config.output_cap_bytes < 64)
        engine->config.output_cap_bytes = 64;
    engine->is_root = geteuid() == 0;
    engine->kernels = rbx_kernels_new();
    engine->session_holders.stop = rbx_kernels_stop_session;
    engine->session_holders.describe = rbx_kernels_describe;
    engine->session_holders.foreign_owner = rbx_kernels_foreign_owner;
    engine->processes = rbx_processes_new();
    engine->session_holders.stop_processes = rbx_processes_stop_session;
    engine->session_holders.keep_out_processes = rbx_processes_keep_out;
    pthread_mutex_init(&engine->running_lock, NULL);
    engine->sessions_fd = engine->session_trash_fd = engine->scratch_fd = engine->trash_fd = -1;

    const char *dir = engine->config.state_dir;
    if (dir && *dir) {
        if (!absolute_path(engine->state_dir, sizeof engine->state_dir, dir))
            goto fail_cwd;
    } else {
        default_state_dir(engine->state_dir, sizeof engine->state_dir);
    }
    engine->config.state_dir = engine->state_dir;
    snprintf(engine->sessions_dir, sizeof engine->sessions_dir, "%s/sessions", engine->state_dir);
    snprintf(engine->trash_dir, sizeof engine->trash_dir, "%s/trash", engine->state_dir);

    if (open_state_dir(engine, err) != RBX_OK) {
        rbx_engine_free(engine);
        return NULL;
    }
    const char *images = engine->config.images_dir;
    if (!images || !*images)
        default_images_dir(engine->images_dir, sizeof engine->images_dir, engine->state_dir);
    else if (!absolute_path(engine->images_dir, sizeof engine->images_dir, images))
        goto fail_cwd;
    engine->config.images_dir = engine->images_dir;
    if (rbx_roots_init(engine, err) != RBX_OK) {
        rbx_engine_free(engine);
        return NULL;
    }
    if (engine->config.policy_file &&
        !(engine->policy = rbx_policy_load(engine->config.policy_file, err))) {
        rbx_engine_free(engine);
        return NULL;
    }
    if (!(engine->egress = calloc(1, sizeof *engine->egress)) ||
        rbx_egress_policy_load(engine->egress, &engine->config, err) != RBX_OK) {
        if (!engine->egress)
            rbx_fail(err, RBX_ESYSTEM, "out of memory");
        free(engine->egress);
        engine->egress = NULL;
        rbx_engine_free(engine);
        return NULL;
    }
    if (!engine->config.storage_later && rbx_engine_open_storage(engine, err) != RBX_OK) {
        rbx_engine_free(engine);
        return NULL;
    }
    return engine;

fail_cwd:
    rbx_fail(err, RBX_ESYSTEM, "cannot resolve the state or image directory: %s", strerror(errno));
    rbx_engine_free(engine);
    return NULL;
}

void rbx_engine_free(rbx_engine *engine)
{
    if (!engine)
        return;
    /* First: the cgroups and scratch spaces of the sandboxes stopped below
     * go as they end. */
    rbx_cgroup_keep_spares(0);
    rbx_scratch_spares_free(engine);
    rbx_pool_stop(engine->pool); /* its sandboxes use the rest */
    engine->pool = NULL;
    rbx_kernels_free(engine);
    rbx_processes_free(engine);
    rbx_net_reap();
    rbx_storage_close(engine);
    if (engine->trash_fd >= 0)
        close(engine->trash_fd);
    rbx_roots_free(engine);
    rbx_policy_free(engine->policy);
    if (engine->egress)
        rbx_egress_policy_free(engine->egress);
    free(engine->egress);
    pthread_mutex_destroy(&engine->running_lock);
    free(engine);
}

rbx_status rbx_engine_open_storage(rbx_engine *engine, rbx_error *err)
{
    if (engine->storage_open)
        return RBX_OK;
    rbx_status status = rbx_storage_open(engine, err);
    if (status == RBX_OK)
        status = rbx_migrate_old_sessions(engine, err);
    if (status != RBX_OK)
        return status;
    engine->storage_open = true;
    /* What a killed runbox left half done (a session on its way in or out,
     * scratch space) goes first: two directory listings, usually empty. */
    rbx_storage_sweep(engine);
    return RBX_OK;
}

void rbx_engine_recover(rbx_engine *engine)
{
    (void)rbx_cgroup_probe(); /* probes once per process, and sweeps then */
    rbx_storage_sweep(engine);
}

bool rbx_engine_start_pool(rbx_engine *engine, char *why, size_t why_size)
{
    if (engine->config.pool_off) {
        snprintf(why, why_size, "turned off (--pool 0)");
        return false;
    }
    if (!engine->pool)
        engine->pool = rbx_pool_start(engine, why, why_size);
    /* A process that runs many executions: their cgroups and scratch
     * spaces are reused (about one per execution in flight and per
     * prepared sandbox), and given back when idle by the pool's manager
     * (rbx_pool_start). */
    if (engine->pool) {
        rbx_cgroup_keep_spares(engine->config.pool_max + 4);
        rbx_scratch_keep_spares(engine, engine->config.pool_max + 4);
    }
    return engine->pool != NULL;
}

void rbx_engine_pool_stats(rbx_engine *engine, rbx_pool_stats *stats)
{
    rbx_pool_stats_get(engine->pool, stats);
    rbx_cgroup_spare_counts(&stats->cgroups_kept, &stats->cgroups_reused);
    rbx_scratch_spare_counts(engine, &stats->scratch_kept, &stats->scratch_reused);
}

void rbx_engine_fingerprint(const rbx_engine *engine, char out[17])
{
    const rbx_config *c = &engine->config;
    /* What the files and the image store held when this engine read them:
     * a policy edited since, or a default image built or imported since,
     * is another configuration than the same names were before. */
    const rbx_root *root = engine->roots[0];
    char text[16384];
    snprintf(text, sizeof text,
             "%s|%zu|%.17g|%.17g|%zu|%d|%llu|%d|%llu|%u|%u|%u|%u|%.17g|%.17g|%s|%u|%d|%.17g|%zu|"
             "%d|%llu|%s|%s|%d|%d|%s|%s|%s|%s|%s|%016llx|%016llx|%s|%s",
             c->state_dir ? c->state_dir : "", c->max_code_bytes, c->default_timeout_s,
             c->max_timeout_s, c->output_cap_bytes, c->network_off,
             (unsigned long long)c->disk_cap_bytes, (int)c->storage,
             (unsigned long long)c->storage_bytes, c->memory_mb, c->max_memory_mb, c->pids_max,
             c->cpu_weight, c->cpus, c->max_cpus, c->policy_file ? c->policy_file : "",
             c->max_requirements, c->allow_requirement_urls, c->install_timeout_s,
             c->install_output_cap, c->install_network_host, (unsigned long long)c->envs_cap_bytes,
             c->egress_allow ? c->egress_allow : "", c->egress_deny ? c->egress_deny : "",
             c->egress_allowlist_only, c->egress_open, c->egress_resolver ? c->egress_resolver : "",
             c->egress_file ? c->egress_file : "", c->images_dir ? c->images_dir : "",
             c->image ? c->image : "", c->images_allowed ? c->images_allowed : "",
             (unsigned long long)rbx_policy_digest(engine->policy),
             (unsigned long long)(engine->egress ? engine->egress->file_digest : 0),
             root ? root->image : "", root ? root->digest : "");
    uint64_t hash = rbx_digest_add(RBX_DIGEST_START, text, strlen(text));
    snprintf(out, 17, "%016llx", (unsigned long long)hash);
}

const rbx_config *rbx_engine_config(const rbx_engine *engine)
{
    return &engine->config;
}

rbx_status rbx_storage_unmount(rbx_engine *engine, rbx_error *err)
{
    /* The prepared namespaces pinned for this state directory go too. */
    rbx_roots_unpin(engine);
    return rbx_sessions_unmount(engine, err);
}
