/* Per-execution cgroups: a memory, process-count and CPU-share limit for
 * everything an execution starts, the OOM verdict and usage figures after
 * it, a kill that reaches every process of it, and (made freezable) a
 * freeze of every process of it. Works with cgroup v2 and
 * with cgroup v1 (including hybrid hosts), detected at run time.
 *
 * Only directories named runbox/exec-<random> are ever created or removed,
 * below a runbox/ directory in each hierarchy used (left in place: it is
 * shared by concurrent executions). */
#ifndef RBX_CGROUP_H
#define RBX_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rbx_cgroup_limits {
    uint64_t memory_bytes; /* 0 = no limit; swap is limited along with it */
    uint64_t pids;         /* processes and threads; 0 = no limit */
    uint32_t cpu_weight;   /* 1..10000 like v2's cpu.weight (100 = default); 0 = none */
    uint64_t cpu_quota_us; /* CPU time per RBX_CPU_PERIOD_US, over all CPUs; 0 = no quota */
    /* Where no cgroup holds the execution, RLIMIT_DATA stands in for the
     * memory limit: it counts address space reserved as well as used, and
     * this much more is allowed for what the interpreter reserves and never
     * uses (V8's code range). A cgroup counts memory used, and ignores it. */
    uint64_t reserved_bytes;
    /* Made to be frozen (rbx_cgroup_freeze): v1 gives it a cgroup in the
     * freezer hierarchy too, which an execution's cgroup does without. */
    bool freezable;
} rbx_cgroup_limits;

/* The CFS bandwidth period: a quota of N cores is N x this per period. */
#define RBX_CPU_PERIOD_US 100000

typedef enum { RBX_CGROUP_NONE, RBX_CGROUP_V1, RBX_CGROUP_V2 } rbx_cgroup_mode;

typedef struct rbx_cgroup_support {
    rbx_cgroup_mode mode; /* NONE when cgroups cannot be created (detail says why) */
    bool memory, pids, cpu;
    bool freezer; /* v2's cgroup.freeze, or a v1 freezer hierarchy */
    char detail[512]; /* for `runbox check` */
} rbx_cgroup_support;

/* Probes once per process (thread-safe); the result never changes. */
const rbx_cgroup_support *rbx_cgroup_probe(void);

typedef struct rbx_cgroup rbx_cgroup;

/* Removes what runbox processes that are gone left under runbox/ (their
 * processes killed first), as every cgroup creation after a process's first
 * does; for executions that create none (prepared sandboxes). At most once
 * a second: a call within a second of the last sweep does nothing. */
void rbx_cgroup_sweep(void);

/* Creates an execution's cgroup in every hierarchy used and sets the limits.
 * Returns 0, or -1 with a message in why. */
int rbx_cgroup_create(const rbx_cgroup_limits *limits, rbx_cgroup **out, char *why,
                      size_t why_size);

/* The most fds rbx_cgroup_enter_fds can return (one per v1 hierarchy). */
#define RBX_CGROUP_MAX_FDS 5

/* The files that move a process into the execution's cgroup (one per
 * hierarchy: v2 cgroup.procs; v1 tasks, valid for a single-threaded joiner),
 * opened O_WRONLY|O_CLOEXEC in advance: the kernel checks the permission of
 * whoever opened them, so a child may join after entering new user and
 * cgroup namespaces. Returns how many were stored in fds (at most max). */
int rbx_cgroup_enter_fds(const rbx_cgroup *cg, int *fds, size_t max);

/* Moves the calling process into the cgroup by writing "0" to each fd.
 * Async-signal-safe (only write(2)): usable after clone() or fork().
 * Returns 0, or -1 with errno. */
int rbx_cgroup_join(const int *fds, size_t n);

/* v2 only: an O_DIRECTORY fd of the execution's cgroup, for clone3()'s
 * CLONE_INTO_CGROUP; -1 on v1. Owned by cg. */
int rbx_cgroup_v2_dirfd(const rbx_cgroup *cg);

typedef struct rbx_cgroup_stats {
    bool oom_killed;               /* the kernel's OOM killer killed something in it */
    uint64_t peak_memory_bytes;    /* 0 when the kernel does not report it (v2 before 5.19) */
    uint64_t cpu_usec;             /* user + system CPU time of all its processes */
    /* pids.peak where the kernel has it (a reused cgroup's: over its whole
     * life, which v1 cannot reset), else pids.current */
    uint64_t pids_peak_or_current;
} rbx_cgroup_stats;

/* Reads the figures; whatever this kernel does not provide is left 0.
 * Returns 0, or -1 with errno when a file could not be read. */
int rbx_cgroup_stats_read(const rbx_cgroup *cg, rbx_cgroup_stats *stats);
/* Its CPU time alone (stats' cpu_usec): one file where the stats read
 * four, for a caller on an execution's path. 0, or -1 with errno. */
int rbx_cgroup_cpu_read(const rbx_cgroup *cg, uint64_t *cpu_usec);

/* Sets the limits again (a kernel's call may ask for others). Lowering the
 * memory limit below what is in use may fail (v1) or kill (v2). Returns 0,
 * or -1 with a message in why. */
int rbx_cgroup_update(rbx_cgroup *cg, const rbx_cgroup_limits *limits, char *why, size_t why_size);
/* The file that says how much memory the cgroup uses now (v2
 * memory.current, v1 memory.usage_in_bytes), for readers elsewhere. */
int rbx_cgroup_memory_file(const rbx_cgroup *cg, char *path, size_t size);
/* How many times the OOM killer acted in the cgroup so far. */
uint64_t rbx_cgroup_oom_kills(const rbx_cgroup *cg);

/* Freezes every process in the cgroup (none runs, none can start another,
 * none can tell) or thaws them, and waits until that is done (ten seconds
 * at most). The cgroup must have been made freezable. Returns 0, or -1
 * with errno (ENOTSUP: no freezer for it; ETIMEDOUT: it asked, and some
 * process was not frozen or thawed in time). */
int rbx_cgroup_freeze(rbx_cgroup *cg, bool frozen);
/* Whether it is frozen now (as this process made it). */
bool rbx_cgroup_frozen(const rbx_cgroup *cg);

/* Kills every process still in the cgroup, waits (up to about 5 s) until it
 * is empty, removes the directories created for it and frees cg. Never
 * signals a process outside it. NULL is allowed. Where spares are kept
 * (rbx_cgroup_keep_spares), a v1 cgroup that ended cleanly is kept
 * instead, reset, for a later rbx_cgroup_create to give out. */
void rbx_cgroup_destroy(rbx_cgroup *cg);

/* Keep up to max (at most RBX_SPARES_MAX, base/spares.h) emptied cgroups for later executions (0: none, and the
 * ones kept are removed now). For a process that runs many executions and
 * prunes them (rbx_cgroup_prune_spares) when it stops: a CLI that runs one
 * would leave them for the next runbox's sweep. */
void rbx_cgroup_keep_spares(size_t max);

/* Removes the spares kept more than idle_ms ago: a process that stopped
 * running executions gives its cgroups back. */
void rbx_cgroup_prune_spares(int64_t idle_ms);

/* How many cgroups were kept as spares, and given out again, so far. */
void rbx_cgroup_spare_counts(uint64_t *kept, uint64_t *reused);

#endif
