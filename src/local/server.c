/* The local socket's server (see local.h). */
#include "cli/cli.h"
#include "local/local.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 256

struct local_server {
    rbx_engine *engine;
    int listen_fd;
    int stop[2];
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a connection ended, or a stop came (monotonic clock) */
    int clients[MAX_CLIENTS]; /* -1: a free slot */
    size_t active;
    int64_t idle_since_ms;
    bool stoppable, stop_asked;
    /* No call is taken any more: each connection is answered "closing". */
    bool closing;
    json_t *options; /* what "ping" answers as "options", or NULL */
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const struct {
    rbx_status status;
    const char *name;
} status_names[] = {{RBX_EINVAL, "invalid"},
                    {RBX_ENOENT, "not_found"},
                    {RBX_EBUSY, "busy"},
                    {RBX_ENOSPC, "no_space"},
                    {RBX_ESYSTEM, "system"}};

const char *local_status_name(rbx_status status)
{
    for (size_t i = 0; i < sizeof status_names / sizeof *status_names; i++)
        if (status_names[i].status == status)
            return status_names[i].name;
    return "system";
}

rbx_status local_status_from_name(const char *name)
{
    for (size_t i = 0; name && i < sizeof status_names / sizeof *status_names; i++)
        if (!strcmp(status_names[i].name, name))
            return status_names[i].status;
    return RBX_ESYSTEM;
}

/* The address of <state_dir>/<name>. A path too long for a Unix socket's
 * address goes through a descriptor of the directory instead
 * (/proc/self/fd/N/<name>): *dir_fd is then open until the caller has
 * bound or connected, and closes it; else it is -1. */
static int socket_address(const char *state_dir, const char *name, struct sockaddr_un *addr,
                          int *dir_fd)
{
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    *dir_fd = -1;
    int n = snprintf(addr->sun_path, sizeof addr->sun_path, "%s/%s", state_dir, name);
    if (n >= 0 && (size_t)n < sizeof addr->sun_path)
        return 0;
    *dir_fd = open(state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*dir_fd < 0)
        return -1;
    n = snprintf(addr->sun_path, sizeof addr->sun_path, "/proc/self/fd/%d/%s", *dir_fd, name);
    if (n < 0 || (size_t)n >= sizeof addr->sun_path) {
        close(*dir_fd);
        *dir_fd = -1;
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int local_connect(const char *state_dir, const char *name)
{
    struct sockaddr_un addr;
    int dir_fd;
    if (socket_address(state_dir, name, &addr, &dir_fd) != 0)
        return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int error = 0;
    if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        error = errno;
        close(fd);
        fd = -1;
    } else if (fd < 0) {
        error = errno;
    }
    if (dir_fd >= 0)
        close(dir_fd);
    errno = error;
    return fd;
}

/* Binds addr (mode 0600) and listens; -1 with errno. */
static int bind_owner_only(const struct sockaddr_un *addr, char *why, size_t why_size)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, why_size, "cannot create a socket: %s", strerror(errno));
        return -1;
    }
    if (bind(fd, (const struct sockaddr *)addr, sizeof *addr) != 0) {
        int error = errno;
        close(fd);
        snprintf(why, why_size, "cannot bind %s: %s", addr->sun_path, strerror(error));
        errno = error;
        return -1;
    }
    /* Only the owner may connect (the peer's uid is checked too, for the
     * moment before this). */
    if (chmod(addr->sun_path, 0600) != 0 || listen(fd, 64) != 0) {
        snprintf(why, why_size, "cannot listen on %s: %s", addr->sun_path, strerror(errno));
        close(fd);
        unlink(addr->sun_path);
        errno = EPERM; /* not EADDRINUSE: the caller does not try again */
        return -1;
    }
    return fd;
}

