/* Processes (see processes.h): the registry, each process's life on its
 * own thread, and what callers do to a running one (input, signals, the
 * terminal's size, watching its events). */
#include "processes/processes.h"
#include "processes/process.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "egress/policy.h"
#include "engine/engine.h"
#include "execution/given.h"
#include "images/roots.h"
#include "kernels/hibernation.h"
#include "runbox.h"
#include "sandbox/checkpoint.h"
#include "sandbox/mount.h"
#include "sandbox/net.h"
#include "sandbox/sandbox.h"
#include "sessions/session.h"
#include "sessions/storage.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

rbx_processes *rbx_processes_new(void)
{
    rbx_processes *processes = calloc(1, sizeof *processes);
    if (processes) {
        pthread_mutex_init(&processes->lock, NULL);
        pthread_cond_init(&processes->changed, NULL);
        processes->next_pid = 1;
    }
    return processes;
}

void rbx_process_request_init(rbx_process_request *request)
{
    memset(request, 0, sizeof *request);
    request->network = -1;
}

/* --- a process's memory ------------------------------------------------------------------ */

static void free_strings(char **list)
{
    for (char **s = list; s && *s; s++)
        free(*s);
    free(list);
}

static char **copy_strings(const char *const *list, size_t count)
{
    char **copy = calloc(count + 1, sizeof *copy);
    for (size_t i = 0; copy && i < count; i++)
        if (!(copy[i] = strdup(list[i]))) {
            free_strings(copy);
            return NULL;
        }
    return copy;
}

static void info_clear(rbx_process_info *info)
{
    free_strings(info->argv);
    free_strings(info->env);
    free(info->cwd);
    free(info->tag);
    memset(info, 0, sizeof *info);
}

static bool info_copy(rbx_process_info *to, const rbx_process_info *from)
{
    *to = (rbx_process_info){.pid = from->pid, .terminal = from->terminal};
    size_t argc = 0, envc = 0;
    while (from->argv && from->argv[argc])
        argc++;
    while (from->env && from->env[envc])
        envc++;
    to->argv = copy_strings((const char *const *)from->argv, argc);
    to->env = copy_strings((const char *const *)from->env, envc);
    to->cwd = from->cwd ? strdup(from->cwd) : NULL;
    to->tag = from->tag ? strdup(from->tag) : NULL;
    if (to->argv && to->env && (!from->cwd || to->cwd) && (!from->tag || to->tag))
        return true;
    info_clear(to);
    return false;
}

static void release_lock(int *fd)
{
    rbx_lock_release(*fd);
    *fd = -1;
}

static void process_unref(rbx_process *p)
{
    if (atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    for (watcher *w = p->watchers; w;) {
        watcher *next = w->next;
        free(w);
        w = next;
    }
    info_clear(&p->info);
    free_strings(p->envp);
    free_strings(p->exec_argv);
    free(p->cwd_inside);
    close_fd(&p->master);
    close_fd(&p->slave);
    close_fd(&p->input_fd);
    close_fd(&p->program_pidfd);
    close_fd(&p->resume_fd);
    free(p->checkpoint);
    json_decref(p->request);
    release_lock(&p->lock_fd);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->write_lock);
    pthread_cond_destroy(&p->changed);
    free(p);
}

void rbx_process_free(rbx_process *process)
{
    if (process)
        process_unref(process);
}

uint32_t rbx_process_pid(const rbx_process *process)
{
    return process->pid;
}

/* --- checking a request ------------------------------------------------------------------- */

static bool env_entry_valid(const char *entry)
{
    const char *eq = strchr(entry, '=');
    if (!eq || eq == entry)
        return false;
    for (const char *c = entry; c < eq; c++)
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || *c == '_' ||
              (c > entry && *c >= '0' && *c <= '9')))
            return false;
    return true;
}

static rbx_status check_request(const rbx_engine *engine, const rbx_process_request *r,
                                rbx_error *err)
{
    if (!rbx_session_id_valid(r->session_id))
        return rbx_fail(err, RBX_EINVAL,
                        "invalid session id: it must match " RBX_SESSION_ID_PATTERN);
    if (!r->argv || r->argc == 0 || !r->argv[0] || !r->argv[0][0])
        return rbx_fail(err, RBX_EINVAL, "a process needs a program to run");
    if (r->argc > RBX_PROCESS_ARGS_MAX)
        return rbx_fail(err, RBX_EINVAL, "a process takes at most %d arguments",
                        RBX_PROCESS_ARGS_MAX);
    size_t bytes = 0;
    for (size_t i = 0; i < r->argc; i++)
        bytes += r->argv[i] ? strlen(r->argv[i]) + 1 : ARGS_BYTES_MAX;
    for (size_t i = 0; i < r->env_count; i++) {
        if (!r->env[i] || !env_entry_valid(r->env[i]))
            return rbx_fail(err, RBX_EINVAL,
                            "environment variables are NAME=VALUE, NAME of letters, digits and "
                            "'_' not starting with a digit");
        bytes += strlen(r->env[i]) + 1;
    }
    if (bytes > ARGS_BYTES_MAX)
        return rbx_fail(err, RBX_EINVAL,
                        "a process's arguments and environment take at most %d KiB",
                        ARGS_BYTES_MAX / 1024);
    if (r->cwd && (r->cwd[0] != '/' || strlen(r->cwd) > RBX_KERNEL_CWD_MAX))
        return rbx_fail(err, RBX_EINVAL,
                        "a process's working directory is an absolute path inside the sandbox "
                        "of at most %d bytes",
                        RBX_KERNEL_CWD_MAX);
    bool terminal = r->cols || r->rows;
    if (terminal && (r->cols < 1 || r->rows < 1 || r->cols > RBX_PROCESS_TERMINAL_MAX ||
                     r->rows > RBX_PROCESS_TERMINAL_MAX))
        return rbx_fail(err, RBX_EINVAL, "a terminal has 1 to %d columns and rows",
                        RBX_PROCESS_TERMINAL_MAX);
    if (r->tag && strlen(r->tag) > 256)
        return rbx_fail(err, RBX_EINVAL, "a process's tag has at most 256 bytes");
    if (r->memory_mb > engine->config.max_memory_mb)
        return rbx_fail(err, RBX_EINVAL, "memory_mb is at most %u", engine->config.max_memory_mb);
    if (r->cpus < 0 || r->cpus > engine->config.max_cpus)
        return rbx_fail(err, RBX_EINVAL, "cpus is at most %g", engine->config.max_cpus);
    return RBX_OK;
}

/* The request's settings as an execution's, for what executions are given. */
static rbx_request as_execution(const rbx_process_request *r)
{
    rbx_request q = {.cancel_fd = -1};
    q.session_id = r->session_id;
    q.env = r->env;
    q.env_count = r->env_count;
    q.network = r->network;
    q.memory_mb = r->memory_mb;
    q.cpus = r->cpus;
    q.egress_allow = r->egress_allow;
    q.egress_allow_count = r->egress_allow_count;
    q.image = r->image;
    return q;
}

