/* The phase trace (RUNBOX_TRACE=1): when each step of an execution ended,
 * so the next optimisation starts from data. The sandbox's own processes
 * write their steps into a shared page (clock_gettime only: no locks, no
 * allocation), which the parent reads after they are gone. */
#ifndef RBX_TRACE_H
#define RBX_TRACE_H

#include <stdint.h>

typedef enum rbx_phase {
    RBX_PHASE_START,      /* rbx_execute called */
    RBX_PHASE_VALIDATED,  /* request, policy and requirements checked */
    RBX_PHASE_ENV,        /* dependency environment found or installed */
    RBX_PHASE_SESSION,    /* session locked */
    RBX_PHASE_SCRATCH,    /* the execution's scratch subvolume made (/tmp, a one-off home) */
    RBX_PHASE_TEMPLATE,   /* the prepared mount namespace found (or built) */
    RBX_PHASE_CLONED,     /* namespaces created: clone3 returned */
    RBX_PHASE_RELEASED,   /* users mapped, network up, init told to go */
    RBX_PHASE_CGROUP,     /* init: in the execution's cgroup */
    RBX_PHASE_MOUNTS,     /* init: new root built and pivoted into */
    RBX_PHASE_FORKED,     /* init: the program forked */
    RBX_PHASE_EXEC,       /* program: confined (seccomp installed), calling execve */
    RBX_PHASE_FIRST_BYTE, /* the first output or report byte arrived */
    RBX_PHASE_EXIT,       /* the execution's last process ended (init's report or exit) */
    RBX_PHASE_TEARDOWN,   /* cgroup removed, helpers stopped, session released */
    RBX_PHASE_COUNT
} rbx_phase;

typedef struct rbx_trace {
    int64_t at_us[RBX_PHASE_COUNT]; /* CLOCK_MONOTONIC, 0 when not reached */
    /* The egress policy's share (network on only; "egress_us"): installing
     * its rules and starting its resolver (part of release_us), and reading
     * what it refused at the end (part of teardown_us). */
    int64_t egress_us;
    /* The network's share (network on only; "network_us"): making the tap
     * and starting runbox-net, within release_us. */
    int64_t network_us;
} rbx_trace;

/* A page shared with the sandbox's processes, or NULL when not tracing. */
rbx_trace *rbx_trace_new(void);
void rbx_trace_free(rbx_trace *trace);
/* Records the end of a phase; async-signal-safe, NULL is allowed. */
void rbx_trace_mark(rbx_trace *trace, rbx_phase phase);
/* The phases as a JSON object text {"validate_us": N, ...}, durations from
 * the previous phase reached; caller frees. */
char *rbx_trace_json(const rbx_trace *trace);

#endif
