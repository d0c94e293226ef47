/* Stateful sessions: the engine's kernels (see kernels.h). The registry and
 * each kernel's life are here; a call on a kernel is in kernel_call.c. */
#include "kernels/kernels.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "egress/policy.h"
#include "engine/engine.h"
#include "execution/given.h"
#include "images/roots.h"
#include "kernels/call.h"
#include "kernels/hibernation.h"
#include "kernels/pressure.h"
#include "languages/runtime.h"
#include "runbox.h"
#include "sandbox/cgroup.h"
#include "sandbox/checkpoint.h"
#include "sandbox/kernel.h"
#include "sandbox/net.h"
#include "sandbox/sandbox.h"
#include "sessions/storage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How long an interpreter may take to start (site and its modules loaded). */
#define KERNEL_READY_S 60
#define REAP_EVERY_MS 5000
/* While memory is short: a tick a second, and a kernel used within the
 * last second is not chosen (its next call is likely on its way). */
#define PRESSURE_EVERY_MS 1000
#define PRESSURE_IDLE_MS 1000

struct rbx_kernels {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a kernel started or failed; the reaper's sleep */
    rbx_kernel *list;
    size_t count;
    pthread_t reaper;
    bool reaper_started, closing;
};

rbx_kernels *rbx_kernels_new(void)
{
    rbx_kernels *kernels = calloc(1, sizeof *kernels);
    if (kernels) {
        pthread_mutex_init(&kernels->lock, NULL);
        pthread_cond_init(&kernels->changed, NULL);
    }
    return kernels;
}

/* --- one kernel's life ---------------------------------------------------------------- */

/* What a lock file holds once its kernel went against the session's will
 * (it died, was killed at an interrupt's end, reaped, evicted, or its
 * runbox stopped): a tombstone, so that the session's next call says its
 * state is gone, whichever runbox process makes it. */
#define LOST_RECORD "{\"lost\":true}"
/* (one that knows why: {"lost":true,"why":"..."}) */
#define LOST_MARK "\"lost\":true"
/* ... or once it hibernated (hibernation.h): {"hibernated":true, ...}. */
#define HIBERNATED_MARK "\"hibernated\":true"
/* rbx_kernels_describe looks at a lock file by taking a shared lock for an
 * instant (any runbox process listing sessions does): a claim that meets
 * one tries again for this long before it takes the lock for an owner's. */
#define CLAIM_WAIT_MS 250

static void lock_file_name(char *out, size_t size, const rbx_runtime *runtime)
{
    snprintf(out, size, "kernel-%s.lock", runtime->name);
}

/* Says to other runbox processes that this one holds the session's kernel
 * of this language: the lock, its pid, when it started and where its
 * memory is counted. */
