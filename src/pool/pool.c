/* The pool of prepared sandboxes (pool/pool.h): shelves of sandboxes per
 * language and network choice, their keepers, and the manager that sizes
 * them. */
#include "pool/pool.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "egress/policy.h"
#include "engine/engine.h"
#include "envs/deps.h"
#include "execution/given.h"
#include "images/roots.h"
#include "languages/runtime.h"
#include "runbox.h"
#include "sandbox/cgroup.h"
#include "sessions/scratch_spares.h"
#include "sandbox/net.h"
#include "sandbox/sandbox.h"
#include "sessions/session.h"
#include "sessions/storage.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_RUNTIMES 8
/* Shelves of sandboxes for dependency environments come and go with
 * demand; this many at most at once (a request for another starts cold). */
#define ENV_SHELVES 16
#define SHELVES (MAX_RUNTIMES * 2 + ENV_SHELVES)
/* How many sandboxes are made at once: each takes a core for a while. */
#define PREPARE_AT_ONCE 2
/* A prepared sandbox older than this is replaced: it saw the host's
 * addresses, the template and the policy of its time. */
#define MAX_AGE_MS 120000
#define MANAGER_TICK_MS 250
/* How long a spare cgroup or scratch space is kept unused: a burst's
 * executions reuse them within milliseconds. */
#define SPARE_IDLE_MS 2000
/* A prepared sandbox whose interpreter has not said it waits for its code
 * (runtime.c) after this long is a failure; the slices keep a stopping pool
 * from waiting on one still starting. */
#define INTERPRETER_START_MS 60000
#define INTERPRETER_POLL_MS 50

typedef enum { P_PREPARING, P_READY, P_TAKEN, P_DONE, P_RETIRED } pooled_state;

typedef struct entry {
    rbx_pooled pooled;  /* first: rbx_pooled * and entry * are the same address */
    struct entry *next; /* on its shelf, while ready */
    struct rbx_pool *pool;
    int shelf;
    pooled_state state;
    pthread_cond_t changed;
    int64_t ready_at;
    rbx_scratch scratch;
    rbx_egress_plan egress;
    char memory_file[4600];
    uint64_t memory;  /* what memory_file said when last read */
    int64_t memory_at; /* when, or 0: never */
    char **envp;
    const char *argv[8];
    char env_dir[4400]; /* the environment's part bound into the sandbox */
} entry;

typedef struct shelf {
    bool used; /* else a free slot */
    const rbx_runtime *runtime;
    bool network;
    /* A dependency environment's shelf: its sandboxes have it bound in, as
     * a cold start of a request with its requirements would. The shelf
     * holds the environment's use lock (a descriptor of the execution's
     * that found it), so it is not removed while sandboxes wait with it;
     * the shelf goes once it is idle and empty (floor 0). */
    bool has_env;
    char env_key[64];
    char env_path[4400];
    int env_use_fd;
    entry *ready; /* newest first */
    size_t ready_count, preparing;
    size_t target, floor;
    int64_t last_take, last_shrink;
    int64_t retry_at;  /* after a failure, not before this */
    unsigned failures; /* in a row */
} shelf;

struct rbx_pool {
    rbx_engine *engine;
    pthread_mutex_t lock;
    pthread_cond_t wake;   /* the manager's */
    pthread_cond_t gone;   /* a keeper ended */
    pthread_cond_t filled; /* a sandbox became ready */
    /* Tests only (RUNBOX_POOL_WAIT=ms): an execution finding its shelf
     * empty waits this long for one being made, so that a test suite runs
     * in prepared sandboxes throughout; 0 in production: never wait. */
    int64_t wait_ms;
    pthread_t manager;
    /* The keepers' threads: each keeper's ends with its sandbox, and the
     * next sandbox's keeper takes it (rbx_workers, runbox.h). */
    rbx_workers *workers;
    bool stopping;
    size_t keepers, serving, max;
    uint64_t memory_cap, idle_memory;
    uint64_t sandbox_memory; /* what one waiting sandbox held when last measured */
    shelf shelves[SHELVES];
    size_t shelf_count;
    uint64_t taken, missed, prepared, failed, retired;
    char last_failure[256];
};

/* What a waiting sandbox holds, read again at most once a second: the
 * manager adds up every waiting sandbox's each round, and rounds come with
 * every execution taken and every sandbox made, while a sandbox that waits
 * for its code barely changes. */
