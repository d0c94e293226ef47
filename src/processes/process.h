/* What processes.c and hibernation.c share of a process (processes.h is
 * the engine's view): the registry's and a process's state, and the
 * steps of a process's life either file takes. */
#ifndef RBX_PROCESSES_PROCESS_H
#define RBX_PROCESSES_PROCESS_H

#include "egress/policy.h"
#include "images/roots.h"
#include "processes/processes.h"
#include "runbox.h"
#include "sandbox/checkpoint.h"
#include "sandbox/sandbox.h"
#include "sessions/storage.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

/* Processes of one engine over all sessions. */
#define ENGINE_PROCESSES_MAX 512
/* How long the program may take to reach its execve. */
#define START_WAIT_MS 30000
/* How long input may wait for a program that does not read it. */
#define WRITE_WAIT_MS 5000
/* Watchers of one process at once (Connect streams). */
#define WATCHERS_MAX 16
/* Arguments and environment of one process together. */
#define ARGS_BYTES_MAX (256 * 1024)
#define READ_CHUNK (16 * 1024) /* an event at most: what a held watcher may take beyond its share */
#define LOCK_NAME "processes.lock"
/* How long a starting process waits for a removal of its session to end. */
#define LOCK_WAIT_MS 2000
/* How long SIGKILL waits for the process's end (its sandbox's teardown). */
#define KILL_WAIT_S 5

typedef struct watcher {
    uint64_t id;
    rbx_process_fn fn;
    void *user;
    bool holding; /* it asked for no more output for now */
    struct watcher *next;
} watcher;

/* HIBERNATED: its sandbox paused to disk (a checkpoint in its session),
 * nothing of it running; its thread waits to restore it or end it. */
typedef enum life { STARTING, RUNNING, HIBERNATED, ENDED } life;

struct rbx_process {
    rbx_engine *engine;
    atomic_int refs;
    uint32_t pid;
    char session_id[RBX_SESSION_ID_MAX + 1];
    rbx_process_info info; /* what List shows: copies of the request */
    bool terminal;
    bool stdin_open;

    pthread_mutex_t lock; /* life, watchers, the end */
    pthread_cond_t changed;
    life life;
    rbx_status start_status;
    rbx_error start_err;
    watcher *watchers;
    uint64_t next_watch;
    size_t watcher_count;
    size_t holds;  /* watchers holding the output: the pump reads none */
    int resume_fd; /* an eventfd: a hold ended, the pump looks again */
    bool kill_asked;     /* SIGKILL asked for, or its session goes */
    const char *why_end; /* runbox's word on an end it caused */
    char end_said[400];  /* ... when it is made of words found then */
    /* A pause asks the thread to hibernate the process (it answers by
     * clearing hibernate_asked, hibernated or not), a resume to wake it. */
    bool hibernate_asked, wake_asked;
    rbx_checkpoint *checkpoint; /* while hibernated */
    char digest[65];            /* its images', checked before the restore */
    bool scratch_stowed;        /* its /tmp is in the checkpoint's directory */
    bool keep_checkpoint;       /* runbox stops: the next one restores it */
    bool adopted;               /* found on disk, left by a runbox before */
    struct termios tty_mode;    /* a hibernated terminal's, for the new one */
    struct winsize tty_size;
    json_t *request; /* what it was started with, for its checkpoint's record */

    /* Input: one writer at a time; the descriptors live until the end, and
     * are closed by the process's thread under this lock. */
    pthread_mutex_t write_lock;
    int input_fd; /* stdin's socket, or the terminal's master; -1 */

    /* The sandbox and what it was made from (the process's thread's). */
    rbx_root *root;
    rbx_sandbox sandbox;
    int master; /* the terminal's master, or -1 */
    int slave;  /* its slave until the sandbox has it, or -1 */
    int program_pidfd;
    int lock_fd; /* the shared flock on processes.lock */
    rbx_scratch scratch;
    rbx_egress_plan egress;
    bool network;
    char **envp;
    char **exec_argv;
    char *cwd_inside;
    char work_path[4400];
    rbx_sandbox_spec spec;
    rbx_cgroup_limits limits;
    struct rbx_process *next; /* the registry's list */
};

/* A stop in progress (stop_where's, on its stack): no process enters the
 * registry in its session meanwhile. */
typedef struct stopping {
    const char *session_id; /* NULL: every session */
    struct stopping *next;
} stopping;

struct rbx_processes {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a process left the registry, or a thread ended */
    rbx_process *list;
    stopping *stops;
    size_t count;
    size_t threads; /* processes' threads still running */
    uint32_t next_pid;
};

static inline void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* input.c: a pseudo-terminal of this size (p->master, p->slave); and,
 * once its sandbox runs, the program's input for writers (p->input_fd: a
 * copy of the master, or the sandbox's end of the stdin pipe, which the
 * sandbox then no longer holds). */
rbx_status process_open_terminal(rbx_process *p, uint16_t cols, uint16_t rows, rbx_error *err);
void process_take_input(rbx_process *p);

/* hibernation.c: a process's sandbox to disk and back, and the record
 * beside it, by its thread (processes.c's hibernation). */
/* What it was started with, for the record. */
json_t *process_request_json(const rbx_process_request *r);
/* hibernated-process-<pid>: its checkpoint's directory in its session. */
void process_checkpoint_name(uint32_t pid, char *name, size_t size);
/* Dumps the running sandbox (its pump left) with its /tmp and a record;
 * the tree ends. On failure it runs on, its network and /tmp back. */
rbx_status process_dump(rbx_process *p, rbx_error *err);
/* The checkpoint checked against its record's digest, and put back in a
 * fresh sandbox (a new terminal with the old one's settings). */
rbx_status process_restore(rbx_process *p, rbx_error *err);
/* The image and host kernel it runs on, as the record keeps them. */
json_t *process_ran_on(const rbx_process *p);
/* A record found on disk: whether it is a process's of this session and
 * pid, with the request it was started with (its strings the record's;
 * lists[3] to free); then what the restore needs from it, into p. */
bool process_record_request(json_t *record, const char *session_id, uint32_t pid,
                            rbx_process_request *r, const char ***lists);
bool process_record_take(rbx_process *p, json_t *record);

#endif
