/* Leftovers name the runbox process that made them (cgroups exec-<pid>-...,
 * scratch space <pid>-..., trash entries): a later runbox removes them
 * once that process is gone, without waiting, and never while it runs. */
#ifndef RBX_OWNER_H
#define RBX_OWNER_H

#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

typedef enum { RBX_OWNER_ALIVE, RBX_OWNER_GONE, RBX_OWNER_UNKNOWN } rbx_owner_state;

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
    rbx_owner_state state; /* ALIVE: started and ended are what was read */
    bool ended;
    time_t started, checked;
} rbx_owner_seen;
typedef struct {
    rbx_owner_seen seen[RBX_OWNER_MEMO_MAX];
    size_t count;
} rbx_owner_memo; /* zeroed to begin */

/* rbx_owner_state_of, pid looked at once per memo. */
rbx_owner_state rbx_owner_state_memo(rbx_owner_memo *memo, pid_t pid, time_t made);

/* Parses the pid at the start of text ("1234-..."); 0 when there is none. */
pid_t rbx_owner_pid(const char *text);

#endif