static rbx_status claim(rbx_engine *engine, rbx_kernel *k, rbx_error *err)
{
    char rel[RBX_SESSION_ID_MAX + 64], name[48];
    lock_file_name(name, sizeof name, k->runtime);
    snprintf(rel, sizeof rel, "%s/%s", k->session_id, name);
    k->lock_fd = openat(engine->sessions_fd, rel, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (k->lock_fd < 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot claim the kernel of session %s: %s",
                        k->session_id, strerror(errno));
    int64_t give_up = rbx_now_ms() + CLAIM_WAIT_MS;
    int locked;
    while ((locked = flock(k->lock_fd, LOCK_EX | LOCK_NB)) != 0 && errno == EWOULDBLOCK &&
           rbx_now_ms() < give_up)
        usleep(2000);
    if (locked != 0) {
        char owner[64] = "";
        ssize_t n = pread(k->lock_fd, owner, sizeof owner - 1, 0);
        json_t *meta = n > 0 ? json_loadb(owner, (size_t)n, 0, NULL) : NULL;
        int pid = (int)json_integer_value(json_object_get(meta, "pid"));
        json_decref(meta);
        close(k->lock_fd);
        k->lock_fd = -1;
        char who[32] = "";
        if (pid > 0)
            snprintf(who, sizeof who, " (pid %d)", pid);
        return rbx_fail(err, RBX_EBUSY,
                        "the %s kernel of session %s is held by another runbox process%s: send "
                        "its stateful calls there",
                        k->runtime->name, k->session_id, who);
    }
    char previous[1024] = "";
    ssize_t n = pread(k->lock_fd, previous, sizeof previous - 1, 0);
    previous[n > 0 ? n : 0] = 0;
    k->was_lost = strstr(previous, LOST_MARK) != NULL;
    k->was_hibernated = strstr(previous, HIBERNATED_MARK) != NULL;
    if (k->was_lost) {
        json_t *meta = json_loads(previous, 0, NULL);
        const char *why = json_string_value(json_object_get(meta, "why"));
        snprintf(k->restart_why, sizeof k->restart_why, "%s",
                 why ? why
                     : "the session's last kernel was stopped before this call (it exited, was "
                       "interrupted at a timeout, idled out, was evicted, or its runbox stopped)");
        json_decref(meta);
    }
    return RBX_OK;
}

static void record_owner(rbx_kernel *k)
{
    char memory[4200] = "";
    if (k->box.sandbox.cgroup)
        rbx_cgroup_memory_file(k->box.sandbox.cgroup, memory, sizeof memory);
    /* Without a cgroup, the driver's resident memory stands in (program). */
    json_t *meta =
        json_pack("{s:i, s:I, s:s, s:i}", "pid", (int)getpid(), "started", (json_int_t)time(NULL),
                  "memory", memory, "program", (int)k->box.program);
    char *text = meta ? json_dumps(meta, JSON_COMPACT) : NULL;
    json_decref(meta);
    if (text && ftruncate(k->lock_fd, 0) == 0)
        (void)!pwrite(k->lock_fd, text, strlen(text), 0);
    free(text);
}

/* The sandbox a kernel runs in: like a one-off execution's, with the
 * session's files as its home, its own scratch /tmp, the requirements'
 * environment, and the driver as its program. */
static rbx_status prepare(rbx_engine *engine, rbx_kernel *k, const rbx_kernel_call *call,
                          rbx_error *err)
{
    const rbx_runtime *runtime = k->runtime;
    /* A kernel that wakes has its own scratch space back already. */
    rbx_status status = k->checkpoint ? RBX_OK : rbx_scratch_make(engine, false, &k->scratch, err);
    if (status != RBX_OK)
        return status;
    k->envp = rbx_execution_env(NULL, call->session, "MPLBACKEND=Agg");
    if (!k->envp)
        return rbx_fail(err, RBX_ESYSTEM, "out of memory");
    if (k->network &&
        (status = rbx_egress_plan_make(&k->egress, engine->egress, call->request, err)) != RBX_OK)
        return status;
    snprintf(k->work_path, sizeof k->work_path, "%s", call->session->work_path);
    k->spec = (rbx_sandbox_spec){
        .interpreter = runtime->interpreter,
        .envp = k->envp,
        .root = rbx_root_plan_of(call->root),
        .root_request = {.session_path = k->work_path,
                         .tmp_path = k->scratch.made ? k->scratch.tmp_path : NULL,
                         .become_root = engine->is_root,
                         .nameserver = k->network},
        .network = k->network ? RBX_NET_OUTSIDE : RBX_NET_LOOPBACK,
        .egress = k->network ? &k->egress : NULL,
        .limits = k->limits,
        .file_size_max = engine->config.disk_cap_bytes,
        .is_root = engine->is_root,
        .stdin_is_code_fd = runtime->kernel_greeting,
        .template_ns = -1,
    };
    if (call->env) {
        rbx_runtime_env_bind(runtime, call->env->path, k->env_dir, sizeof k->env_dir,
                             &k->spec.root_request, &k->spec.interpreter);
        /* The kernel holds the environment as long as it lives (the
         * same open lock: released when its last descriptor closes). */
        k->env_use_fd = fcntl(call->env->use_fd, F_DUPFD_CLOEXEC, 3);
        snprintf(k->env_key, sizeof k->env_key, "%s", call->env->key);
    }
    size_t n = 0;
    for (; n < sizeof runtime->kernel_argv / sizeof runtime->kernel_argv[0] &&
           runtime->kernel_argv[n];
         n++)
        k->argv[n] = runtime->kernel_argv[n];
    k->argv[0] = k->spec.interpreter;
    if (!runtime->kernel_greeting)
        k->argv[n++] = runtime->kernel_driver;
    k->argv[n] = NULL;
    k->spec.argv = (char *const *)k->argv;
    return RBX_OK;
}

/* The kernel's own thread: starts the sandbox (which then dies with this
 * thread, not with the call's), says how that went, and stops it when
 * told (its wake pipe closes). */
static void *keeper(void *arg)
{
    rbx_kernel *k = arg;
    rbx_kernels *kernels = k->engine->kernels;
    rbx_error err = {0};
    k->spec.template_ns = rbx_root_template_ns(k->root);
    const rbx_runtime *runtime = k->runtime;
    rbx_status status = RBX_ESYSTEM;
    if (k->checkpoint) {
        int64_t began = rbx_now_ms();
        status = rbx_kernel_box_restore(&k->spec, k->checkpoint, rbx_kernel_criu(k->engine), k->checkpoint_dir,
                                        &k->box, &err);
        k->restore_ms = rbx_now_ms() - began;
        k->just_restored = status == RBX_OK;
        /* Woken or not, the checkpoint has served: its state lives again,
         * or is gone (the call says kernel_restarted). */
        if (status != RBX_OK)
            fprintf(stderr, "runbox: the %s kernel of session %s could not be restored: %s\n",
                    runtime->name, k->session_id, err.message);
        k->was_lost |= status != RBX_OK;
        if (status != RBX_OK) {
            k->calls = 0; /* a new kernel's first call comes */
            snprintf(k->restart_why, sizeof k->restart_why,
                     "the kernel hibernated, but its restore failed: %.240s", err.message);
        }
        rbx_hibernation_forget(k->engine, k->session_id, runtime->name);
    }
    if (status != RBX_OK)
        status =
            rbx_kernel_box_start(&k->spec, runtime->kernel_greeting ? runtime->kernel_driver : NULL,
                                 runtime->kernel_greeting ? (size_t)*runtime->kernel_driver_size : 0,
                                 KERNEL_READY_S, &k->box, &err);
    if (k->spec.template_ns >= 0)
        close(k->spec.template_ns);
    pthread_mutex_lock(&kernels->lock);
    k->start_status = status;
    k->start_err = err;
    pthread_cond_broadcast(&kernels->changed);
    pthread_mutex_unlock(&kernels->lock);
    if (status != RBX_OK)
        return NULL;
    char byte;
    while (read(k->wake[0], &byte, 1) < 0 && errno == EINTR)
        ;
    rbx_kernel_box_stop(&k->box);
    return NULL;
}

/* Stops a kernel that is out of the registry, and frees it. */
static void destroy(rbx_engine *engine, rbx_kernel *k)
{
    if (k->keeper_started) {
        close(k->wake[1]);
        pthread_join(k->keeper, NULL);
        close(k->wake[0]);
    }
    rbx_scratch_remove(engine, &k->scratch);
    rbx_lock_release(k->lock_fd);
    /* a copy of the execution's: its lock is the execution's too */
    if (k->env_use_fd >= 0)
        close(k->env_use_fd);
    rbx_execution_env_free(k->envp);
    rbx_egress_plan_free(&k->egress); /* its sandbox is gone */
    free(k->egress_key);
    free(k->checkpoint);
    free(k);
}

/* Stops each kernel of a chain taken out of the registry (by next). */
static void destroy_chain(rbx_engine *engine, rbx_kernel *gone)
{
    while (gone) {
        rbx_kernel *next = gone->next;
        destroy(engine, gone);
        gone = next;
    }
}

/* A request's egress_allow as one string, to tell whether a kernel was
 * started with the same narrowing (NULL: none asked). */
static char *egress_key(const rbx_request *request)
{
    if (!request->egress_allow)
        return NULL;
    size_t len = 2;
    for (size_t i = 0; i < request->egress_allow_count; i++)
        len += strlen(request->egress_allow[i]) + 1;
    char *key = malloc(len);
    if (!key)
        return NULL;
    size_t n = 0;
    key[n++] = '=';
    for (size_t i = 0; i < request->egress_allow_count; i++) {
        size_t part = strlen(request->egress_allow[i]);
        memcpy(key + n, request->egress_allow[i], part);
        n += part;
        key[n++] = '\n';
    }
    key[n] = 0;
    return key;
}

static rbx_kernel *kernel_new(rbx_engine *engine, const rbx_kernel_call *call)
{
    rbx_kernel *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->engine = engine;
    k->runtime = call->runtime;
    k->root = call->root;
    snprintf(k->session_id, sizeof k->session_id, "%s", call->session->id);
    k->lock_fd = k->env_use_fd = -1;
    k->wake[0] = k->wake[1] = -1;
    k->network = rbx_execution_wants_network(engine, call->request);
    k->egress_key = egress_key(call->request);
    k->start_status = -1; /* starting */
    k->limits = rbx_execution_limits(engine, call->request);
    return k;
}

/* Starts k (in the registry, marked busy, unlocked). */
static rbx_status start(rbx_engine *engine, rbx_kernel *k, const rbx_kernel_call *call,
                        rbx_error *err)
{
    rbx_kernels *kernels = engine->kernels;
    rbx_status status = claim(engine, k, err);
    if (status == RBX_OK && k->was_hibernated) {
        char why[300];
        rbx_kernel_wake_prepare(engine, k, why, sizeof why);
        if (why[0]) {
            fprintf(stderr, "runbox: the %s kernel of session %s starts afresh: %s\n",
                    k->runtime->name, k->session_id, why);
            k->was_lost = true;
            snprintf(k->restart_why, sizeof k->restart_why, "the kernel hibernated, but %.260s", why);
        }
    }
    if (status == RBX_OK)
        status = prepare(engine, k, call, err);
    if (status == RBX_OK && pipe2(k->wake, O_CLOEXEC) != 0)
        status = rbx_fail(err, RBX_ESYSTEM, "cannot create a pipe: %s", strerror(errno));
    if (status == RBX_OK && pthread_create(&k->keeper, NULL, keeper, k) != 0)
        status = rbx_fail(err, RBX_ESYSTEM, "cannot start the kernel's thread");
    if (status != RBX_OK)
        return status;
    k->keeper_started = true;
    pthread_mutex_lock(&kernels->lock);
    while (k->start_status == (rbx_status)-1)
        pthread_cond_wait(&kernels->changed, &kernels->lock);
    pthread_mutex_unlock(&kernels->lock);
    if (k->start_status != RBX_OK) {
        *err = k->start_err;
        return k->start_status;
    }
    record_owner(k);
    return RBX_OK;
}

/* --- the registry ---------------------------------------------------------------------- */

static size_t max_kernels(const rbx_engine *engine)
{
    if (engine->config.max_kernels)
        return engine->config.max_kernels;
    /* Half the host's memory, at each kernel's default limit. */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t memory = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 4ull << 30;
    uint64_t each = (uint64_t)engine->config.memory_mb << 20;
    size_t n = (size_t)(memory / 2 / (each ? each : 1));
    return n < 2 ? 2 : n > 512 ? 512 : n;
}

static void unlink_kernel(rbx_kernels *kernels, rbx_kernel *k)
{
    for (rbx_kernel **at = &kernels->list; *at; at = &(*at)->next)
        if (*at == k) {
            *at = k->next;
            kernels->count--;
            return;
        }
}

/* Leaves the kernel's tombstone in its lock file (see LOST_RECORD). */
static void bury(const rbx_kernel *k)
{
    if (k->lock_fd >= 0 && ftruncate(k->lock_fd, 0) == 0)
        (void)!pwrite(k->lock_fd, LOST_RECORD, strlen(LOST_RECORD), 0);
}

/* The session's lock, taken at once or not at all: a kernel is
 * checkpointed only while no call can reach it (a call that comes waits
 * for the lock, then wakes the kernel). -1 when the session is busy. */
static int session_lock_now(rbx_engine *engine, const char *session_id)
{
    char rel[RBX_SESSION_ID_MAX + 8];
    snprintf(rel, sizeof rel, "%s/lock", session_id);
    int fd = openat(engine->sessions_fd, rel, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* The idle kernel used least recently after `after` (NULL: the least
 * recently used of all), ties broken by address so that each is met
 * once; NULL when none is left. Called with the registry locked. */
static rbx_kernel *idle_after(const rbx_kernels *kernels, const rbx_kernel *after)
{
    rbx_kernel *next = NULL;
    for (rbx_kernel *v = kernels->list; v; v = v->next) {
        if (v->busy)
            continue;
        if (after && (v->last_used_ms < after->last_used_ms ||
                      (v->last_used_ms == after->last_used_ms && (uintptr_t)v <= (uintptr_t)after)))
            continue;
        if (!next || v->last_used_ms < next->last_used_ms ||
            (v->last_used_ms == next->last_used_ms && (uintptr_t)v < (uintptr_t)next))
            next = v;
    }
    return next;
}

/* Checkpoints k (out of the registry, its session locked), else leaves
 * its tombstone; stops it either way. True when it hibernated. */
static bool hibernate_or_bury(rbx_engine *engine, rbx_kernel *k)
{
    uint64_t bytes = 0;
    rbx_error err = {0};
    int64_t began = rbx_now_ms();
    rbx_status status = rbx_kernel_hibernate(engine, k, &bytes, &err);
    if (status == RBX_OK) {
        char record[200];
        snprintf(record, sizeof record, "{%s,\"bytes\":%llu,\"at\":%lld,\"ms\":%lld}",
                 HIBERNATED_MARK, (unsigned long long)bytes, (long long)time(NULL),
                 (long long)(rbx_now_ms() - began));
        if (ftruncate(k->lock_fd, 0) == 0)
            (void)!pwrite(k->lock_fd, record, strlen(record), 0);
    } else {
        if (status != RBX_EINVAL)
            fprintf(stderr, "runbox: the %s kernel of session %s is stopped: %s\n",
                    k->runtime->name, k->session_id, err.message);
        bury(k);
    }
    destroy(engine, k);
    return status == RBX_OK;
}

/* Forgets the tombstones of the session's kernels (of one language): a
 * restart that was asked for is no surprise to the next call. A lock file
 * another process holds is its live kernel's, and left alone. */
static void forget_lost(rbx_engine *engine, const char *session_id, const char *language)
{
    for (size_t i = 0; i < rbx_runtime_count(); i++) {
        const rbx_runtime *runtime = rbx_runtime_find(rbx_runtime_name(i));
        if (language && strcmp(runtime->name, language))
            continue;
        char rel[RBX_SESSION_ID_MAX + 64], name[48];
        lock_file_name(name, sizeof name, runtime);
        snprintf(rel, sizeof rel, "%s/%s", session_id, name);
        int fd = openat(engine->sessions_fd, rel, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            (void)!ftruncate(fd, 0);
        rbx_lock_release(fd);
    }
}

static void *reaper(void *arg);

static void start_reaper(rbx_engine *engine)
{
    rbx_kernels *kernels = engine->kernels;
    if (!kernels->reaper_started && pthread_create(&kernels->reaper, NULL, reaper, engine) == 0)
        kernels->reaper_started = true;
}

/* Whether k can serve this call (else it is started afresh): alive, with
 * the call's requirements and network. Other limits (memory, CPU) are set
 * on its cgroup as the call asks, where the kernel allows. */
static bool fits(rbx_engine *engine, rbx_kernel *k, const rbx_kernel_call *call)
{
    const char *key = call->env ? call->env->key : "";
    if (k->dead || !rbx_kernel_box_alive(&k->box) || strcmp(k->env_key, key) ||
        k->root != call->root || k->network != rbx_execution_wants_network(engine, call->request))
        return false;
    char *narrowing = egress_key(call->request);
    bool same = (!narrowing && !k->egress_key) ||
                (narrowing && k->egress_key && !strcmp(narrowing, k->egress_key));
    free(narrowing);
    if (!same)
        return false;
    rbx_cgroup_limits wanted = rbx_execution_limits(engine, call->request);
    /* Field by field: the struct's padding is whatever the stack held. */
    if (wanted.memory_bytes == k->limits.memory_bytes && wanted.pids == k->limits.pids &&
        wanted.cpu_weight == k->limits.cpu_weight &&
        wanted.cpu_quota_us == k->limits.cpu_quota_us &&
        wanted.reserved_bytes == k->limits.reserved_bytes)
        return true;
    char why[256];
    if (k->box.sandbox.cgroup && rbx_cgroup_update(k->box.sandbox.cgroup, &wanted, why, sizeof why))
        return false;
    k->limits = wanted;
    return true;
}

/* The session's kernel for the call, started if need be, marked busy. */
static rbx_status take(rbx_engine *engine, const rbx_kernel_call *call, rbx_kernel **out,
                       bool *restarted, rbx_error *err)
{
    rbx_kernels *kernels = engine->kernels;
    pthread_mutex_lock(&kernels->lock);
    rbx_kernel *k = kernels->list;
    while (k && (k->runtime != call->runtime || strcmp(k->session_id, call->session->id)))
        k = k->next;
    if (k && !fits(engine, k, call)) {
        if (k->dead || !rbx_kernel_box_alive(&k->box))
            bury(k);
        unlink_kernel(kernels, k);
        pthread_mutex_unlock(&kernels->lock);
        destroy(engine, k);
        *restarted = true;
        pthread_mutex_lock(&kernels->lock);
        k = NULL;
    }
    if (k) {
        k->busy = true;
        pthread_mutex_unlock(&kernels->lock);
        *out = k;
        return RBX_OK;
    }
    rbx_kernel *victim = NULL;
    int victim_lock = -1;
    if (kernels->count >= max_kernels(engine)) {
        victim = idle_after(kernels, NULL);
        if (!victim) {
            size_t count = kernels->count;
            pthread_mutex_unlock(&kernels->lock);
            return rbx_fail(err, RBX_EBUSY,
                            "each of the %zu kernels this runbox may keep is running a call: "
                            "try again when one is done, or raise --max-kernels",
                            count);
        }
        /* The least recently used idle kernel whose session is not in use
         * makes room: hibernated where it can be, else stopped. A session
         * in use has a call on its way to its kernel, which would find it
         * stopped and its state lost; so the next is tried, and the least
         * recently used is stopped only when every idle kernel's session
         * is in use. */
        for (rbx_kernel *v = victim; v && victim_lock < 0; v = idle_after(kernels, v))
            if ((victim_lock = session_lock_now(engine, v->session_id)) >= 0)
                victim = v;
        if (victim_lock >= 0 && !rbx_hibernation_known_enabled(engine)) {
            rbx_lock_release(victim_lock);
            victim_lock = -1;
        }
        if (victim_lock < 0)
            bury(victim);
        unlink_kernel(kernels, victim);
    }
    k = kernel_new(engine, call);
    if (k) {
        k->busy = true;
        k->next = kernels->list;
        kernels->list = k;
        kernels->count++;
        start_reaper(engine);
    }
    pthread_mutex_unlock(&kernels->lock);
    if (victim && victim_lock >= 0) {
        hibernate_or_bury(engine, victim);
        rbx_lock_release(victim_lock);
    } else if (victim) {
        destroy(engine, victim);
    }
    if (!k)
        return rbx_fail(err, RBX_ESYSTEM, "out of memory");
    rbx_status status = start(engine, k, call, err);
    if (status != RBX_OK) {
        pthread_mutex_lock(&kernels->lock);
        unlink_kernel(kernels, k);
        pthread_mutex_unlock(&kernels->lock);
        destroy(engine, k);
        return status;
    }
    *restarted |= k->was_lost;
    *out = k;
    return RBX_OK;
}

/* The call is over: the kernel is idle again, or gone if it had to go. */
static void give_back(rbx_engine *engine, rbx_kernel *k, bool lost)
{
    rbx_kernels *kernels = engine->kernels;
    pthread_mutex_lock(&kernels->lock);
    k->busy = false;
    k->last_used_ms = rbx_now_ms();
    if (lost)
        unlink_kernel(kernels, k);
    pthread_mutex_unlock(&kernels->lock);
    if (lost) {
        destroy(engine, k);
        return;
    }
    (void)futimens(k->lock_fd, NULL); /* its idle time, for other processes */
}

rbx_status rbx_kernel_run(rbx_engine *engine, const rbx_kernel_call *call, rbx_result *result,
                          rbx_error *err)
{
    if (!call->runtime->kernel_driver)
        return rbx_fail(err, RBX_EINVAL, "%s has no stateful mode", call->runtime->name);
    rbx_kernel *k = NULL;
    bool restarted = false;
    rbx_status status = take(engine, call, &k, &restarted, err);
    if (status != RBX_OK)
        return status;
    bool lost = false;
    if (k->just_restored) {
        result->kernel_restored = true;
        result->restore_ms = k->restore_ms;
        k->just_restored = false;
    }
    status = rbx_kernel_call_run(engine, k, call, result, &lost, err);
    result->kernel_restarted = restarted || lost;
    if (restarted)
        snprintf(result->restart_reason, sizeof result->restart_reason, "%s", k->restart_why);
    else if (lost)
        snprintf(result->restart_reason, sizeof result->restart_reason,
                 "the kernel was stopped during this call (it exited, ran out of memory, or was "
                 "interrupted at its timeout)");
    give_back(engine, k, lost);
    return status;
}

/* --- stopping kernels ------------------------------------------------------------------ */

size_t rbx_kernels_stop_session(rbx_engine *engine, const char *session_id, const char *language)
{
    rbx_kernels *kernels = engine->kernels;
    if (!kernels)
        return 0;
    rbx_kernel *gone = NULL;
    size_t n = 0;
    pthread_mutex_lock(&kernels->lock);
    for (rbx_kernel **at = &kernels->list; *at;) {
        rbx_kernel *k = *at;
        if (!strcmp(k->session_id, session_id) &&
            (!language || !strcmp(k->runtime->name, language)) && !k->busy) {
            *at = k->next;
            kernels->count--;
            k->next = gone;
            gone = k;
            n++;
        } else {
            at = &k->next;
        }
    }
    pthread_mutex_unlock(&kernels->lock);
    destroy_chain(engine, gone);
    forget_lost(engine, session_id, language);
    for (size_t i = 0; i < rbx_runtime_count(); i++)
        if (!language || !strcmp(rbx_runtime_name(i), language))
            rbx_hibernation_forget(engine, session_id, rbx_runtime_name(i));
    return n;
}

void rbx_session_hibernate(rbx_engine *engine, const char *id, size_t *hibernated)
{
    *hibernated = 0;
    rbx_kernels *kernels = engine->kernels;
    if (!kernels || !rbx_session_id_valid(id))
        return;
    bool can = rbx_hibernation_enabled(engine);
    /* A call cancelled just before (a pause) may take a moment to let go. */
    int lock = can ? session_lock_now(engine, id) : -1;
    for (int64_t until = rbx_now_ms() + 10000; can && lock < 0 && rbx_now_ms() < until;) {
        usleep(20000);
        lock = session_lock_now(engine, id);
    }
    rbx_kernel *sleepers = NULL;
    pthread_mutex_lock(&kernels->lock);
    for (rbx_kernel **at = &kernels->list; *at;) {
        rbx_kernel *k = *at;
        if (strcmp(k->session_id, id) || k->busy || k->start_status != RBX_OK) {
            at = &k->next;
            continue;
        }
        *at = k->next;
        kernels->count--;
        k->next = sleepers;
        sleepers = k;
    }
    pthread_mutex_unlock(&kernels->lock);
    while (sleepers) {
        rbx_kernel *next = sleepers->next;
        if (lock >= 0 && rbx_kernel_box_alive(&sleepers->box)) {
            *hibernated += hibernate_or_bury(engine, sleepers);
        } else {
            bury(sleepers);
            destroy(engine, sleepers);
        }
        sleepers = next;
    }
    if (lock >= 0)
        rbx_lock_release(lock);
}

/* The least recently used kernel idle for PRESSURE_IDLE_MS or more (NULL:
 * none), which hibernates while memory is short. */
static rbx_kernel *least_recently_used(rbx_kernels *kernels, int64_t now)
{
    rbx_kernel *lru = NULL;
    char why[256];
    for (rbx_kernel *k = kernels->list; k; k = k->next)
        if (!k->busy && k->start_status == RBX_OK && now - k->last_used_ms >= PRESSURE_IDLE_MS &&
            (!lru || k->last_used_ms < lru->last_used_ms) &&
            rbx_checkpoint_possible(&k->box.sandbox, &k->spec, why, sizeof why))
            lru = k;
    return lru;
}

/* Reaps idle kernels past the idle time (hibernates them where it can),
 * and kernels that died meanwhile; while memory is short, hibernates the
 * least recently used idle kernel too, one per tick. */
static void *reaper(void *arg)
{
    rbx_engine *engine = arg;
    rbx_kernels *kernels = engine->kernels;
    (void)rbx_hibernation_enabled(engine); /* criu found now, not on a call's way */
    uint64_t floor = rbx_memory_floor(engine);
    bool was_short = false;
    pthread_mutex_lock(&kernels->lock);
    while (!kernels->closing) {
        /* Every 5 s, or twice per idle time where that is shorter: a
         * kernel outlives its idle time by at most half of it. Every
         * second while memory is short. */
        int64_t idle_ms = (int64_t)(engine->config.kernel_idle_s * 1000);
        int64_t every_ms = idle_ms / 2 < REAP_EVERY_MS ? idle_ms / 2 : REAP_EVERY_MS;
        every_ms = was_short && every_ms > PRESSURE_EVERY_MS ? PRESSURE_EVERY_MS : every_ms;
        every_ms = every_ms < 100 ? 100 : every_ms;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += every_ms / 1000;
        until.tv_nsec += (every_ms % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&kernels->changed, &kernels->lock, &until);
        int64_t now = rbx_now_ms();
        rbx_kernel *gone = NULL, *sleepers = NULL;
        int locks[64];
        size_t locked = 0;
        bool hibernate = false;
        was_short = kernels->list && rbx_memory_short(floor);
        for (rbx_kernel *k = kernels->list; k && !hibernate; k = k->next)
            hibernate = !k->busy && k->start_status == RBX_OK &&
                        (now - k->last_used_ms > idle_ms ||
                         (was_short && now - k->last_used_ms >= PRESSURE_IDLE_MS));
        if (hibernate) {
            /* Found once (criu's check) without the registry's lock. */
            pthread_mutex_unlock(&kernels->lock);
            hibernate = rbx_hibernation_enabled(engine);
            pthread_mutex_lock(&kernels->lock);
        }
        /* Only a kernel that can be checkpointed is chosen for memory: one
         * whose state would surely be lost stays until its idle time is up
         * (one whose checkpoint fails is stopped, as under --max-kernels). */
        rbx_kernel *shed = was_short && hibernate ? least_recently_used(kernels, now) : NULL;
        /* Ticks come every second only while there is one to shed: memory
         * short where nothing can hibernate leaves the reaper at rest. */
        was_short = shed != NULL;
        for (rbx_kernel **at = &kernels->list; *at;) {
            rbx_kernel *k = *at;
            bool dead = !k->busy && k->start_status == RBX_OK && !rbx_kernel_box_alive(&k->box);
            bool idle = !k->busy && k->start_status == RBX_OK &&
                        (now - k->last_used_ms > idle_ms || k == shed);
            int lock = -1;
            if (!dead && idle && hibernate && locked < sizeof locks / sizeof locks[0] &&
                (lock = session_lock_now(engine, k->session_id)) < 0) {
                at = &k->next; /* a call is on its way: not now */
                continue;
            }
            if (dead || idle) {
                *at = k->next;
                kernels->count--;
                if (lock >= 0) {
                    locks[locked++] = lock;
                    k->next = sleepers;
                    sleepers = k;
                } else {
                    bury(k);
                    k->next = gone;
                    gone = k;
                }
            } else {
                at = &k->next;
            }
        }
        pthread_mutex_unlock(&kernels->lock);
        destroy_chain(engine, gone);
        while (sleepers) {
            rbx_kernel *next = sleepers->next;
            hibernate_or_bury(engine, sleepers);
            sleepers = next;
        }
        for (size_t i = 0; i < locked; i++)
            rbx_lock_release(locks[i]);
        pthread_mutex_lock(&kernels->lock);
    }
    pthread_mutex_unlock(&kernels->lock);
    return NULL;
}

void rbx_kernels_free(rbx_engine *engine)
{
    rbx_kernels *kernels = engine->kernels;
    if (!kernels)
        return;
    pthread_mutex_lock(&kernels->lock);
    kernels->closing = true;
    pthread_cond_broadcast(&kernels->changed);
    rbx_kernel *list = kernels->list;
    kernels->list = NULL;
    kernels->count = 0;
    pthread_mutex_unlock(&kernels->lock);
    if (kernels->reaper_started)
        pthread_join(kernels->reaper, NULL);
    /* runbox stops, and its kernels with it: their sessions did not ask.
     * Each that can be hibernates (the next runbox on the state directory
     * wakes it); the others leave their tombstone. */
    bool hibernate = list && rbx_hibernation_enabled(engine);
    while (list) {
        rbx_kernel *next = list->next;
        int lock = hibernate && list->start_status == RBX_OK && rbx_kernel_box_alive(&list->box)
                       ? session_lock_now(engine, list->session_id)
                       : -1;
        if (lock >= 0) {
            hibernate_or_bury(engine, list);
            rbx_lock_release(lock);
        } else {
            bury(list);
            destroy(engine, list);
        }
        list = next;
    }
    pthread_mutex_destroy(&kernels->lock);
    pthread_cond_destroy(&kernels->changed);
    free(kernels);
    engine->kernels = NULL;
}

size_t rbx_kernel_count(rbx_engine *engine)
{
    rbx_kernels *kernels = engine->kernels;
    if (!kernels)
        return 0;
    pthread_mutex_lock(&kernels->lock);
    size_t n = kernels->count;
    pthread_mutex_unlock(&kernels->lock);
    return n;
}

/* --- what other processes see ------------------------------------------------------------ */

/* A process's resident memory, from /proc/PID/statm (0 when unknown). */
static uint64_t resident_bytes(int pid)
{
    char path[64], buf[128] = "";
    snprintf(path, sizeof path, "/proc/%d/statm", pid);
    int fd = pid > 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    unsigned long long size, resident;
    if (n <= 0 || sscanf(buf, "%llu %llu", &size, &resident) != 2)
        return 0;
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

bool rbx_kernel_hibernated_in(int session_dir, const char *language)
{
    const rbx_runtime *runtime = rbx_runtime_find(language);
    char name[48], text[1024];
    if (!runtime)
        return false;
    lock_file_name(name, sizeof name, runtime);
    int fd = rbx_open_regular(session_dir, name, O_RDONLY);
    if (fd < 0)
        return false;
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    /* Held: a kernel lives, whatever the file says yet. */
    bool hibernated = n > 0 && flock(fd, LOCK_SH | LOCK_NB) == 0;
    text[n > 0 ? n : 0] = 0;
    close(fd);
    return hibernated && strstr(text, HIBERNATED_MARK);
}

int rbx_kernel_mark_carried(int session_dir, const char *language, uint64_t bytes,
                            const char *lost_why)
{
    const rbx_runtime *runtime = rbx_runtime_find(language);
    char name[48];
    if (!runtime) {
        errno = EINVAL;
        return -1;
    }
    lock_file_name(name, sizeof name, runtime);
    json_t *record = lost_why ? json_pack("{s:b, s:s}", "lost", 1, "why", lost_why)
                              : json_pack("{s:b, s:I, s:I, s:i, s:b}", "hibernated", 1, "bytes",
                                          (json_int_t)bytes, "at", (json_int_t)time(NULL),
                                          "ms", 0, "imported", 1);
    char *text = record ? json_dumps(record, JSON_COMPACT) : NULL;
    json_decref(record);
    int fd = text ? openat(session_dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                           0600)
                  : -1;
    int rc = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -1;
    if (fd >= 0)
        close(fd);
    free(text);
    return rc;
}

void rbx_kernels_describe(int session_dirfd, bool session_busy, rbx_session_info *info)
{
    for (size_t i = 0; i < rbx_runtime_count() && info->kernel_count < RBX_SESSION_KERNELS_MAX;
         i++) {
        const rbx_runtime *runtime = rbx_runtime_find(rbx_runtime_name(i));
        char name[48];
        lock_file_name(name, sizeof name, runtime);
        int fd = rbx_open_regular(session_dirfd, name, O_RDONLY);
        if (fd < 0)
            continue;
        struct stat st;
        char text[4400];
        ssize_t n = pread(fd, text, sizeof text - 1, 0);
        bool held = flock(fd, LOCK_SH | LOCK_NB) != 0;
        if (!held && n > 0 && info->kernel_count < RBX_SESSION_KERNELS_MAX) {
            text[n] = 0;
            json_t *meta = strstr(text, HIBERNATED_MARK) ? json_loadb(text, (size_t)n, 0, NULL)
                                                         : NULL;
            if (meta) {
                rbx_kernel_info *k = &info->kernels[info->kernel_count++];
                snprintf(k->language, sizeof k->language, "%s", runtime->name);
                k->hibernated = true;
                k->checkpoint_bytes = (uint64_t)json_integer_value(json_object_get(meta, "bytes"));
                k->checkpoint_ms = json_integer_value(json_object_get(meta, "ms"));
                k->idle_s = (int64_t)time(NULL) - json_integer_value(json_object_get(meta, "at"));
                json_decref(meta);
            }
        }
        if (held && n > 0 && fstat(fd, &st) == 0) {
            json_t *meta = json_loadb(text, (size_t)n, 0, NULL);
            rbx_kernel_info *k = &info->kernels[info->kernel_count++];
            snprintf(k->language, sizeof k->language, "%s", runtime->name);
            k->owner_pid = (int)json_integer_value(json_object_get(meta, "pid"));
            k->started_unix = json_integer_value(json_object_get(meta, "started"));
            k->idle_s = session_busy ? 0 : (int64_t)time(NULL) - st.st_mtim.tv_sec;
            const char *memory = json_string_value(json_object_get(meta, "memory"));
            int program = (int)json_integer_value(json_object_get(meta, "program"));
            k->memory_bytes = memory && memory[0] ? rbx_read_count(memory) : resident_bytes(program);
            k->busy = session_busy;
            json_decref(meta);
        }
        rbx_lock_release(fd);
    }
}

int rbx_kernels_foreign_owner(rbx_engine *engine, int session_dirfd)
{
    rbx_session_info info = {0};
    rbx_kernels_describe(session_dirfd, false, &info);
    for (size_t i = 0; i < info.kernel_count; i++)
        if (!info.kernels[i].hibernated && info.kernels[i].owner_pid != (int)getpid())
            return info.kernels[i].owner_pid;
    (void)engine;
    return 0;
}