#define MEMORY_READ_MS 1000

static uint64_t memory_of(entry *e, int64_t now)
{
    if (e->memory_file[0] && (!e->memory_at || now - e->memory_at >= MEMORY_READ_MS)) {
        e->memory = rbx_read_count(e->memory_file);
        e->memory_at = now;
    }
    return e->memory;
}

/* The sandbox as a cold start of a one-off run would have it, with the
 * request's parts left for later: the environment is the fixed one (the
 * bootstrap takes the execution's own from fd 3), the home is scratch space
 * (a session's directory replaces it when taken), the limits are the
 * operator's defaults (the execution's are written to the cgroup). */
static rbx_status prepare(rbx_pool *pool, entry *e, rbx_error *err)
{
    rbx_engine *engine = pool->engine;
    const shelf *s = &pool->shelves[e->shelf];
    const rbx_runtime *runtime = s->runtime;
    rbx_request defaults = {.language = runtime->name, .network = s->network, .cancel_fd = -1};
    rbx_session nobody = {.one_off = true};
    rbx_status status = rbx_scratch_make(engine, true, &e->scratch, err);
    if (status != RBX_OK)
        return status;
    e->envp = rbx_execution_env(NULL, &nobody, NULL);
    int pair[2] = {-1, -1};
    if (!e->envp || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot prepare a sandbox: %s", strerror(errno));
    memcpy(e->argv, runtime->argv, sizeof runtime->argv);
    e->argv[0] = runtime->interpreter;
    rbx_sandbox_spec spec = {
        .interpreter = runtime->interpreter,
        .argv = (char *const *)e->argv,
        .envp = e->envp,
        /* the default image's: only its executions are pooled */
        .root = rbx_root_plan_of(engine->roots[0]),
        .root_request = {.session_path = e->scratch.made ? e->scratch.home_path : NULL,
                         .tmp_path = e->scratch.made ? e->scratch.tmp_path : NULL,
                         .become_root = engine->is_root,
                         .nameserver = s->network},
        .code_fd = pair[1],
        .network = s->network ? RBX_NET_OUTSIDE : RBX_NET_LOOPBACK,
        .limits = rbx_execution_limits(engine, &defaults),
        .file_size_max = engine->config.disk_cap_bytes,
        .is_root = engine->is_root,
        .template_ns = -1,
    };
    if (s->network &&
        (status = rbx_egress_plan_make(&e->egress, engine->egress, &defaults, err)) != RBX_OK) {
        close(pair[0]);
        close(pair[1]);
        return status;
    }
    if (s->network)
        spec.egress = &e->egress;
    if (s->has_env) {
        rbx_runtime_env_bind(runtime, s->env_path, e->env_dir, sizeof e->env_dir,
                             &spec.root_request, &spec.interpreter);
        e->argv[0] = spec.interpreter;
    }
    spec.template_ns = rbx_root_template_ns(engine->roots[0]);
    status = rbx_sandbox_start(&spec, &e->pooled.sandbox, err);
    if (spec.template_ns >= 0)
        close(spec.template_ns);
    close(pair[1]);
    if (status != RBX_OK) {
        close(pair[0]);
        return status;
    }
    e->pooled.code_fd = pair[0];
    if (e->pooled.sandbox.cgroup)
        (void)rbx_cgroup_memory_file(e->pooled.sandbox.cgroup, e->memory_file,
                                     sizeof e->memory_file);
    return RBX_OK;
}

static void unshelve(shelf *s, entry *e)
{
    for (entry **at = &s->ready; *at; at = &(*at)->next)
        if (*at == e) {
            *at = e->next;
            s->ready_count--;
            return;
        }
}

/* The bootstrap's "W" on the code socket: the interpreter is up and waits
 * for its code, so an execution taking the sandbox pays none of its start. */
static rbx_status await_interpreter(rbx_pool *pool, entry *e, rbx_error *err)
{
    int64_t deadline = rbx_now_ms() + INTERPRETER_START_MS;
    for (;;) {
        struct pollfd p = {.fd = e->pooled.code_fd, .events = POLLIN};
        int n = poll(&p, 1, INTERPRETER_POLL_MS);
        if (n > 0) {
            char said = 0;
            if (read(e->pooled.code_fd, &said, 1) == 1 && said == 'W')
                return RBX_OK;
            return rbx_fail(err, RBX_ESYSTEM,
                            "a prepared sandbox's interpreter ended before it waited for code");
        }
        if (n < 0 && errno != EINTR)
            return rbx_fail(err, RBX_ESYSTEM, "cannot wait for a prepared sandbox: %s",
                            strerror(errno));
        pthread_mutex_lock(&pool->lock);
        bool stopping = pool->stopping;
        pthread_mutex_unlock(&pool->lock);
        if (stopping)
            return RBX_OK; /* retired by the keeper, never shelved */
        if (rbx_now_ms() > deadline)
            return rbx_fail(err, RBX_ESYSTEM,
                            "a prepared sandbox's interpreter did not start within %d s",
                            INTERPRETER_START_MS / 1000);
    }
}

/* Its keeper: makes the sandbox, shelves it, waits until an execution is
 * done with it or the manager retires it, then destroys it. */
static void keeper(void *arg)
{
    entry *e = arg;
    rbx_pool *pool = e->pool;
    rbx_error err = {0};
    rbx_status status = prepare(pool, e, &err);
    bool started = status == RBX_OK;
    if (started)
        status = await_interpreter(pool, e, &err);
    pthread_mutex_lock(&pool->lock);
    shelf *s = &pool->shelves[e->shelf];
    s->preparing--;
    if (status == RBX_OK && pool->stopping) {
        e->state = P_RETIRED; /* made while the pool was stopping: never shelved */
    } else if (status == RBX_OK) {
        pool->prepared++;
        s->failures = 0;
        e->state = P_READY;
        e->ready_at = rbx_now_ms();
        e->next = s->ready;
        s->ready = e;
        s->ready_count++;
        pthread_cond_broadcast(&pool->filled);
        while (e->state == P_READY)
            pthread_cond_wait(&e->changed, &pool->lock);
        while (e->state == P_TAKEN)
            pthread_cond_wait(&e->changed, &pool->lock);
    } else {
        pool->failed++;
        s->failures++;
        int64_t backoff = 1000LL << (s->failures < 5 ? s->failures : 5);
        s->retry_at = rbx_now_ms() + backoff;
        snprintf(pool->last_failure, sizeof pool->last_failure, "%.255s", err.message);
    }
    bool was_taken = e->state == P_DONE;
    pthread_mutex_unlock(&pool->lock);

    if (started) {
        /* Whatever the execution left (nothing, when it ran to its end). */
        rbx_sandbox_kill(&e->pooled.sandbox);
        rbx_sandbox_reap(&e->pooled.sandbox, NULL);
        rbx_sandbox_close(&e->pooled.sandbox);
    }
    if (e->pooled.code_fd >= 0)
        close(e->pooled.code_fd);
    rbx_egress_plan_free(&e->egress);
    rbx_execution_env_free(e->envp);
    rbx_scratch_remove(pool->engine, &e->scratch);

    pthread_mutex_lock(&pool->lock);
    if (was_taken)
        pool->serving--;
    pool->keepers--;
    pthread_cond_broadcast(&pool->gone);
    pthread_cond_signal(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    pthread_cond_destroy(&e->changed);
    free(e);
}

/* With the lock held. */
static bool spawn_keeper(rbx_pool *pool, int index)
{
    entry *e = calloc(1, sizeof *e);
    if (!e)
        return false;
    e->shelf = index;
    e->state = P_PREPARING;
    e->pooled.code_fd = -1;
    e->pooled.sandbox.pid = -1;
    pthread_cond_init(&e->changed, NULL);
    e->pool = pool;
    if (rbx_workers_run(pool->workers, keeper, e) != 0) {
        pthread_cond_destroy(&e->changed);
        free(e);
        return false;
    }
    pool->keepers++;
    pool->shelves[index].preparing++;
    return true;
}

/* With the lock held: its keeper destroys it. */
static void retire(rbx_pool *pool, shelf *s, entry *e)
{
    unshelve(s, e);
    e->state = P_RETIRED;
    pool->retired++;
    pthread_cond_signal(&e->changed);
}

static entry *oldest(const shelf *s)
{
    entry *last = s->ready;
    while (last && last->next)
        last = last->next;
    return last;
}

/* The shelf furthest below its target that may be filled now, or NULL. */
static shelf *neediest(rbx_pool *pool, int64_t now)
{
    shelf *needy = NULL;
    size_t deficit = 0;
    for (size_t i = 0; i < pool->shelf_count; i++) {
        shelf *s = &pool->shelves[i];
        size_t have = s->ready_count + s->preparing;
        if (s->used && have < s->target && now >= s->retry_at && s->target - have > deficit) {
            deficit = s->target - have;
            needy = s;
        }
    }
    return needy;
}

/* At the cap on sandboxes, demand moves them: a waiting sandbox of the
 * shelf taken from least recently gives way to one for needy (and that
 * shelf aims for one fewer). False when there is none to give way. */
static bool make_room(rbx_pool *pool, shelf *needy)
{
    shelf *victim = NULL;
    for (size_t i = 0; i < pool->shelf_count; i++) {
        shelf *s = &pool->shelves[i];
        if (s != needy && s->ready_count && (!victim || s->last_take < victim->last_take))
            victim = s;
    }
    if (!victim)
        return false;
    retire(pool, victim, oldest(victim));
    if (victim->target)
        victim->target--;
    return true;
}

/* An environment's shelf, idle and empty, gives its slot and lock back. */
static void drop_env_shelf(shelf *s)
{
    if (s->used && s->has_env && !s->target && !s->ready_count && !s->preparing) {
        close(s->env_use_fd);
        memset(s, 0, sizeof *s);
    }
}

/* One round of the manager, with the lock held: shrink idle shelves,
 * replace old sandboxes, keep memory under the cap, then refill. */
static void manage(rbx_pool *pool)
{
    int64_t now = rbx_now_ms();
    /* A shelf nobody took from for this long shrinks by one, down to its floor. */
    int64_t idle_ms = (int64_t)(pool->engine->config.pool_idle_s * 1000);
    uint64_t memory = 0;
    size_t live = 0, preparing = 0;
    for (size_t i = 0; i < pool->shelf_count; i++) {
        shelf *s = &pool->shelves[i];
        if (s->target > s->floor && now - s->last_take > idle_ms &&
            now - s->last_shrink > idle_ms) {
            s->target--;
            s->last_shrink = now;
        }
        entry *old;
        while ((old = oldest(s)) &&
               (s->ready_count > s->target || now - old->ready_at > MAX_AGE_MS))
            retire(pool, s, old);
        drop_env_shelf(s);
        for (entry *e = s->ready; e; e = e->next)
            memory += memory_of(e, now);
        live += s->ready_count + s->preparing;
        preparing += s->preparing;
    }
    /* Over the cap (the cap was lowered, or sandboxes grew): give back the
     * oldest waiting sandbox of the fullest shelf, one a round. */
    if (memory > pool->memory_cap) {
        shelf *fullest = NULL;
        for (size_t i = 0; i < pool->shelf_count; i++)
            if (pool->shelves[i].ready_count &&
                (!fullest || pool->shelves[i].ready_count > fullest->ready_count))
                fullest = &pool->shelves[i];
        if (fullest)
            retire(pool, fullest, oldest(fullest));
    }
    pool->idle_memory = memory;
    size_t ready = live - preparing;
    if (ready)
        pool->sandbox_memory = memory / ready;
    while (!pool->stopping && preparing < PREPARE_AT_ONCE) {
        shelf *needy = neediest(pool, now);
        /* What those being made will hold counts already: without it a
         * small cap would be passed by every sandbox made at once. */
        if (!needy || memory + pool->sandbox_memory * (preparing + 1) > pool->memory_cap)
            break;
        if (live >= pool->max && !make_room(pool, needy))
            break;
        if (live >= pool->max)
            live--;
        if (!spawn_keeper(pool, (int)(needy - pool->shelves)))
            break;
        live++;
        preparing++;
    }
}

/* A condition variable's deadline, ms from now. */
static struct timespec deadline_in(int64_t ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    return until;
}

static void *manager(void *arg)
{
    rbx_pool *pool = arg;
    pthread_mutex_lock(&pool->lock);
    while (!pool->stopping) {
        manage(pool);
        /* Spare cgroups and scratch spaces (sandbox/cgroup.h,
         * sessions/scratch_spares.h) not reused for a while go, so an idle
         * server holds none; off the lock: each is some rmdirs. */
        pthread_mutex_unlock(&pool->lock);
        rbx_cgroup_prune_spares(SPARE_IDLE_MS);
        rbx_scratch_prune_spares(pool->engine, SPARE_IDLE_MS);
        pthread_mutex_lock(&pool->lock);
        if (pool->stopping)
            break;
        struct timespec until = deadline_in(MANAGER_TICK_MS);
        pthread_cond_timedwait(&pool->wake, &pool->lock, &until);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

rbx_pool *rbx_pool_start(rbx_engine *engine, char *why, size_t why_size)
{
    const rbx_config *config = &engine->config;
    rbx_pool *pool = calloc(1, sizeof *pool);
    if (!pool) {
        snprintf(why, why_size, "out of memory");
        return NULL;
    }
    pool->engine = engine;
    pool->max = config->pool_max;
    pool->memory_cap = (uint64_t)config->pool_memory_mb << 20;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->gone, NULL);
    pthread_cond_init(&pool->filled, NULL);
    /* As many wait for the next keeper as a shelf's refills after a burst
     * of executions at concurrency 8 take, for the spares' idle time. */
    pool->workers = rbx_workers_new(8, 2000);
    const char *wait = getenv("RUNBOX_POOL_WAIT");
    pool->wait_ms = wait ? atoi(wait) : 0;
    /* Each language starts with one sandbox waiting, with the network as
     * executions get it by default; the others fill when asked for. */
    rbx_request plain = {.network = -1, .cancel_fd = -1};
    bool default_network = rbx_execution_wants_network(engine, &plain);
    bool can_network = rbx_net_helper_available();
    for (size_t i = 0; i < rbx_runtime_count() && i < MAX_RUNTIMES; i++)
        for (int network = 0; network < 2; network++) {
            if (network && !can_network)
                continue;
            shelf *s = &pool->shelves[pool->shelf_count++];
            s->used = true;
            s->runtime = rbx_runtime_find(rbx_runtime_name(i));
            s->network = network;
            s->floor = s->target = network == default_network ? 1 : 0;
            s->last_take = s->last_shrink = rbx_now_ms();
        }
    if (!pool->workers || pthread_create(&pool->manager, NULL, manager, pool) != 0) {
        snprintf(why, why_size, "cannot start the pool's thread");
        rbx_workers_free(pool->workers);
        free(pool);
        return NULL;
    }
    return pool;
}

void rbx_pool_stop(rbx_pool *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->lock);
    pool->stopping = true;
    pthread_cond_signal(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    pthread_join(pool->manager, NULL);
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        for (size_t i = 0; i < pool->shelf_count; i++)
            while (pool->shelves[i].ready)
                retire(pool, &pool->shelves[i], pool->shelves[i].ready);
        if (pool->keepers == 0)
            break;
        pthread_cond_wait(&pool->gone, &pool->lock);
    }
    for (size_t i = 0; i < pool->shelf_count; i++)
        if (pool->shelves[i].has_env)
            close(pool->shelves[i].env_use_fd);
    pthread_mutex_unlock(&pool->lock);
    rbx_workers_free(pool->workers); /* no keeper is left: their jobs are over */
    pthread_mutex_destroy(&pool->lock);
    pthread_cond_destroy(&pool->wake);
    pthread_cond_destroy(&pool->gone);
    pthread_cond_destroy(&pool->filled);
    free(pool);
}

static bool alive(const entry *e)
{
    struct pollfd pfd = {.fd = e->pooled.sandbox.pidfd, .events = POLLIN};
    return poll(&pfd, 1, 0) == 0;
}

static bool holds(const shelf *s, const rbx_runtime *runtime, bool network, const rbx_env *env)
{
    return s->used && s->runtime == runtime && s->network == network &&
           (env ? s->has_env && !strcmp(s->env_key, env->key) : !s->has_env);
}

/* The first request for an environment gets a shelf for it (empty: it
 * grows like any other), or NULL when every slot is taken. */
static shelf *env_shelf(rbx_pool *pool, const rbx_runtime *runtime, bool network,
                        const rbx_env *env)
{
    shelf *s = NULL;
    for (size_t i = 0; i < pool->shelf_count && !s; i++)
        if (!pool->shelves[i].used)
            s = &pool->shelves[i];
    if (!s && pool->shelf_count < SHELVES)
        s = &pool->shelves[pool->shelf_count++];
    int fd = s ? fcntl(env->use_fd, F_DUPFD_CLOEXEC, 3) : -1;
    if (fd < 0)
        return NULL;
    *s = (shelf){.used = true,
                 .runtime = runtime,
                 .network = network,
                 .has_env = true,
                 .env_use_fd = fd,
                 .last_take = rbx_now_ms(),
                 .last_shrink = rbx_now_ms()};
    snprintf(s->env_key, sizeof s->env_key, "%s", env->key);
    snprintf(s->env_path, sizeof s->env_path, "%s", env->path);
    return s;
}

rbx_pooled *rbx_pool_take(rbx_pool *pool, const rbx_runtime *runtime, bool network,
                          const rbx_env *env)
{
    if (!pool)
        return NULL;
    pthread_mutex_lock(&pool->lock);
    shelf *s = NULL;
    for (size_t i = 0; i < pool->shelf_count; i++)
        if (holds(&pool->shelves[i], runtime, network, env))
            s = &pool->shelves[i];
    if (!s && env && env->use_fd >= 0)
        s = env_shelf(pool, runtime, network, env);
    entry *e = NULL;
    if (s && !s->ready && pool->wait_ms > 0) {
        if (s->target < pool->max && s->ready_count + s->preparing < 1)
            s->target++;
        pthread_cond_signal(&pool->wake);
        struct timespec until = deadline_in(pool->wait_ms);
        while (!s->ready && !pool->stopping &&
               pthread_cond_timedwait(&pool->filled, &pool->lock, &until) == 0)
            ;
    }
    while (s && s->ready && !e) {
        e = s->ready;
        unshelve(s, e);
        if (!alive(e)) { /* its interpreter died waiting (killed from outside) */
            e->state = P_RETIRED;
            pool->retired++;
            pthread_cond_signal(&e->changed);
            e = NULL;
        }
    }
    if (s) {
        s->last_take = rbx_now_ms();
        if (!e && s->target < pool->max)
            s->target++; /* it would have waited: more next time */
    }
    if (e) {
        e->state = P_TAKEN;
        pool->taken++;
        pool->serving++;
    } else {
        pool->missed++;
    }
    if (!e)
        pthread_cond_signal(&pool->wake); /* nothing to compete with: fill now */
    pthread_mutex_unlock(&pool->lock);
    /* On the execution's path: the CPU time alone, not every figure. */
    uint64_t cpu_usec;
    if (e && e->pooled.sandbox.cgroup && rbx_cgroup_cpu_read(e->pooled.sandbox.cgroup, &cpu_usec) == 0)
        e->pooled.cpu_usec_at_take = cpu_usec;
    return e ? &e->pooled : NULL;
}

void rbx_pool_done(rbx_pool *pool, rbx_pooled *pooled)
{
    entry *e = (entry *)pooled;
    pthread_mutex_lock(&pool->lock);
    e->state = P_DONE;
    pthread_cond_signal(&e->changed);
    /* Refilled once the execution is over: making a sandbox while one
     * runs would take its core and the kernel's namespace locks from it. */
    pthread_cond_signal(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
}

void rbx_pool_stats_get(rbx_pool *pool, rbx_pool_stats *stats)
{
    memset(stats, 0, sizeof *stats);
    if (!pool)
        return;
    pthread_mutex_lock(&pool->lock);
    stats->enabled = true;
    for (size_t i = 0; i < pool->shelf_count; i++) {
        stats->env_shelves += pool->shelves[i].has_env;
        stats->ready += pool->shelves[i].ready_count;
        stats->preparing += pool->shelves[i].preparing;
        stats->target += pool->shelves[i].target;
    }
    stats->serving = pool->serving;
    stats->max = pool->max;
    stats->idle_memory_bytes = pool->idle_memory;
    stats->memory_cap_bytes = pool->memory_cap;
    stats->taken = pool->taken;
    stats->missed = pool->missed;
    stats->prepared = pool->prepared;
    stats->failed = pool->failed;
    stats->retired = pool->retired;
    snprintf(stats->last_failure, sizeof stats->last_failure, "%s", pool->last_failure);
    pthread_mutex_unlock(&pool->lock);
}
