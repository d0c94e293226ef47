/* The worker process of an execution, seen from the server (worker.c is
 * the other side): start it with the request, turn its messages into the
 * execution's events and outcome, and wait for it. */
#include "http/http.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* The process's arguments as it was started, NUL-separated. */
static char *read_cmdline(size_t *len)
{
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    size_t cap = 4096;
    char *text = fd >= 0 ? malloc(cap) : NULL;
    *len = 0;
    for (ssize_t n = 1; text && n > 0;) {
        if (*len == cap) {
            char *grown = realloc(text, cap *= 2);
            if (!grown) {
                free(text);
                text = NULL;
                break;
            }
            text = grown;
        }
        n = read(fd, text + *len, cap - *len);
        if (n < 0 && errno == EINTR)
            n = 1;
        else if (n > 0)
            *len += (size_t)n;
    }
    if (fd >= 0)
        close(fd);
    return text;
}

int http_launch_prepare(http_server *server, int serve_argc)
{
    size_t len;
    char *text = read_cmdline(&len);
    size_t total = 0;
    for (size_t i = 0; text && i < len; i++)
        total += text[i] == 0;
    if (!text || total <= (size_t)serve_argc) {
        free(text);
        return -1;
    }
    /* The global options before "serve" (state directory, policy...), so
     * that the worker's engine is configured like the server's. */
    size_t prefix = total - (size_t)serve_argc, n = 0;
    char **argv = calloc(prefix + 4, sizeof *argv);
    size_t envc = 0;
    while (environ[envc])
        envc++;
    char **envp = calloc(envc + 1, sizeof *envp);
    if (!argv || !envp) {
        free(argv);
        free(envp);
        free(text);
        return -1;
    }
    for (char *arg = text; n < prefix; arg += strlen(arg) + 1)
        argv[n++] = arg;
    argv[n++] = "serve";
    argv[n++] = "--worker"; /* then the mode, filled in per execution */
    /* The token is the server's business only. */
    for (size_t i = 0, kept = 0; i < envc; i++)
        if (strncmp(environ[i], "RUNBOX_TOKEN=", 13) != 0)
            envp[kept++] = environ[i];
    server->worker_argv = argv;
    server->worker_envp = envp;
    return 0;
}

void http_launch_release(http_server *server)
{
    /* argv[0] is where the cmdline text they point into starts. */
    if (server->worker_argv)
        free(server->worker_argv[0]);
    free(server->worker_argv);
    free(server->worker_envp);
}

/* The request for the worker, in a memfd: no pipe to fill, no SIGPIPE. */
static int request_fd(const execution *ex)
{
    char *json = json_dumps(ex->form.body, JSON_COMPACT);
    int fd = json ? memfd_create("runbox-request", MFD_CLOEXEC) : -1;
    size_t len = json ? strlen(json) : 0, done = 0;
    while (fd >= 0 && done < len) {
        ssize_t n = write(fd, json + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close(fd);
            fd = -1;
        } else {
            done += (size_t)n;
        }
    }
    free(json);
    if (fd >= 0)
        lseek(fd, 0, SEEK_SET);
    return fd;
}

static int spawn_process(const execution *ex, int request, int channel, int cancel, pid_t *pid)
{
    const http_server *server = ex->server;
    size_t n = 0;
    while (server->worker_argv[n])
        n++;
    char **argv = calloc(n + 2, sizeof *argv);
    if (!argv)
        return ENOMEM;
    memcpy(argv, server->worker_argv, n * sizeof *argv);
    argv[n] = ex->format == STREAM_NONE ? "plain" : "stream";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, request, 0);
    posix_spawn_file_actions_adddup2(&actions, channel, 1);
    posix_spawn_file_actions_adddup2(&actions, cancel, HTTP_WORKER_CANCEL_FD);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    /* A group of its own: Ctrl-C at the server's terminal is the server's
     * to handle (with its grace period), not the workers'. */
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    int rc = posix_spawn(pid, "/proc/self/exe", &actions, &attr, argv, server->worker_envp);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    free(argv);
    return rc;
}

/* Starts the worker: fd 0 is the request, fd 1 the socket it writes its
 * messages to, and the cancel fd a pipe that the server closes to cancel
 * (and that closes by itself if the server dies). */
