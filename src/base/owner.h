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

/* Parses the pid at the start of text ("1234-..."); 0 when there is none. */
pid_t rbx_owner_pid(const char *text);

#endif
