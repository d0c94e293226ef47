/* Leftovers name the runbox process that made them (cgroups
 * exec-<mark>-..., trash entries <kind>-<mark>-..., a scratch space's owner
 * attributes): a later runbox removes them once that process is gone,
 * without waiting, and never while it runs.
 *
 * A mark is "<pid>-s<start>": the pid and the process's start time in
 * clock ticks since boot (field 22 of /proc/PID/stat), which names one
 * process for the whole life of the host and is compared as it is: no
 * clock comes into it. The pid comes first, followed by a '-', as in the
 * marks of runbox before them ("<pid>" alone), which those versions read
 * still (they do not sweep what a running newer one made). For those, a
 * process of that pid that started after the leftover was made (its start
 * in seconds since the epoch) reused the pid. That comparison goes wrong
 * where the host's clock moves against its boot clock: a virtual machine's
 * ran 0.5 % fast here, so that a running server's start read 1 s later
 * every 200 s, and a spare cgroup it made at its start, and kept giving to
 * executions, was taken for a dead runbox's by another runbox's sweep and
 * removed under the next execution (cannot join the execution's cgroup:
 * ENODEV); a step of the clock does the same at once. */
#ifndef RBX_OWNER_H
#define RBX_OWNER_H

#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

typedef enum { RBX_OWNER_ALIVE, RBX_OWNER_GONE, RBX_OWNER_UNKNOWN } rbx_owner_state;

/* Who made a leftover, as its mark says. */
typedef struct {
    pid_t pid;
    unsigned long long start; /* clock ticks since boot; 0 in an older mark */
} rbx_owner_id;

/* This process's mark ("<pid>-s<start>"), for the names of what it makes. */
const char *rbx_owner_mark(void);
/* This process's start in clock ticks since boot (0 when unreadable). */
unsigned long long rbx_owner_start(void);
/* Reads the mark at the start of text, which ends there or at a '-'
 * ("1234-s5678-...", "1234-s5678", or an older "1234-..." or "1234"):
 * true and *id, or false when there is none. */
bool rbx_owner_parse(const char *text, rbx_owner_id *id);

/* Whether process pid, which made something at `made` (seconds since the
 * epoch), still runs. A live process with that pid that started after
 * `made` reused the pid: the maker is gone. UNKNOWN when this process may
 * not tell (another user's process). */
rbx_owner_state rbx_owner_state_of(pid_t pid, time_t made);

/* The owners one sweep has looked at: a sweep's leftovers name few
 * processes (a server's hundred sandboxes name its one pid), each looked
 * at once (a signal and a read of /proc) rather than once per leftover, so
 * that a sweep costs a system call or so per leftover however busy the
 * host. A memo lives for one sweep: a process's end after its look is
 * seen by the next sweep (its leftovers stay until then, never the
 * other way round), and a verdict of gone is taken again for what was
 * made since the look (the pid may be another process's). Past
 * RBX_OWNER_MEMO_MAX owners, each further one is looked at every time. */
#define RBX_OWNER_MEMO_MAX 32
typedef struct {
    pid_t pid;
    rbx_owner_state state; /* ALIVE: started, ticks and ended are what was read */
    bool ended;
    time_t started, checked;
    unsigned long long ticks; /* its start since boot; 0 when unread */
} rbx_owner_seen;
typedef struct {
    rbx_owner_seen seen[RBX_OWNER_MEMO_MAX];
    size_t count;
} rbx_owner_memo; /* zeroed to begin */

/* rbx_owner_state_of, pid looked at once per memo. */
rbx_owner_state rbx_owner_state_memo(rbx_owner_memo *memo, pid_t pid, time_t made);
/* Whether the process a mark names still runs: with its start in the mark,
 * a process of that pid is the maker when it started then, whatever the
 * clocks say; an older mark is judged as rbx_owner_state_memo does. made
 * is when the leftover was made (seconds since the epoch). memo may be
 * NULL. */
rbx_owner_state rbx_owner_state_id(rbx_owner_memo *memo, const rbx_owner_id *id, time_t made);


#endif