static pid_t spawn_worker(execution *ex, int *messages)
{
    int request = request_fd(ex), channel[2] = {-1, -1}, cancel[2] = {-1, -1};
    pid_t pid = -1;
    int rc = request < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel) != 0 ||
                     pipe2(cancel, O_CLOEXEC) != 0
                 ? errno
                 : spawn_process(ex, request, channel[1], cancel[0], &pid);
    int fds[] = {request, channel[1], cancel[0]};
    for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (rc != 0) {
        if (channel[0] >= 0)
            close(channel[0]);
        if (cancel[1] >= 0)
            close(cancel[1]);
        errno = rc;
        return -1;
    }
    *messages = channel[0];
    atomic_store(&ex->cancel_fd, cancel[1]);
    /* Cancelled while it started: the cancel found no pipe to close. */
    if (atomic_load(&ex->cancelled) != CANCEL_NONE) {
        int fd = atomic_exchange(&ex->cancel_fd, -1);
        if (fd >= 0)
            close(fd);
    }
    return pid;
}

static void count_result(metrics *m, const char *json)
{
    json_t *result = json_loads(json, 0, NULL);
    const char *language = json_string_value(json_object_get(result, "language"));
    const char *error_type = json_string_value(json_object_get(result, "error_type"));
    json_int_t duration_ms = json_integer_value(json_object_get(result, "duration_ms"));
    if (result)
        http_metrics_execution(m, language ? language : "unknown", error_type ? error_type : "ok",
                               duration_ms);
    json_decref(result);
}

/* {"status": rbx_status, "message": ...}: the engine refused the request. */
static void take_error(execution *ex, const char *json)
{
    json_t *report = json_loads(json, 0, NULL);
    const char *message = json_string_value(json_object_get(report, "message"));
    rbx_error err = {.status = (rbx_status)json_integer_value(json_object_get(report, "status"))};
    snprintf(err.message, sizeof err.message, "%s", message ? message : "the engine failed");
    if (err.status == RBX_OK)
        err.status = RBX_ESYSTEM;
    http_error_from_engine(&ex->error, &err);
    json_decref(report);
}

static void take_message(execution *ex, const char *line)
{
    const char *json = line + 1;
    if ((line[0] == 'o' || line[0] == 'e') && ex->format != STREAM_NONE) {
        size_t len;
        char *frame =
            http_stream_frame(ex->format, line[0] == 'o' ? "stdout" : "stderr", json, &len);
        if (frame)
            http_queue_push(&ex->events, frame, len, http_execution_stop_waiting, ex);
        free(frame);
    } else if (line[0] == 'r') {
        free(ex->result);
        ex->result = strdup(json);
        ex->has_result = ex->result != NULL;
        count_result(ex->server->metrics, json);
    } else if (line[0] == 'x') {
        take_error(ex, json);
    }
}

/* Reads the worker's messages, one per line, until it is gone. While the
 * client is slow, pushing an event waits, and so does the worker. */
static void pump(execution *ex, int fd)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < 65536) {
            size_t bigger = cap ? cap * 2 : 131072;
            char *grown = realloc(buf, bigger);
            if (!grown)
                break; /* closing the socket makes the worker cancel */
            buf = grown;
            cap = bigger;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        size_t start = 0;
        for (char *end; (end = memchr(buf + start, '\n', len - start));
             start = (size_t)(end - buf) + 1) {
            *end = 0;
            take_message(ex, buf + start);
        }
        memmove(buf, buf + start, len - start);
        len -= start;
    }
    free(buf);
}

void http_launch(execution *ex)
{
    int messages;
    pid_t pid = spawn_worker(ex, &messages);
    if (pid < 0) {
        http_error_set(&ex->error, MHD_HTTP_INTERNAL_SERVER_ERROR, "system_error",
                       "cannot start a worker process: %s", strerror(errno));
        return;
    }
    pump(ex, messages);
    close(messages);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        continue;
    int fd = atomic_exchange(&ex->cancel_fd, -1);
    if (fd >= 0)
        close(fd);
    if (!ex->has_result && !ex->error.code)
        http_error_set(&ex->error, MHD_HTTP_INTERNAL_SERVER_ERROR, "system_error",
                       "the execution's worker process ended without a result (%s %d)",
                       WIFSIGNALED(status) ? "signal" : "exit status",
                       WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}