int local_listen_at(const char *state_dir, const char *name, int *owner_pid, char *why,
                    size_t why_size)
{
    *owner_pid = 0;
    struct sockaddr_un addr;
    int dir_fd;
    if (socket_address(state_dir, name, &addr, &dir_fd) != 0) {
        snprintf(why, why_size, "cannot open the state directory %s for its socket: %s",
                 state_dir, strerror(errno));
        return -1;
    }
    int fd = -1;
    for (int attempt = 0; attempt < 2 && fd < 0; attempt++) {
        fd = bind_owner_only(&addr, why, why_size);
        if (fd >= 0 || errno != EADDRINUSE)
            break;
        /* Taken: by a live runbox (it answers), or left by one that died. */
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool live = probe >= 0 && connect(probe, (struct sockaddr *)&addr, sizeof addr) == 0;
        if (live) {
            struct ucred cred;
            socklen_t len = sizeof cred;
            if (getsockopt(probe, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
                *owner_pid = cred.pid;
        }
        if (probe >= 0)
            close(probe);
        if (live) {
            snprintf(why, why_size, "%s/%s is served by another runbox process", state_dir, name);
            break;
        }
        unlink(addr.sun_path);
        snprintf(why, why_size, "cannot claim %s/%s", state_dir, name);
    }
    if (dir_fd >= 0)
        close(dir_fd);
    return fd;
}

int local_listen(const char *state_dir, int *owner_pid, char *why, size_t why_size)
{
    return local_listen_at(state_dir, LOCAL_SOCKET, owner_pid, why, why_size);
}

/* --- one connection -------------------------------------------------------------------- */

typedef struct client {
    local_server *server;
    int fd;
    size_t slot;
} client;

static int send_line(int fd, const char *text)
{
    size_t len = strlen(text);
    struct iovec parts[2] = {{(void *)text, len}, {"\n", 1}};
    struct msghdr msg = {.msg_iov = parts, .msg_iovlen = 2};
    size_t left = len + 1;
    while (left) {
        ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        left -= (size_t)n;
        /* Partial: skip what went. */
        while (n > 0 && msg.msg_iovlen) {
            size_t take = (size_t)n < msg.msg_iov->iov_len ? (size_t)n : msg.msg_iov->iov_len;
            msg.msg_iov->iov_base = (char *)msg.msg_iov->iov_base + take;
            msg.msg_iov->iov_len -= take;
            n -= (ssize_t)take;
            if (!msg.msg_iov->iov_len) {
                msg.msg_iov++;
                msg.msg_iovlen--;
            }
        }
    }
    return 0;
}

static void send_json(int fd, json_t *value)
{
    char *text = value ? json_dumps(value, JSON_COMPACT) : NULL;
    json_decref(value);
    if (text)
        (void)send_line(fd, text);
    free(text);
}

static void send_error(int fd, rbx_status status, const char *message)
{
    send_json(fd, json_pack("{s:s, s:s, s:s}", "type", "error", "status", local_status_name(status),
                            "message", message));
}

/* One request line, at most LOCAL_MAX_LINE bytes. */
static char *read_line(int fd, size_t *len)
{
    size_t cap = 4096, used = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (used == cap) {
            char *grown = cap < LOCAL_MAX_LINE ? realloc(buf, cap * 2) : NULL;
            if (!grown)
                break;
            buf = grown;
            cap *= 2;
        }
        ssize_t n = read(fd, buf + used, cap - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        char *newline = memchr(buf + used, '\n', (size_t)n);
        used += (size_t)n;
        if (newline) {
            *len = (size_t)(newline - buf);
            return buf;
        }
    }
    free(buf);
    return NULL;
}

static int on_output(void *user, rbx_stream stream, const char *data, size_t len)
{
    int fd = *(int *)user;
    char *line = rbx_event_to_json(stream, data, len);
    int rc = line ? send_line(fd, line) : -1;
    free(line);
    return rc ? 1 : 0; /* the client is gone: stop the run */
}

static void execute(local_server *server, int fd, json_t *message)
{
    /* A one-off run from a CLI configured otherwise would not run as that
     * CLI would run it: it runs there instead. */
    const char *config = json_string_value(json_object_get(message, "config"));
    char mine[17];
    rbx_engine_fingerprint(server->engine, mine);
    if (config && strcmp(config, mine)) {
        send_json(fd, json_pack("{s:s, s:s}", "type", "declined", "message",
                                "this runbox process is configured otherwise"));
        return;
    }
    json_t *body = json_incref(json_object_get(message, "request"));
    if (!json_is_object(body)) {
        json_decref(body);
        send_error(fd, RBX_EINVAL, "'request' must be an object, as HTTP's POST /v1/execute");
        return;
    }
    json_t *raw = json_object_get(body, "code_bytes");
    if (raw) {
        json_t *code = local_bytes_from_json(raw);
        if (!code || json_object_get(body, "code")) {
            json_decref(code);
            json_decref(body);
            send_error(fd, RBX_EINVAL,
                       "'code_bytes' must be a string of code points U+0000 to U+00FF, one per "
                       "byte, instead of 'code'");
            return;
        }
        json_object_set_new(body, "code", code);
        json_object_del(body, "code_bytes");
    }
    api_form form;
    form_error why;
    if (!api_form_parse(&form, body, &why)) {
        send_error(fd, why.no_memory ? RBX_ESYSTEM : RBX_EINVAL, why.message);
        api_form_free(&form);
        return;
    }
    /* The client hanging up makes its socket readable: the run stops. */
    form.request.cancel_fd = fd;
    rbx_result result;
    rbx_error err = {0};
    /* A client that asked for the result alone ("events": false) is sent
     * no output events; the result holds the output as it would anyway. */
    bool events = !json_is_false(json_object_get(message, "events"));
    if (rbx_execute(server->engine, &form.request, events ? on_output : NULL, &fd, &result, &err) !=
        RBX_OK) {
        send_error(fd, err.status, err.message);
    } else {
        char *line = rbx_result_event_to_json(&result);
        if (line)
            (void)send_line(fd, line);
        free(line);
        rbx_result_free(&result);
    }
    api_form_free(&form);
}

static void restart_or_remove(local_server *server, int fd, json_t *message, bool remove)
{
    const char *id = json_string_value(json_object_get(message, "session_id"));
    rbx_error err = {0};
    if (!id) {
        send_error(fd, RBX_EINVAL, "'session_id' must be a string");
        return;
    }
    if (remove) {
        rbx_session_cancel(server->engine, id);
        double wait = json_number_value(json_object_get(message, "wait"));
        if (rbx_session_remove(server->engine, id, wait, &err) != RBX_OK)
            send_error(fd, err.status, err.message);
        else
            send_json(fd, json_pack("{s:s}", "type", "removed"));
        return;
    }
    size_t stopped = 0;
    const char *language = json_string_value(json_object_get(message, "language"));
    /* Refused as busy when another process holds one of its kernels: what
     * this one stopped is said all the same (the CLI asks each in turn). */
    if (rbx_session_restart(server->engine, id, language, &stopped, &err) != RBX_OK)
        send_json(fd, json_pack("{s:s, s:s, s:s, s:I}", "type", "error", "status",
                                local_status_name(err.status), "message", err.message, "stopped",
                                (json_int_t)stopped));
    else
        send_json(fd, json_pack("{s:s, s:I}", "type", "restarted", "stopped", (json_int_t)stopped));
}

static void pong(local_server *server, int fd)
{
    json_t *answer = json_pack("{s:s, s:i}", "type", "pong", "pid", (int)getpid());
    pthread_mutex_lock(&server->lock);
    if (answer && server->options)
        json_object_set(answer, "options", server->options);
    pthread_mutex_unlock(&server->lock);
    send_json(fd, answer);
}

/* How long a client may take to send its request line: a connection that
 * says nothing must not hold one of the server's threads for good. */
#define REQUEST_TIMEOUT_S 10

static void serve_one(local_server *server, int fd)
{
    struct timeval limit = {.tv_sec = REQUEST_TIMEOUT_S};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    size_t len;
    char *line = read_line(fd, &len);
    json_t *message = line ? json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL) : NULL;
    free(line);
    const char *op = json_string_value(json_object_get(message, "op"));
    if (!op)
        send_error(fd, RBX_EINVAL,
                   "expected a line of JSON with 'op' (execute, restart, remove, "
                   "ping)");
    else if (!strcmp(op, "execute"))
        execute(server, fd, message);
    else if (!strcmp(op, "restart") || !strcmp(op, "remove"))
        restart_or_remove(server, fd, message, !strcmp(op, "remove"));
    else if (!strcmp(op, "ping"))
        pong(server, fd);
    else if (!strcmp(op, "stop") && !server->stoppable)
        send_error(fd, RBX_EBUSY, "runbox serve holds this state directory: stop the server");
    else if (!strcmp(op, "stop")) {
        pthread_mutex_lock(&server->lock);
        server->stop_asked = true;
        pthread_cond_broadcast(&server->changed);
        pthread_mutex_unlock(&server->lock);
        send_json(fd, json_pack("{s:s}", "type", "stopping"));
    } else
        send_error(fd, RBX_EINVAL, "unknown op (accepted: execute, restart, remove, ping, stop)");
    json_decref(message);
}

static void *client_thread(void *arg)
{
    client *c = arg;
    local_server *server = c->server;
    serve_one(server, c->fd);
    pthread_mutex_lock(&server->lock);
    server->clients[c->slot] = -1;
    close(c->fd);
    server->active--;
    /* Never the same twice: local_server_close_if_idle tells by it that a
     * connection came and went, however quickly. */
    int64_t now = now_ms();
    server->idle_since_ms = now > server->idle_since_ms ? now : server->idle_since_ms + 1;
    pthread_cond_broadcast(&server->changed);
    pthread_mutex_unlock(&server->lock);
    free(c);
    return NULL;
}

/* Only the socket's owner's uid: the mode says so too, but the socket
 * existed for a moment before it was set. */
static bool trusted(int fd)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == geteuid();
}