/* --- the session ---------------------------------------------------------------------------- */

/* Holds the session for the process (see processes.h): the shared flock,
 * then a check that the directory it was taken in is still the session's
 * (a removal renames it away). */
static rbx_status hold_session(rbx_engine *engine, rbx_process *p, rbx_error *err)
{
    const char *id = p->session_id;
    int dir = openat(engine->sessions_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0)
        return errno == ENOENT
                   ? rbx_fail(err, RBX_ENOENT, "no session %s", id)
                   : rbx_fail(err, RBX_ESYSTEM, "cannot open session %s: %s", id, strerror(errno));
    p->lock_fd = openat(dir, LOCK_NAME, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    rbx_status status = RBX_OK;
    if (p->lock_fd < 0)
        status = rbx_fail(err, RBX_ESYSTEM, "cannot open %s of session %s: %s", LOCK_NAME, id,
                          strerror(errno));
    int64_t give_up = rbx_now_ms() + LOCK_WAIT_MS;
    while (status == RBX_OK && flock(p->lock_fd, LOCK_SH | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK || rbx_now_ms() >= give_up)
            status = rbx_fail(err, RBX_EBUSY, "session %s is being removed", id);
        else
            usleep(5000);
    }
    struct stat now, held;
    if (status == RBX_OK &&
        (fstatat(engine->sessions_fd, id, &now, AT_SYMLINK_NOFOLLOW) != 0 ||
         fstat(dir, &held) != 0 || now.st_ino != held.st_ino || now.st_dev != held.st_dev))
        status = rbx_fail(err, RBX_ENOENT, "no session %s", id);
    close(dir);
    if (status != RBX_OK)
        close_fd(&p->lock_fd);
    snprintf(p->work_path, sizeof p->work_path, "%s/%s/work", engine->sessions_dir, id);
    return status;
}

bool rbx_processes_keep_out(int session_dirfd, int *lock_fd)
{
    *lock_fd = openat(session_dirfd, LOCK_NAME, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (*lock_fd < 0)
        return true; /* no lock file can be made: no process can start either */
    if (flock(*lock_fd, LOCK_EX | LOCK_NB) == 0)
        return true;
    close_fd(lock_fd); /* not locked */
    return false;
}

/* --- the sandbox ---------------------------------------------------------------------------- */

/* The program and its arguments as execve takes them: a name without a
 * '/' is looked up in the sandbox's PATH by env(1) there. */
static char **exec_argv(const rbx_process_request *r, const char **program)
{
    bool lookup = !strchr(r->argv[0], '/');
    size_t extra = lookup ? 2 : 0;
    char **argv = calloc(r->argc + extra + 1, sizeof *argv);
    if (!argv)
        return NULL;
    size_t n = 0;
    if (lookup) {
        argv[n++] = strdup("env");
        argv[n++] = strdup("--");
    }
    for (size_t i = 0; i < r->argc; i++)
        argv[n++] = strdup(r->argv[i]);
    for (size_t i = 0; i < n; i++)
        if (!argv[i]) {
            for (size_t j = 0; j < n; j++)
                free(argv[j]);
            free(argv);
            return NULL;
        }
    *program = lookup ? "/usr/bin/env" : argv[0];
    return argv;
}

/* Everything the sandbox is made from, on the caller's thread: the same
 * spec an execution's sandbox gets (kernels.c's prepare, for a bare
 * program), with the session's files as its home. */
static rbx_status prepare(rbx_engine *engine, rbx_process *p, const rbx_process_request *r,
                          rbx_error *err)
{
    rbx_request q = as_execution(r);
    rbx_status status = rbx_engine_root(engine, r->image, &p->root, err);
    if (status == RBX_OK)
        status = rbx_storage_room(engine, err);
    if (status == RBX_OK)
        status = hold_session(engine, p, err);
    /* An adopted process's /tmp is in its checkpoint, and its restore
     * makes its terminal (hibernation.c). */
    if (status == RBX_OK && !p->adopted)
        status = rbx_scratch_make(engine, false, &p->scratch, err);
    if (status != RBX_OK)
        return status;
    rbx_session session = {.dir_fd = -1, .lock_fd = -1};
    snprintf(session.id, sizeof session.id, "%s", p->session_id);
    p->envp = rbx_execution_env(&q, &session, NULL);
    const char *program = NULL;
    p->exec_argv = exec_argv(r, &program);
    if (!p->envp || !p->exec_argv || (r->cwd && !(p->cwd_inside = strdup(r->cwd))))
        return rbx_fail(err, RBX_ESYSTEM, "out of memory");
    p->network = rbx_execution_wants_network(engine, &q);
    if (p->network &&
        (status = rbx_egress_plan_make(&p->egress, engine->egress, &q, err)) != RBX_OK)
        return status;
    if (p->terminal && !p->adopted &&
        (status = process_open_terminal(p, r->cols, r->rows, err)) != RBX_OK)
        return status;
    p->limits = rbx_execution_limits(engine, &q);
    p->limits.freezable = true; /* a paused sandbox's processes are frozen */
    p->spec = (rbx_sandbox_spec){
        .interpreter = program,
        .argv = p->exec_argv,
        .envp = p->envp,
        .root = rbx_root_plan_of(p->root),
        .root_request = {.session_path = p->work_path,
                         .tmp_path = p->scratch.made ? p->scratch.tmp_path : NULL,
                         .become_root = engine->is_root,
                         .nameserver = p->network},
        .code_fd = -1,
        .bare = true,
        .terminal = p->terminal,
        .terminal_fd = p->slave,
        .cwd = p->cwd_inside,
        .with_stdin = p->stdin_open && !p->terminal,
        .network = p->network ? RBX_NET_OUTSIDE : RBX_NET_LOOPBACK,
        .egress = p->network ? &p->egress : NULL,
        .limits = p->limits,
        .file_size_max = engine->config.disk_cap_bytes,
        .is_root = engine->is_root,
        .template_ns = -1,
    };
    return RBX_OK;
}

/* Waits for the program's execve: the report pipe closes (its end in the
 * program is close-on-exec, init's is closed after the fork), or says
 * what failed ("E<step>: <why>"). */
static rbx_status await_exec(rbx_process *p, rbx_error *err)
{
    char report[512];
    size_t got = 0;
    int64_t deadline = rbx_now_ms() + START_WAIT_MS;
    for (;;) {
        int64_t left = deadline - rbx_now_ms();
        if (left <= 0)
            return rbx_fail(err, RBX_ESYSTEM, "the process did not start within %d s",
                            START_WAIT_MS / 1000);
        struct pollfd fd = {.fd = p->sandbox.report_fd, .events = POLLIN};
        if (poll(&fd, 1, (int)left) < 0) {
            if (errno == EINTR)
                continue;
            return rbx_fail(err, RBX_ESYSTEM, "cannot wait for the process: %s", strerror(errno));
        }
        ssize_t n = read(p->sandbox.report_fd, report + got, sizeof report - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0 && got + (size_t)n < sizeof report - 1) {
            got += (size_t)n;
            continue;
        }
        report[got] = 0;
        close_fd(&p->sandbox.report_fd);
        if (got && report[0] == 'E') {
            report[strcspn(report, "\n")] = 0;
            return rbx_fail(err, RBX_EINVAL, "the process could not start: cannot %.400s",
                            report + 1);
        }
        return RBX_OK;
    }
}

/* A hold ended (p->lock held): the pump polls the output again. */
static void end_hold(rbx_process *p, watcher *w)
{
    if (!w->holding)
        return;
    w->holding = false;
    p->holds--;
    uint64_t one = 1;
    (void)!write(p->resume_fd, &one, sizeof one);
}

/* Unlinks and frees the watcher at *at (p->lock held). */
static void drop_watcher(rbx_process *p, watcher **at)
{
    watcher *w = *at;
    end_hold(p, w);
    *at = w->next;
    p->watcher_count--;
    free(w);
}

/* Calls every watcher (under p->lock); a watcher that asks to stop goes,
 * one that asks to hold the output holds it until it resumes. */
static void deliver(rbx_process *p, const rbx_process_event *event)
{
    for (watcher **at = &p->watchers; *at;) {
        watcher *w = *at;
        int answer = w->fn(w->user, event);
        if (answer == RBX_PROCESS_HOLD && !w->holding) {
            w->holding = true;
            p->holds++;
        }
        if (answer != 0 && answer != RBX_PROCESS_HOLD)
            drop_watcher(p, at);
        else
            at = &w->next;
    }
}

/* Reads what is there: false at the stream's end. */
static bool read_output(rbx_process *p, int *fd, rbx_process_event_kind kind, char *buf)
{
    ssize_t n = read(*fd, buf, READ_CHUNK);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (n <= 0) { /* a terminal's master gives EIO once the slave is closed everywhere */
        close_fd(fd);
        return false;
    }
    rbx_process_event event = {.kind = kind, .data = buf, .len = (size_t)n};
    pthread_mutex_lock(&p->lock);
    deliver(p, &event);
    pthread_mutex_unlock(&p->lock);
    return true;
}

/* Until nothing of the sandbox is left: its output to the watchers. The
 * output descriptors close once every process of it has gone (init's
 * exit ends its PID namespace). */
static void pump(rbx_process *p)
{
    char *buf = malloc(READ_CHUNK);
    if (!buf)
        rbx_sandbox_kill(&p->sandbox);
    int *out = p->terminal ? &p->master : &p->sandbox.stdout_fd;
    int *err = &p->sandbox.stderr_fd;
    bool init_alive = true;
    while (buf && (*out >= 0 || *err >= 0 || init_alive)) {
        /* A watcher holds the output while its client does not read: the
         * program blocks on its full pipe. Once its sandbox is gone, what
         * is left in the pipes (a pipe's worth) goes out anyway. */
        pthread_mutex_lock(&p->lock);
        bool held = p->holds > 0 && init_alive;
        bool leave = p->hibernate_asked && init_alive; /* its thread checkpoints it */
        pthread_mutex_unlock(&p->lock);
        if (leave)
            break;
        struct pollfd fds[4] = {{.fd = held ? -1 : *out, .events = POLLIN},
                                {.fd = held ? -1 : *err, .events = POLLIN},
                                {.fd = init_alive ? p->sandbox.pidfd : -1, .events = POLLIN},
                                {.fd = p->resume_fd, .events = POLLIN}};
        if (poll(fds, 4, -1) < 0) {
            if (errno == EINTR)
                continue;
            rbx_sandbox_kill(&p->sandbox);
            break;
        }
        if (fds[0].revents)
            read_output(p, out, p->terminal ? RBX_PROCESS_TERMINAL : RBX_PROCESS_STDOUT, buf);
        if (fds[1].revents)
            read_output(p, err, RBX_PROCESS_STDERR, buf);
        if (fds[2].revents)
            init_alive = false;
        uint64_t resumed;
        if (fds[3].revents)
            (void)!read(p->resume_fd, &resumed, sizeof resumed);
        /* A terminal's master reports POLLHUP, not EOF, while the slave
         * is closed: once init is gone nothing can open it again. */
        if (!init_alive && p->terminal && *out >= 0 && fds[0].revents & POLLHUP &&
            !(fds[0].revents & POLLIN))
            close_fd(out);
    }
    free(buf);
}

/* How the process ended, as its END event says. */
static void fill_end(rbx_process *p, bool reported, const rbx_exit_report *report,
                     rbx_process_event *end)
{
    *end = (rbx_process_event){.kind = RBX_PROCESS_END, .exit_code = -1};
    if (reported && WIFEXITED(report->wait_status)) {
        end->exited = true;
        end->exit_code = WEXITSTATUS(report->wait_status);
    } else if (reported && WIFSIGNALED(report->wait_status)) {
        end->signal = WTERMSIG(report->wait_status);
    } else {
        end->signal = SIGKILL; /* the sandbox was killed before the program ended */
    }
    end->killed = p->kill_asked;
    end->error = p->why_end;
}

static void leave_registry(rbx_process *p)
{
    rbx_processes *processes = p->engine->processes;
    pthread_mutex_lock(&processes->lock);
    for (rbx_process **at = &processes->list; *at; at = &(*at)->next)
        if (*at == p) {
            *at = p->next;
            processes->count--;
            break;
        }
    pthread_cond_broadcast(&processes->changed);
    pthread_mutex_unlock(&processes->lock);
}

/* What the process's sandbox leaves on the host, once it is gone. */
static void tear_down(rbx_process *p)
{
    /* Writers poll the sandbox's pidfd too: closed under their lock. */
    pthread_mutex_lock(&p->write_lock);
    close_fd(&p->input_fd); /* a copy of the sandbox's stdin or of the master */
    rbx_sandbox_close(&p->sandbox);
    pthread_mutex_unlock(&p->write_lock);
    close_fd(&p->program_pidfd);
    rbx_scratch_remove(p->engine, &p->scratch);
    if (p->network)
        rbx_egress_plan_free(&p->egress);
    release_lock(&p->lock_fd); /* the session may be removed now */
}

static void started(rbx_process *p, rbx_status status, const rbx_error *err)
{
    pthread_mutex_lock(&p->lock);
    p->start_status = status;
    if (err)
        p->start_err = *err;
    p->life = status == RBX_OK ? RUNNING : ENDED;
    /* Killed while it started (its session went): now that it runs. */
    if (status == RBX_OK && p->kill_asked)
        rbx_sandbox_kill(&p->sandbox);
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
}

/* --- hibernation (a paused sandbox's, issue 34: hibernation.c) --------------------------- */

/* What one of the ended tree's outputs still holds, to the watchers: its
 * writers are gone, so it ends (EOF, or EIO for a terminal's master);
 * the wait for each read is bounded all the same. */
static void drain(rbx_process *p, int *fd, rbx_process_event_kind kind, char *buf)
{
    struct pollfd ready = {.fd = *fd, .events = POLLIN};
    while (*fd >= 0 && poll(&ready, 1, 1000) > 0 && read_output(p, fd, kind, buf))
        ready.fd = *fd;
}

/* After the dump: the old sandbox reaped, what its outputs still held
 * goes out before the pause's word, and nothing of it is held. */
static void let_go(rbx_process *p)
{
    (void)rbx_sandbox_reap(&p->sandbox, NULL);
    char *buf = malloc(READ_CHUNK);
    if (buf && p->terminal)
        drain(p, &p->master, RBX_PROCESS_TERMINAL, buf);
    if (buf && !p->terminal)
        drain(p, &p->sandbox.stdout_fd, RBX_PROCESS_STDOUT, buf);
    if (buf)
        drain(p, &p->sandbox.stderr_fd, RBX_PROCESS_STDERR, buf);
    free(buf);
    pthread_mutex_lock(&p->write_lock);
    close_fd(&p->input_fd);
    rbx_sandbox_close(&p->sandbox);
    close_fd(&p->master);
    pthread_mutex_unlock(&p->write_lock);
    close_fd(&p->program_pidfd);
}

/* A hibernated process's thread, until it is woken (true: restored, it
 * runs again) or ended (false). Its checkpoint goes either way, but for
 * a runbox that stops (the next one restores it: adopt). */
static bool sleep_until_woken(rbx_process *p)
{
    pthread_mutex_lock(&p->lock);
    while (!p->wake_asked && !p->kill_asked)
        pthread_cond_wait(&p->changed, &p->lock);
    bool wake = !p->kill_asked;
    bool keep = p->kill_asked && p->keep_checkpoint;
    pthread_mutex_unlock(&p->lock);
    rbx_error err = {0};
    rbx_status status = wake ? process_restore(p, &err) : RBX_OK;
    if (status != RBX_OK)
        snprintf(p->end_said, sizeof p->end_said,
                 "the sandbox was resumed, and this process could not be restored: %.300s",
                 err.message);
    char name[48];
    process_checkpoint_name(p->pid, name, sizeof name);
    if (!keep)
        rbx_checkpoint_dir_remove(p->engine, p->session_id, name);
    free(p->checkpoint);
    p->checkpoint = NULL;
    bool running = wake && status == RBX_OK;
    pthread_mutex_lock(&p->lock);
    p->wake_asked = false;
    if (running) /* else it stays HIBERNATED until its end is told */
        p->life = RUNNING;
    if (running && p->kill_asked) /* its session went as it woke */
        rbx_sandbox_kill(&p->sandbox);
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    return running;
}

/* After its pump: where a pause asked, the process goes to disk and its
 * thread sleeps until the resume (true: it runs again, pump on) or its
 * end (false: as a killed process's). A process that cannot go to disk
 * runs on, for the pause to freeze (true). False at once where no
 * hibernation was asked: its sandbox ended. */
static bool hibernation(rbx_process *p)
{
    pthread_mutex_lock(&p->lock);
    bool asked = p->hibernate_asked;
    pthread_mutex_unlock(&p->lock);
    if (!asked)
        return false;
    rbx_error err = {0};
    rbx_status status = process_dump(p, &err);
    if (status == RBX_OK)
        let_go(p);
    if (status != RBX_OK && status != RBX_EINVAL) /* EINVAL: it never could (no criu...) */
        fprintf(stderr, "runbox: process %u of session %s stays in memory: %s\n",
                (unsigned)p->pid, p->session_id, err.message);
    pthread_mutex_lock(&p->lock);
    p->hibernate_asked = false;
    if (status == RBX_OK) {
        p->life = HIBERNATED;
        rbx_process_event event = {.kind = RBX_PROCESS_FROZEN, .on_disk = true};
        deliver(p, &event);
    }
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    return status != RBX_OK || sleep_until_woken(p);
}

/* Starts the sandbox, as the process's thread, and tells the starter. */
static rbx_status begin(rbx_process *p)
{
    rbx_error err = {0};
    p->spec.template_ns = rbx_root_template_ns(p->root);
    rbx_status status = rbx_sandbox_start(&p->spec, &p->sandbox, &err);
    if (p->spec.template_ns >= 0)
        close(p->spec.template_ns);
    p->spec.template_ns = -1;
    close_fd(&p->slave); /* the sandbox has its own copies */
    if (status == RBX_OK) {
        status = await_exec(p, &err);
        pid_t program = status == RBX_OK ? rbx_sandbox_program(&p->sandbox) : -1;
        p->program_pidfd = program > 0 ? (int)syscall(SYS_pidfd_open, program, 0) : -1;
        if (status != RBX_OK) {
            rbx_sandbox_kill(&p->sandbox);
            rbx_sandbox_reap(&p->sandbox, NULL);
        }
    }
    if (status == RBX_OK)
        process_take_input(p);
    started(p, status, status == RBX_OK ? NULL : &err);
    return status;
}

/* The process's thread: starts its sandbox (which dies with this thread
 * if runbox does), tells the starter, pumps its output, takes it to disk
 * and back at a pause, and reports its end. It holds a reference of its
 * own until it is done. */
static void *life_of(void *arg)
{
    rbx_process *p = arg;
    /* One adopted from disk sleeps until its sandbox resumes. */
    if (p->adopted || begin(p) == RBX_OK) {
        if (!p->adopted || sleep_until_woken(p))
            do
                pump(p);
            while (hibernation(p));
        rbx_exit_report report;
        bool reported = rbx_sandbox_reap(&p->sandbox, &report);
        rbx_process_event end;
        pthread_mutex_lock(&p->lock);
        fill_end(p, reported, &report, &end);
        if (p->end_said[0])
            end.error = p->end_said;
        deliver(p, &end);
        p->life = ENDED;
        pthread_cond_broadcast(&p->changed);
        pthread_mutex_unlock(&p->lock);
    }
    tear_down(p); /* before it leaves: removal waits for that, then takes its lock */
    leave_registry(p);
    rbx_processes *processes = p->engine->processes;
    pthread_mutex_lock(&processes->lock);
    processes->threads--;
    pthread_cond_broadcast(&processes->changed);
    pthread_mutex_unlock(&processes->lock);
    process_unref(p);
    return NULL;
}

/* --- starting one --------------------------------------------------------------------------- */

static rbx_process *process_new(rbx_engine *engine, const rbx_process_request *r)
{
    rbx_process *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    atomic_init(&p->refs, 1);
    p->engine = engine;
    snprintf(p->session_id, sizeof p->session_id, "%s", r->session_id);
    p->terminal = r->cols || r->rows;
    p->stdin_open = r->stdin_open;
    p->master = p->slave = p->input_fd = p->program_pidfd = p->lock_fd = -1;
    p->resume_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    p->sandbox.pidfd = p->sandbox.stdin_fd = p->sandbox.stdout_fd = p->sandbox.stderr_fd = -1;
    p->sandbox.report_fd = p->sandbox.status_fd = -1;
    p->sandbox.pid = -1;
    p->sandbox.net = (rbx_net_helper){0};
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->write_lock, NULL);
    pthread_cond_init(&p->changed, NULL);
    p->info.argv = copy_strings(r->argv, r->argc);
    p->info.env = copy_strings(r->env, r->env_count);
    p->info.cwd = r->cwd ? strdup(r->cwd) : NULL;
    p->info.tag = r->tag ? strdup(r->tag) : NULL;
    p->info.terminal = p->terminal;
    p->request = process_request_json(r);
    if (p->resume_fd < 0 || !p->info.argv || !p->info.env || (r->cwd && !p->info.cwd) ||
        (r->tag && !p->info.tag) || !p->request) {
        process_unref(p);
        return NULL;
    }
    return p;
}

/* The session's process of that number (processes->lock held), or NULL. */
static rbx_process *lookup(rbx_processes *processes, const char *session_id, uint32_t pid)
{
    for (rbx_process *p = processes->list; p; p = p->next)
        if (p->pid == pid && !strcmp(p->session_id, session_id))
            return p;
    return NULL;
}

/* Takes a place in the registry (and a number, or the one it had: an
 * adopted process's), within the caps. */
static rbx_status enter_registry(rbx_engine *engine, rbx_process *p, rbx_error *err)
{
    rbx_processes *processes = engine->processes;
    size_t in_session = 0;
    pthread_mutex_lock(&processes->lock);
    for (rbx_process *q = processes->list; q; q = q->next)
        in_session += !strcmp(q->session_id, p->session_id);
    bool being_stopped = false;
    for (stopping *s = processes->stops; s; s = s->next)
        being_stopped |= !s->session_id || !strcmp(s->session_id, p->session_id);
    rbx_status status = RBX_OK;
    /* Registration and a stop of its session exclude each other: a
     * process either is in the registry before the stop kills what is
     * there, or does not start (else it would outlive the stop, which
     * would wait for it forever). */
    if (being_stopped)
        status = rbx_fail(err, RBX_ENOENT,
                          "session %s is being stopped: its processes end, none starts",
                          p->session_id);
    else if (in_session >= RBX_PROCESSES_MAX)
        status = rbx_fail(err, RBX_EBUSY,
                          "session %s runs %d processes already, the most it may: kill one first",
                          p->session_id, RBX_PROCESSES_MAX);
    else if (processes->count >= ENGINE_PROCESSES_MAX)
        status = rbx_fail(err, RBX_EBUSY, "this runbox runs %d processes already, the most it may",
                          ENGINE_PROCESSES_MAX);
    if (status == RBX_OK && p->adopted) {
        if (lookup(processes, p->session_id, p->pid))
            status = rbx_fail(err, RBX_EBUSY, "process %u of session %s is running",
                              (unsigned)p->pid, p->session_id);
        else if (processes->next_pid <= p->pid) /* none new gets its number */
            processes->next_pid = p->pid == UINT32_MAX ? 1 : p->pid + 1;
    } else if (status == RBX_OK) {
        p->pid = processes->next_pid++;
        if (processes->next_pid == 0)
            processes->next_pid = 1;
    }
    if (status == RBX_OK) {
        p->info.pid = p->pid;
        p->next = processes->list;
        processes->list = p;
        processes->count++;
        processes->threads++;
    }
    pthread_mutex_unlock(&processes->lock);
    return status;
}

/* Out of the registry again, for a process whose thread never ran. */
static void unregister(rbx_process *p)
{
    rbx_processes *processes = p->engine->processes;
    leave_registry(p);
    tear_down(p);
    pthread_mutex_lock(&processes->lock);
    processes->threads--;
    pthread_cond_broadcast(&processes->changed);
    pthread_mutex_unlock(&processes->lock);
}

rbx_status rbx_process_start(rbx_engine *engine, const rbx_process_request *request,
                             rbx_process_fn on_event, void *user, rbx_process **process,
                             rbx_error *err)
{
    *process = NULL;
    if (!engine->processes)
        return rbx_fail(err, RBX_ESYSTEM, "out of memory");
    rbx_status status = check_request(engine, request, err);
    if (status != RBX_OK)
        return status;
    rbx_process *p = process_new(engine, request);
    if (!p)
        return rbx_fail(err, RBX_ESYSTEM, "out of memory");
    watcher *first = on_event ? calloc(1, sizeof *first) : NULL;
    if (on_event && !first) {
        process_unref(p);
        return rbx_fail(err, RBX_ESYSTEM, "out of memory");
    }
    if (first) {
        *first = (watcher){.id = ++p->next_watch, .fn = on_event, .user = user};
        p->watchers = first;
        p->watcher_count = 1;
    }
    status = enter_registry(engine, p, err);
    if (status != RBX_OK) {
        process_unref(p);
        return status;
    }
    status = prepare(engine, p, request, err);
    pthread_t thread;
    atomic_fetch_add(&p->refs, 1); /* the thread's */
    if (status == RBX_OK && pthread_create(&thread, NULL, life_of, p) != 0)
        status = rbx_fail(err, RBX_ESYSTEM, "cannot start the process's thread");
    if (status != RBX_OK) {
        atomic_fetch_sub(&p->refs, 1);
        unregister(p);
        process_unref(p);
        return status;
    }
    pthread_detach(thread);
    pthread_mutex_lock(&p->lock);
    while (p->life == STARTING)
        pthread_cond_wait(&p->changed, &p->lock);
    status = p->start_status;
    if (status != RBX_OK)
        *err = p->start_err;
    pthread_mutex_unlock(&p->lock);
    if (status != RBX_OK) {
        process_unref(p);
        return status;
    }
    *process = p;
    return RBX_OK;
}

/* --- a running one ---------------------------------------------------------------------------- */

rbx_status rbx_process_find(rbx_engine *engine, const char *session_id, uint32_t pid,
                            rbx_process **process, rbx_error *err)
{
    *process = NULL;
    rbx_processes *processes = engine->processes;
    if (processes && session_id) {
        pthread_mutex_lock(&processes->lock);
        if ((*process = lookup(processes, session_id, pid)))
            atomic_fetch_add(&(*process)->refs, 1);
        pthread_mutex_unlock(&processes->lock);
    }
    if (*process) {
        pthread_mutex_lock(&(*process)->lock);
        bool alive = (*process)->life == RUNNING || (*process)->life == HIBERNATED;
        pthread_mutex_unlock(&(*process)->lock);
        if (alive)
            return RBX_OK;
        process_unref(*process);
        *process = NULL;
    }
    return rbx_fail(err, RBX_ENOENT, "process with pid %u not found", (unsigned)pid);
}

/* Why it is not running (p->life is not RUNNING). */
static rbx_status ended(const rbx_process *p, rbx_error *err)
{
    if (p->life == HIBERNATED)
        return rbx_fail(err, RBX_EBUSY,
                        "process with pid %u is hibernated with its paused sandbox: resume the "
                        "sandbox first",
                        (unsigned)p->pid);
    return rbx_fail(err, RBX_ENOENT, "process with pid %u has ended", (unsigned)p->pid);
}

rbx_status rbx_process_watch(rbx_process *p, rbx_process_fn on_event, void *user, uint64_t *watch,
                             rbx_error *err)
{
    watcher *w = calloc(1, sizeof *w);
    if (!w)
        return rbx_fail(err, RBX_ESYSTEM, "out of memory");
    rbx_status status = RBX_OK;
    pthread_mutex_lock(&p->lock);
    if (p->life != RUNNING)
        status = ended(p, err);
    else if (p->watcher_count >= WATCHERS_MAX)
        status = rbx_fail(err, RBX_EBUSY, "process %u has %d watchers already, the most it may",
                          (unsigned)p->pid, WATCHERS_MAX);
    if (status == RBX_OK) {
        *w = (watcher){.id = ++p->next_watch, .fn = on_event, .user = user, .next = p->watchers};
        p->watchers = w;
        p->watcher_count++;
        *watch = w->id;
    }
    pthread_mutex_unlock(&p->lock);
    if (status != RBX_OK)
        free(w);
    return status;
}

void rbx_process_unwatch(rbx_process *p, uint64_t watch)
{
    pthread_mutex_lock(&p->lock);
    for (watcher **at = &p->watchers; *at; at = &(*at)->next)
        if ((*at)->id == watch) {
            drop_watcher(p, at);
            break;
        }
    pthread_mutex_unlock(&p->lock);
}

void rbx_process_resume(rbx_process *p, uint64_t watch)
{
    pthread_mutex_lock(&p->lock);
    for (watcher *w = p->watchers; w; w = w->next)
        if (w->id == watch)
            end_hold(p, w);
    pthread_mutex_unlock(&p->lock);
}

static bool is_running(rbx_process *p)
{
    pthread_mutex_lock(&p->lock);
    bool running = p->life == RUNNING;
    pthread_mutex_unlock(&p->lock);
    return running;
}

/* ended()'s answer, under p->lock. */
static rbx_status not_running(rbx_process *p, rbx_error *err)
{
    pthread_mutex_lock(&p->lock);
    rbx_status status = ended(p, err);
    pthread_mutex_unlock(&p->lock);
    return status;
}

rbx_status rbx_process_write(rbx_process *p, const void *data, size_t len, rbx_error *err)
{
    rbx_status status = RBX_OK;
    pthread_mutex_lock(&p->write_lock);
    if (!is_running(p))
        status = not_running(p, err);
    else if (p->input_fd < 0)
        status = rbx_fail(err, RBX_EINVAL,
                          p->stdin_open ? "the process's stdin is closed"
                                        : "the process was started without stdin");
    int64_t deadline = rbx_now_ms() + WRITE_WAIT_MS;
    const char *at = data;
    while (status == RBX_OK && len) {
        ssize_t n = rbx_write_nosignal(p->input_fd, at, len); /* both non-blocking */
        if (n > 0) {
            at += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            status = rbx_fail(err, RBX_EINVAL, "the process does not take input any more: %s",
                              strerror(errno));
            break;
        }
        int64_t left = deadline - rbx_now_ms();
        struct pollfd fds[2] = {{.fd = p->input_fd, .events = POLLOUT},
                                {.fd = p->sandbox.pidfd, .events = POLLIN}};
        if (left <= 0 || (poll(fds, 2, (int)left) > 0 && fds[1].revents))
            status = left <= 0 ? rbx_fail(err, RBX_EBUSY,
                                          "the process did not read its input within %d s",
                                          WRITE_WAIT_MS / 1000)
                               : ended(p, err);
    }
    pthread_mutex_unlock(&p->write_lock);
    return status;
}

rbx_status rbx_process_close_stdin(rbx_process *p, rbx_error *err)
{
    rbx_status status = RBX_OK;
    pthread_mutex_lock(&p->write_lock);
    if (!is_running(p))
        status = not_running(p, err);
    else if (p->terminal)
        status = rbx_fail(err, RBX_EINVAL,
                          "the process has a terminal, not a stdin to close: send ^D (0x04)");
    else
        close_fd(&p->input_fd); /* EOF for the program */
    pthread_mutex_unlock(&p->write_lock);
    return status;
}

rbx_status rbx_process_signal(rbx_process *p, int sig, rbx_error *err)
{
    if (sig != SIGKILL && sig != SIGTERM && sig != SIGINT && sig != SIGHUP && sig != SIGQUIT &&
        sig != SIGUSR1 && sig != SIGUSR2)
        return rbx_fail(err, RBX_EINVAL,
                        "signal %d cannot be sent: SIGKILL, SIGTERM, SIGINT, SIGHUP, SIGQUIT, "
                        "SIGUSR1 or SIGUSR2",
                        sig);
    rbx_status status = RBX_OK;
    pthread_mutex_lock(&p->lock);
    if (p->life == HIBERNATED && sig == SIGKILL) {
        p->kill_asked = true; /* its thread forgets the checkpoint and tells its end */
        pthread_cond_broadcast(&p->changed);
    } else if (p->life != RUNNING) {
        status = ended(p, err);
    } else if (sig == SIGKILL || p->program_pidfd < 0) {
        /* Every process of it: killing init ends its PID namespace. */
        p->kill_asked = true;
        rbx_sandbox_kill(&p->sandbox);
    } else if (syscall(SYS_pidfd_send_signal, p->program_pidfd, sig, NULL, 0) != 0 &&
               errno != ESRCH) {
        status = rbx_fail(err, RBX_ESYSTEM, "cannot signal process %u: %s", (unsigned)p->pid,
                          strerror(errno));
    }
    pthread_mutex_unlock(&p->lock);
    /* Killed means gone when this returns: its place under the cap is
     * free and it is no longer listed. */
    if (status == RBX_OK && sig == SIGKILL)
        rbx_process_wait(p, KILL_WAIT_S);
    return status;
}

rbx_status rbx_process_resize(rbx_process *p, uint16_t cols, uint16_t rows, rbx_error *err)
{
    if (cols < 1 || rows < 1 || cols > RBX_PROCESS_TERMINAL_MAX || rows > RBX_PROCESS_TERMINAL_MAX)
        return rbx_fail(err, RBX_EINVAL, "a terminal has 1 to %d columns and rows",
                        RBX_PROCESS_TERMINAL_MAX);
    rbx_status status = RBX_OK;
    pthread_mutex_lock(&p->write_lock);
    struct winsize size = {.ws_row = rows, .ws_col = cols};
    if (!is_running(p))
        status = not_running(p, err);
    else if (!p->terminal || p->input_fd < 0)
        status =
            rbx_fail(err, RBX_EINVAL, "process %u has no terminal to resize", (unsigned)p->pid);
    else if (ioctl(p->input_fd, TIOCSWINSZ, &size) != 0) /* the kernel sends SIGWINCH */
        status = rbx_fail(err, RBX_ESYSTEM, "cannot resize the terminal: %s", strerror(errno));
    pthread_mutex_unlock(&p->write_lock);
    return status;
}

bool rbx_process_wait(rbx_process *p, double timeout_s)
{
    int64_t deadline = rbx_now_ms() + (int64_t)(timeout_s * 1000);
    pthread_mutex_lock(&p->lock);
    while (p->life != ENDED) {
        if (timeout_s < 0) {
            pthread_cond_wait(&p->changed, &p->lock);
            continue;
        }
        int64_t left = deadline - rbx_now_ms();
        if (left <= 0)
            break;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += left / 1000;
        until.tv_nsec += (left % 1000) * 1000000;
        until.tv_sec += until.tv_nsec / 1000000000;
        until.tv_nsec %= 1000000000;
        pthread_cond_timedwait(&p->changed, &p->lock, &until);
    }
    bool done = p->life == ENDED;
    pthread_mutex_unlock(&p->lock);
    return done;
}

rbx_status rbx_process_list(rbx_engine *engine, const char *session_id, rbx_process_info **infos,
                            size_t *count, rbx_error *err)
{
    *infos = NULL;
    *count = 0;
    rbx_processes *processes = engine->processes;
    if (!processes)
        return RBX_OK;
    pthread_mutex_lock(&processes->lock);
    rbx_process_info *list = calloc(processes->count + 1, sizeof *list);
    size_t n = 0;
    bool ok = list != NULL;
    for (rbx_process *p = processes->list; ok && p; p = p->next) {
        if (strcmp(p->session_id, session_id))
            continue;
        pthread_mutex_lock(&p->lock);
        bool alive = p->life == RUNNING || p->life == HIBERNATED;
        pthread_mutex_unlock(&p->lock);
        if (alive && !(ok = info_copy(&list[n], &p->info)))
            break;
        n += alive;
    }
    pthread_mutex_unlock(&processes->lock);
    if (!ok) {
        rbx_process_infos_free(list, n);
        return rbx_fail(err, RBX_ESYSTEM, "out of memory");
    }
    /* The registry is newest first: by number for the caller. */
    for (size_t i = 0; i < n / 2; i++) {
        rbx_process_info t = list[i];
        list[i] = list[n - 1 - i];
        list[n - 1 - i] = t;
    }
    *infos = list;
    *count = n;
    return RBX_OK;
}

void rbx_process_infos_free(rbx_process_info *infos, size_t count)
{
    for (size_t i = 0; infos && i < count; i++)
        info_clear(&infos[i]);
    free(infos);
}

/* --- ending them ------------------------------------------------------------------------------ */

/* Kills the processes the filter picks (session NULL: all) and waits
 * until they have left the registry. keep: runbox stops, and the next
 * one restores what is on disk (a paused sandbox's), which stays. */
static size_t stop_where(rbx_engine *engine, const char *session_id, const char *why, bool keep)
{
    rbx_processes *processes = engine->processes;
    if (!processes)
        return 0;
    size_t n = 0;
    stopping mine = {.session_id = session_id};
    pthread_mutex_lock(&processes->lock);
    mine.next = processes->stops;
    processes->stops = &mine;
    for (rbx_process *p = processes->list; p; p = p->next) {
        if (session_id && strcmp(p->session_id, session_id))
            continue;
        pthread_mutex_lock(&p->lock);
        p->kill_asked = true;
        p->keep_checkpoint = keep;
        p->why_end = why;
        if (p->life == RUNNING)
            rbx_sandbox_kill(&p->sandbox);
        pthread_cond_broadcast(&p->changed); /* a hibernated one's thread ends it */
        pthread_mutex_unlock(&p->lock);
        n++;
    }
    for (;;) {
        bool left = false;
        for (rbx_process *p = processes->list; p && !left; p = p->next)
            left = !session_id || !strcmp(p->session_id, session_id);
        if (!left)
            break;
        pthread_cond_wait(&processes->changed, &processes->lock);
    }
    for (stopping **at = &processes->stops; *at; at = &(*at)->next)
        if (*at == &mine) {
            *at = mine.next;
            break;
        }
    pthread_mutex_unlock(&processes->lock);
    return n;
}

void rbx_processes_count(rbx_engine *engine, size_t *running, size_t *frozen,
                         size_t *hibernated)
{
    rbx_processes *processes = engine->processes;
    *running = *frozen = *hibernated = 0;
    if (!processes)
        return;
    pthread_mutex_lock(&processes->lock);
    for (rbx_process *p = processes->list; p; p = p->next) {
        pthread_mutex_lock(&p->lock);
        bool asleep = p->life == HIBERNATED;
        bool is_frozen = p->life == RUNNING && rbx_cgroup_frozen(p->sandbox.cgroup);
        pthread_mutex_unlock(&p->lock);
        *(asleep ? hibernated : is_frozen ? frozen : running) += 1;
    }
    pthread_mutex_unlock(&processes->lock);
}

/* --- adopting what a runbox before this one left on disk ------------------------------------ */

/* Puts one process found on disk in the registry, hibernated, with its
 * thread sleeping until the resume wakes it; else why not. */
static rbx_status adopt(rbx_engine *engine, const char *session_id, int session, uint32_t pid,
                        const char *name, rbx_error *err)
{
    int dir = openat(session, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    json_t *record = dir >= 0 ? rbx_checkpoint_record_read(dir) : NULL;
    if (dir >= 0)
        close(dir);
    const char **lists[3] = {NULL, NULL, NULL};
    rbx_process_request r;
    rbx_status status = RBX_OK;
    if (!process_record_request(record, session_id, pid, &r, lists))
        status = rbx_fail(err, RBX_EINVAL, "its record is missing or damaged, or another's");
    if (status == RBX_OK)
        status = check_request(engine, &r, err);
    rbx_process *p = status == RBX_OK ? process_new(engine, &r) : NULL;
    if (status == RBX_OK && !p)
        status = rbx_fail(err, RBX_ESYSTEM, "out of memory");
    if (p) {
        p->adopted = true;
        p->life = HIBERNATED;
        p->pid = pid;
        if (!process_record_take(p, record))
            status = rbx_fail(err, RBX_EINVAL, "its record is damaged");
    }
    bool registered =
        status == RBX_OK && (status = enter_registry(engine, p, err)) == RBX_OK;
    if (status == RBX_OK)
        status = prepare(engine, p, &r, err);
    if (status == RBX_OK) {
        json_t *then = json_object_get(record, "ran_on"), *now = process_ran_on(p);
        if (!json_equal(then, now))
            status = rbx_fail(err, RBX_EINVAL,
                              "it ran on another image or host kernel than this runbox has");
        json_decref(now);
    }
    pthread_t thread;
    if (status == RBX_OK) {
        atomic_fetch_add(&p->refs, 1); /* the thread's */
        if (pthread_create(&thread, NULL, life_of, p) != 0) {
            atomic_fetch_sub(&p->refs, 1);
            status = rbx_fail(err, RBX_ESYSTEM, "cannot start the process's thread");
        } else {
            pthread_detach(thread);
        }
    }
    if (status != RBX_OK && registered)
        unregister(p);
    if (p)
        process_unref(p);
    for (size_t i = 0; i < 3; i++)
        free(lists[i]);
    json_decref(record);
    return status;
}

static bool registered(rbx_processes *processes, const char *session_id, uint32_t pid)
{
    pthread_mutex_lock(&processes->lock);
    bool found = lookup(processes, session_id, pid) != NULL;
    pthread_mutex_unlock(&processes->lock);
    return found;
}

/* A runbox before this one stopped while the session's processes were on
 * disk (its sandbox paused): each comes back into the registry,
 * hibernated, for the resume that follows to wake. One that cannot (its
 * record damaged or another's, another image or host kernel) is
 * forgotten, and said so on stderr. */
static void adopt_session(rbx_engine *engine, const char *session_id)
{
    if (!rbx_hibernation_enabled(engine))
        return;
    int session = rbx_checkpoint_session_open(engine, session_id);
    int fd = session >= 0 ? openat(session, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d && fd >= 0)
        close(fd);
    uint32_t found[RBX_PROCESSES_MAX];
    size_t n = 0;
    for (struct dirent *e; d && n < RBX_PROCESSES_MAX && (e = readdir(d));) {
        char check[48];
        unsigned pid;
        if (sscanf(e->d_name, "hibernated-process-%u", &pid) != 1 || pid == 0)
            continue;
        process_checkpoint_name(pid, check, sizeof check); /* the name, exactly */
        if (!strcmp(check, e->d_name) && !registered(engine->processes, session_id, pid))
            found[n++] = pid;
    }
    if (d)
        closedir(d);
    for (size_t i = 0; i < n; i++) {
        char name[48];
        process_checkpoint_name(found[i], name, sizeof name);
        rbx_error err = {0};
        if (adopt(engine, session_id, session, found[i], name, &err) != RBX_OK) {
            fprintf(stderr, "runbox: process %u of session %s is not restored: %s\n",
                    (unsigned)found[i], session_id, err.message);
            rbx_checkpoint_dir_remove(engine, session_id, name);
        }
    }
    if (session >= 0)
        close(session);
}

/* A pause, first for each running process (p->lock held): its thread is
 * asked to take it to disk; all of the session's go at once. */
static void ask_pause(rbx_process *p)
{
    p->hibernate_asked = true;
    uint64_t one = 1;
    (void)!write(p->resume_fd, &one, sizeof one); /* its pump leaves */
}

/* Then: on disk, or else frozen in memory, or else stopped. */
static bool finish_pause(rbx_process *p)
{
    /* Its thread answers, or it ends (its pump had left for that). */
    while (p->hibernate_asked && p->life == RUNNING)
        pthread_cond_wait(&p->changed, &p->lock);
    p->hibernate_asked = false;
    if (p->life == HIBERNATED)
        return true;
    if (p->life != RUNNING)
        return false;
    errno = ENOTSUP;
    if (p->sandbox.cgroup && rbx_cgroup_freeze(p->sandbox.cgroup, true) == 0) {
        rbx_process_event event = {.kind = RBX_PROCESS_FROZEN};
        deliver(p, &event);
        return true;
    }
    p->kill_asked = true;
    p->why_end = errno == ETIMEDOUT ? "the sandbox was paused, and not every process of this one "
                                      "froze within 10 seconds: stopped"
                                    : "the sandbox was paused, and this host can neither "
                                      "checkpoint nor freeze its processes: stopped";
    rbx_sandbox_kill(&p->sandbox);
    return false;
}

/* A resume (p->lock held): a hibernated one's thread restores it, all of
 * the session's at once (asked first, waited for then); a frozen one
 * thaws. */
static bool finish_resume(rbx_process *p, bool was_hibernated)
{
    if (was_hibernated) {
        while (p->life == HIBERNATED)
            pthread_cond_wait(&p->changed, &p->lock);
        return p->life == RUNNING;
    }
    return p->life == RUNNING && p->sandbox.cgroup &&
           rbx_cgroup_freeze(p->sandbox.cgroup, false) == 0;
}

size_t rbx_processes_pause_session(rbx_engine *engine, const char *session_id, bool paused)
{
    rbx_processes *processes = engine->processes;
    if (!processes)
        return 0;
    if (!paused)
        adopt_session(engine, session_id);
    /* Picked under the registry's lock, each with a reference; paused
     * outside it, since a checkpoint or a freeze waits for every task of
     * the sandbox. */
    rbx_process **picked = calloc(ENGINE_PROCESSES_MAX, sizeof *picked);
    bool *asked = calloc(ENGINE_PROCESSES_MAX, sizeof *asked);
    size_t n = 0, done = 0;
    pthread_mutex_lock(&processes->lock);
    for (rbx_process *p = processes->list; picked && asked && p && n < ENGINE_PROCESSES_MAX;
         p = p->next)
        if (!strcmp(p->session_id, session_id)) {
            atomic_fetch_add(&p->refs, 1);
            picked[n++] = p;
        }
    pthread_mutex_unlock(&processes->lock);
    /* Each process's thread checkpoints or restores its own: asked of all
     * first, they do it side by side. */
    for (size_t i = 0; i < n; i++) {
        rbx_process *p = picked[i];
        pthread_mutex_lock(&p->lock);
        while (p->life == STARTING) /* its start ends within START_WAIT_MS */
            pthread_cond_wait(&p->changed, &p->lock);
        if (!p->kill_asked && paused && p->life == RUNNING) {
            ask_pause(p);
            asked[i] = true;
        } else if (!p->kill_asked && !paused && p->life == HIBERNATED) {
            p->wake_asked = true;
            pthread_cond_broadcast(&p->changed);
            asked[i] = true;
        }
        pthread_mutex_unlock(&p->lock);
    }
    for (size_t i = 0; i < n; i++) {
        rbx_process *p = picked[i];
        pthread_mutex_lock(&p->lock);
        if (paused ? asked[i] && finish_pause(p)
                   : (asked[i] || !p->kill_asked) && finish_resume(p, asked[i]))
            done++;
        pthread_mutex_unlock(&p->lock);
        process_unref(p);
    }
    free(asked);
    free(picked);
    return done;
}

size_t rbx_processes_stop_session(rbx_engine *engine, const char *session_id)
{
    return stop_where(engine, session_id, "the sandbox was removed", false);
}

void rbx_processes_free(rbx_engine *engine)
{
    rbx_processes *processes = engine->processes;
    if (!processes)
        return;
    stop_where(engine, NULL, "runbox stopped", true);
    pthread_mutex_lock(&processes->lock);
    while (processes->threads)
        pthread_cond_wait(&processes->changed, &processes->lock);
    pthread_mutex_unlock(&processes->lock);
    pthread_mutex_destroy(&processes->lock);
    pthread_cond_destroy(&processes->changed);
    free(processes);
    engine->processes = NULL;
}