/* A connection that came while the server closes: the caller tries again
 * (and reaches the process that takes this one's place). */
static void answer_closing(int fd)
{
    send_json(fd, json_pack("{s:s}", "type", "closing"));
    close(fd);
}

static void take(local_server *server, int fd)
{
    pthread_mutex_lock(&server->lock);
    if (server->closing) {
        pthread_mutex_unlock(&server->lock);
        answer_closing(fd);
        return;
    }
    size_t slot = 0;
    while (slot < MAX_CLIENTS && server->clients[slot] >= 0)
        slot++;
    client *c = slot < MAX_CLIENTS ? malloc(sizeof *c) : NULL;
    pthread_t thread;
    if (c) {
        *c = (client){.server = server, .fd = fd, .slot = slot};
        server->clients[slot] = fd;
        server->active++;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (c && pthread_create(&thread, &attr, client_thread, c) != 0) {
        server->clients[slot] = -1;
        server->active--;
        free(c);
        c = NULL;
    }
    pthread_attr_destroy(&attr);
    pthread_mutex_unlock(&server->lock);
    if (!c) {
        send_error(fd, RBX_EBUSY, "too many connections: try again");
        close(fd);
    }
}

static void *accept_loop(void *arg)
{
    local_server *server = arg;
    for (;;) {
        struct pollfd fds[2] = {{.fd = server->listen_fd, .events = POLLIN},
                                {.fd = server->stop[0], .events = POLLIN}};
        if (poll(fds, 2, -1) < 0 && errno != EINTR)
            break;
        if (fds[1].revents)
            break;
        if (!fds[0].revents)
            continue;
        int fd = accept4(server->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        if (!trusted(fd))
            close(fd);
        else
            take(server, fd);
    }
    return NULL;
}

/* The monotonic clock's time at_ms (now_ms's scale), for the condition's
 * timed waits. */
static struct timespec monotonic_at(int64_t at_ms)
{
    return (struct timespec){.tv_sec = at_ms / 1000, .tv_nsec = (long)(at_ms % 1000) * 1000000};
}

bool local_server_stop_asked(local_server *server, int wait_ms)
{
    struct timespec until = monotonic_at(now_ms() + wait_ms);
    pthread_mutex_lock(&server->lock);
    while (!server->stop_asked &&
           pthread_cond_timedwait(&server->changed, &server->lock, &until) == 0)
        ;
    bool asked = server->stop_asked;
    pthread_mutex_unlock(&server->lock);
    return asked;
}

local_server *local_server_start(rbx_engine *engine, int listen_fd, bool stoppable)
{
    local_server *server = calloc(1, sizeof *server);
    if (!server)
        return NULL;
    server->stoppable = stoppable;
    server->engine = engine;
    server->listen_fd = listen_fd;
    server->idle_since_ms = now_ms();
    for (size_t i = 0; i < MAX_CLIENTS; i++)
        server->clients[i] = -1;
    pthread_mutex_init(&server->lock, NULL);
    pthread_condattr_t monotonic;
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&server->changed, &monotonic);
    pthread_condattr_destroy(&monotonic);
    if (pipe2(server->stop, O_CLOEXEC) != 0 ||
        pthread_create(&server->thread, NULL, accept_loop, server) != 0) {
        free(server);
        return NULL;
    }
    return server;
}

void local_server_set_options(local_server *server, json_t *options)
{
    pthread_mutex_lock(&server->lock);
    json_decref(server->options);
    server->options = options;
    pthread_mutex_unlock(&server->lock);
}

bool local_server_close_if_idle(local_server *server, int64_t since_ms)
{
    pthread_mutex_lock(&server->lock);
    if (server->active == 0 && server->idle_since_ms == since_ms)
        server->closing = true;
    bool closing = server->closing;
    pthread_mutex_unlock(&server->lock);
    return closing;
}

void local_server_close(local_server *server)
{
    pthread_mutex_lock(&server->lock);
    server->closing = true;
    pthread_mutex_unlock(&server->lock);
}

bool local_server_wait_idle(local_server *server, int64_t until_ms)
{
    /* Each connection's end broadcasts the condition. */
    struct timespec until = monotonic_at(until_ms);
    pthread_mutex_lock(&server->lock);
    while (server->active > 0 &&
           pthread_cond_timedwait(&server->changed, &server->lock, &until) == 0)
        ;
    bool idle = server->active == 0;
    pthread_mutex_unlock(&server->lock);
    return idle;
}

bool local_server_idle(local_server *server, int64_t *since_ms)
{
    pthread_mutex_lock(&server->lock);
    bool idle = server->active == 0;
    *since_ms = server->idle_since_ms;
    pthread_mutex_unlock(&server->lock);
    return idle;
}

void local_server_stop(local_server *server)
{
    if (!server)
        return;
    local_server_close(server);
    (void)!write(server->stop[1], "x", 1);
    pthread_join(server->thread, NULL);
    /* Connections not yet accepted are answered, not dropped: each one's
     * client may have sent a call, and an end without an answer would
     * leave it guessing whether the call ran. */
    int flags = fcntl(server->listen_fd, F_GETFL);
    if (flags >= 0 && fcntl(server->listen_fd, F_SETFL, flags | O_NONBLOCK) == 0)
        for (int fd; (fd = accept4(server->listen_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0;)
            answer_closing(fd);
    /* What runs is cancelled: its client's socket becomes readable. */
    pthread_mutex_lock(&server->lock);
    for (size_t i = 0; i < MAX_CLIENTS; i++)
        if (server->clients[i] >= 0)
            shutdown(server->clients[i], SHUT_RDWR);
    while (server->active)
        pthread_cond_wait(&server->changed, &server->lock);
    pthread_mutex_unlock(&server->lock);
    close(server->listen_fd);
    close(server->stop[0]);
    close(server->stop[1]);
    pthread_mutex_destroy(&server->lock);
    pthread_cond_destroy(&server->changed);
    json_decref(server->options);
    free(server);
}
