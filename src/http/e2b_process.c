/* envd's process.Process (../shared/E2B-SANDBOX-PROTOCOL.md sections 4
 * and 5): E2B's commands and terminals, as the engine's processes
 * (rbx_process_*) in the sandbox's session, with its environment, image,
 * network and egress.
 *
 * Start and Connect are server streams: the first message is the start
 * event with the process's number, then its output as data events
 * (stdout, stderr, or pty; bytes as base64), then its end event, then the
 * end-of-stream frame. Each stream has a thread of its own that moves the
 * process's events (which the engine hands over on the process's own
 * thread, which must not wait) from a small queue to the client. A
 * client that reads slower than its process writes holds the process's
 * output, as E2B's envd does (its fan-out waits for every subscriber): the
 * queue asks the engine to hold it once it has WATCH_HOLD bytes, or once
 * the sandbox's streams hold their budget together (http.h), and the
 * program blocks on its full pipe, as on a terminal nobody reads. A client
 * that stops reading for E2B_STREAM_STALL_S loses its stream, not the
 * process. Closing a stream never ends the process: only SendSignal and
 * the sandbox's end do.
 *
 * pids are the engine's process numbers: small, unique in this runbox,
 * never reused while it runs. A process runs as the sandbox's user
 * whatever user the SDK names; "root" is accepted and means the same user
 * (there is no root inside a runbox sandbox). */
#include "http/http.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEEPALIVE "{\"event\":{\"keepalive\":{}}}"
/* What one stream's client may lag behind its process before the
 * process's output is held (bytes as sent: base64 and the event's JSON). */
#define WATCH_HOLD ((size_t)256 << 10)
/* How often a held stream looks whether its sandbox's budget has room. */
#define HOLD_LOOK_MS 100
/* E2B's home for its user, and where relative working directories lead. */
#define HOME "/home/user"

/* --- errors -------------------------------------------------------------------------------- */

/* The engine's refusal in Connect's words: the caps are resource_exhausted. */
static void process_error(http_error *err, const rbx_error *engine_err)
{
    unsigned status = engine_err->status == RBX_EINVAL   ? 400
                      : engine_err->status == RBX_ENOENT ? 404
                      : engine_err->status == RBX_EBUSY  ? 429
                      : engine_err->status == RBX_ENOSPC ? 507
                                                         : 500;
    http_error_set(err, status, "process", "%s", engine_err->message);
}

static void bad(http_error *err, const char *message)
{
    http_error_set(err, 400, "invalid_argument", "%s", message);
}

static json_t *b64_json(const char *data, size_t len)
{
    size_t n;
    char *out = api_base64_encode(data, len, true, &n);
    json_t *text = out ? json_stringn(out, n) : NULL;
    free(out);
    return text;
}

/* --- reading requests ---------------------------------------------------------------------- */

/* An optional string member; false (and err) when present and not a string. */
static bool member_string(json_t *object, const char *key, const char **value, http_error *err)
{
    json_t *member = json_object_get(object, key);
    *value = NULL;
    if (!member || json_is_null(member))
        return true;
    if (!json_is_string(member) || strlen(json_string_value(member)) != json_string_length(member)) {
        http_error_set(err, 400, "invalid_argument", "%s must be a string without NUL bytes", key);
        return false;
    }
    *value = json_string_value(member);
    return true;
}

/* A uint32 member (a JSON number, or a string of digits as proto3 JSON
 * allows); absent is 0. */
static bool member_uint32(json_t *object, const char *key, uint32_t *value, http_error *err)
{
    json_t *member = json_object_get(object, key);
    *value = 0;
    if (!member || json_is_null(member))
        return true;
    long long n = -1;
    if (json_is_integer(member))
        n = json_integer_value(member);
    else if (json_is_string(member) && json_string_length(member) &&
             json_string_length(member) < 12 &&
             strspn(json_string_value(member), "0123456789") == json_string_length(member))
        n = atoll(json_string_value(member));
    if (n < 0 || n > 0xffffffffLL) {
        http_error_set(err, 400, "invalid_argument", "%s must be a number from 0 to 4294967295",
                       key);
        return false;
    }
    *value = (uint32_t)n;
    return true;
}

/* The process a request selects ({"pid": N}); tags are not kept apart. */
static bool selected_pid(json_t *message, uint32_t *pid, http_error *err)
{
    json_t *selector = json_object_get(message, "process");
    if (!json_is_object(selector)) {
        bad(err, "process must select a process: {\"pid\": N}");
        return false;
    }
    if (!json_object_get(selector, "pid")) {
        bad(err, json_object_get(selector, "tag") ? "processes are selected by pid here, not by tag"
                                                  : "process must select a process: {\"pid\": N}");
        return false;
    }
    if (!member_uint32(selector, "pid", pid, err))
        return false;
    return true;
}

/* The user the SDK named (Authorization: Basic base64("user:")), checked:
 * "user" and "root" both run as the sandbox's user. */
static bool user_known(http_request *req, http_error *err)
{
    const char *auth = MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND,
                                                   MHD_HTTP_HEADER_AUTHORIZATION);
    if (!auth || strncmp(auth, "Basic ", 6))
        return true;
    char *decoded = NULL;
    size_t len = 0;
    bool ok = api_base64_decode(auth + 6, strlen(auth + 6), &decoded, &len);
    size_t name = ok ? strcspn(decoded, ":") : 0;
    ok = ok && name <= len && ((name == 4 && !strncmp(decoded, "user", 4)) ||
                               (name == 4 && !strncmp(decoded, "root", 4)) || name == 0);
    free(decoded);
    if (!ok)
        bad(err, "unknown user: a sandbox here has the user 'user' ('root' runs as it too)");
    return ok;
}

/* --- a stream's watch on a process ------------------------------------------------------------ */

typedef struct pending {
    json_t *message;
    size_t bytes;
    struct pending *next;
} pending;

typedef struct watch {
    pthread_mutex_t lock;
    pthread_cond_t news;
    pending *head, *tail;
    size_t bytes;  /* as sent, charged to the sandbox's budget */
    bool ended;    /* the end event is queued: the last one */
    bool frozen;   /* the sandbox paused: the stream ends once what is queued went */
    bool on_disk;  /* ... and the process went to disk, not frozen in memory */
    bool overflow; /* out of memory: the engine dropped us */
    bool holding;  /* we asked the engine to hold the output */
    e2b_stream *stream;
    http_server *server; /* a server that stops ends its streams (not waiting for them) */
    rbx_process *process;
    uint64_t id; /* our watch on it */
} watch;

static const char *signal_word(int sig)
{
    switch (sig) {
    case SIGKILL: return "killed";
    case SIGTERM: return "terminated";
    case SIGINT: return "interrupt";
    case SIGHUP: return "hangup";
    case SIGQUIT: return "quit";
    case SIGSEGV: return "segmentation fault";
    case SIGABRT: return "aborted";
    case SIGPIPE: return "broken pipe";
    case SIGBUS: return "bus error";
    case SIGFPE: return "floating point exception";
    default: return "signal";
    }
}

/* The event as E2B's ProcessEvent. EndEvent's status is Go's wording
 * ("exit status 1", "signal: killed"), as E2B's envd says it. */
static json_t *event_json(const rbx_process_event *event)
{
    if (event->kind == RBX_PROCESS_END) {
        char status[64];
        if (event->exited)
            snprintf(status, sizeof status, "exit status %d", event->exit_code);
        else
            snprintf(status, sizeof status, "signal: %s", signal_word(event->signal));
        json_t *end = json_pack("{s:i, s:b, s:s}", "exitCode", event->exit_code, "exited",
                                event->exited, "status", status);
        if (end && event->error)
            json_object_set_new(end, "error", json_string(event->error));
        return end ? json_pack("{s:{s:o}}", "event", "end", end) : NULL;
    }
    const char *stream = event->kind == RBX_PROCESS_STDERR     ? "stderr"
                         : event->kind == RBX_PROCESS_TERMINAL ? "pty"
                                                               : "stdout";
    json_t *data = b64_json(event->data, event->len);
    return data ? json_pack("{s:{s:{s:o}}}", "event", "data", stream, data) : NULL;
}

/* An event's size as sent: its bytes in base64, and the JSON around. */
static size_t wire_bytes(const rbx_process_event *event)
{
    return (event->len + 2) / 3 * 4 + 64;
}

/* The engine's callback, on the process's thread: queue and return; hold
 * the output once the client lags (the pump resumes it). */
static int on_event(void *user, const rbx_process_event *event)
{
    watch *w = user;
    if (event->kind == RBX_PROCESS_FROZEN) {
        pthread_mutex_lock(&w->lock);
        w->frozen = true;
        w->on_disk = event->on_disk;
        pthread_cond_signal(&w->news);
        pthread_mutex_unlock(&w->lock);
        return 0;
    }
    json_t *message = event_json(event);
    pending *item = calloc(1, sizeof *item);
    pthread_mutex_lock(&w->lock);
    int answer = 0;
    if (!message || !item) {
        w->overflow = true;
        answer = 1;
    } else {
        *item = (pending){.message = message, .bytes = wire_bytes(event)};
        if (w->tail)
            w->tail->next = item;
        else
            w->head = item;
        w->tail = item;
        w->bytes += item->bytes;
        e2b_stream_charge(w->stream, item->bytes, true);
        w->ended = event->kind == RBX_PROCESS_END;
        if (w->bytes >= WATCH_HOLD || e2b_stream_over_budget(w->stream)) {
            w->holding = true;
            answer = RBX_PROCESS_HOLD;
        }
        message = NULL;
        item = NULL;
    }
    pthread_cond_signal(&w->news);
    pthread_mutex_unlock(&w->lock);
    json_decref(message);
    free(item);
    return answer;
}

static watch *watch_new(http_server *server, e2b_stream *stream)
{
    watch *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->news, NULL);
    w->stream = stream;
    w->server = server;
    return w;
}

/* What the client will not get (the stream still ours: refunded). */
static void discard_pending(watch *w)
{
    for (pending *q = w->head; q;) {
        pending *next = q->next;
        e2b_stream_charge(w->stream, q->bytes, false);
        json_decref(q->message);
        free(q);
        q = next;
    }
    w->head = w->tail = NULL;
    w->bytes = 0;
}

/* After the engine let go of it (unwatched, or never watching). */
static void watch_free(watch *w)
{
    discard_pending(w);
    rbx_process_free(w->process);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->news);
    free(w);
}

/* The stream's thread: the start event, then the process's events as
 * they come, to the end event or until the client goes. */
static void *pump(void *arg)
{
    watch *w = arg;
    json_t *start = json_pack("{s:{s:{s:I}}}", "event", "start", "pid",
                              (json_int_t)rbx_process_pid(w->process));
    bool open = e2b_stream_send(w->stream, start);
    bool finished = false, overflow = false, stopping = false, frozen = false;
    while (open && !finished && !stopping) {
        pthread_mutex_lock(&w->lock);
        /* Held, the client caught up and the sandbox's budget has room:
         * the process's output flows again. */
        bool resume = w->holding && w->bytes < WATCH_HOLD / 2 &&
                      !e2b_stream_over_budget(w->stream);
        if (resume)
            w->holding = false;
        pthread_mutex_unlock(&w->lock);
        if (resume)
            rbx_process_resume(w->process, w->id);
        pthread_mutex_lock(&w->lock);
        while (!w->head && !w->overflow && !w->frozen && !e2b_stream_client_gone(w->stream) &&
               !(stopping = atomic_load(&w->server->draining))) {
            bool holding = w->holding; /* then look at the budget again soon */
            http_cond_wait_ms(&w->news, &w->lock, holding ? HOLD_LOOK_MS : 1000);
            if (holding)
                break;
        }
        pending *item = w->head;
        if (item) {
            w->head = item->next;
            if (!w->head)
                w->tail = NULL;
            w->bytes -= item->bytes;
            /* From here the stream charges what it queues. */
            e2b_stream_charge(w->stream, item->bytes, false);
        }
        overflow = !item && w->overflow;
        frozen = !item && !overflow && w->frozen;
        finished = overflow || frozen || (item && !w->head && w->ended);
        pthread_mutex_unlock(&w->lock);
        if (item) {
            open = e2b_stream_send(w->stream, item->message);
            free(item);
        } else if (!overflow && !stopping && !frozen) {
            open = !e2b_stream_client_gone(w->stream);
        }
    }
    /* From here on the engine calls us no more. */
    rbx_process_unwatch(w->process, w->id);
    discard_pending(w);
    http_error err;
    if (overflow)
        http_error_set(&err, 500, "internal",
                       "out of memory for the process's output; the process runs on: Connect "
                       "to it again");
    else if (stopping)
        http_error_set(&err, 503, "unavailable",
                       "runbox is stopping: its sandboxes' processes end with it");
    else if (frozen)
        http_error_set(&err, 503, "unavailable",
                       "the sandbox was paused: process %u is %s until it resumes, then "
                       "Connect to it again",
                       (unsigned)rbx_process_pid(w->process),
                       w->on_disk ? "on disk" : "frozen");
    e2b_stream_end(w->stream, overflow || stopping || frozen ? &err : NULL);
    watch_free(w);
    return NULL;
}

/* Hands the stream to its thread; on failure ends it with the error. */
static void pump_start(watch *w)
{
    pthread_t thread;
    if (pthread_create(&thread, NULL, pump, w) == 0) {
        pthread_detach(thread);
        return;
    }
    rbx_process_unwatch(w->process, w->id);
    discard_pending(w);
    http_error err;
    http_error_set(&err, 500, "internal", "cannot start the stream's thread");
    e2b_stream_end(w->stream, &err);
    watch_free(w);
}

/* --- Start ------------------------------------------------------------------------------------ */

/* What a Start asks, as the engine's request; strings point into the
 * message and the view (which outlive it) or into owned. */
typedef struct start_args {
    rbx_process_request request;
    const char **argv;
    const char **env;
    const char **egress;
    char **owned; /* "K=V" strings and the cwd */
    size_t owned_count;
} start_args;

static void start_args_free(start_args *a)
{
    for (size_t i = 0; i < a->owned_count; i++)
        free(a->owned[i]);
    free(a->owned);
    free(a->argv);
    free(a->env);
    free(a->egress);
}

static char *own(start_args *a, char *text)
{
    if (text)
        a->owned[a->owned_count++] = text;
    return text;
}

static char *env_entry(const char *key, json_t *value)
{
    if (!json_is_string(value) || strlen(json_string_value(value)) != json_string_length(value))
        return NULL;
    size_t len = strlen(key) + 1 + json_string_length(value) + 1;
    char *entry = malloc(len);
    if (entry)
        snprintf(entry, len, "%s=%s", key, json_string_value(value));
    return entry;
}

/* The sandbox's envVars, then the call's envs (which win). */
static bool start_env(start_args *a, json_t *sandbox_env, json_t *envs, http_error *err)
{
    if (envs && !json_is_null(envs) && !json_is_object(envs)) {
        bad(err, "process.envs must be an object of strings");
        return false;
    }
    size_t count = json_object_size(sandbox_env) + json_object_size(envs);
    a->env = calloc(count + 1, sizeof *a->env);
    a->owned = calloc(count + 2, sizeof *a->owned);
    if (!a->env || !a->owned) {
        http_error_set(err, 500, "internal", "out of memory");
        return false;
    }
    a->request.env = a->env;
    json_t *sources[] = {json_is_object(sandbox_env) ? sandbox_env : NULL, envs};
    for (size_t s = 0; s < 2; s++) {
        const char *key;
        json_t *value;
        json_object_foreach(sources[s], key, value)
        {
            char *entry = own(a, env_entry(key, value));
            if (!entry) {
                http_error_set(err, 400, "invalid_argument",
                               "environment variable %.100s must be a string without NUL bytes",
                               key);
                return false;
            }
            a->env[a->request.env_count++] = entry;
        }
    }
    return true;
}

static bool start_argv(start_args *a, json_t *config, http_error *err)
{
    const char *cmd;
    if (!member_string(config, "cmd", &cmd, err))
        return false;
    if (!cmd || !cmd[0]) {
        bad(err, "process.cmd must name the program to run");
        return false;
    }
    json_t *args = json_object_get(config, "args");
    if (args && !json_is_null(args) && !json_is_array(args)) {
        bad(err, "process.args must be an array of strings");
        return false;
    }
    size_t n = json_array_size(args);
    if (n + 1 > RBX_PROCESS_ARGS_MAX) {
        http_error_set(err, 400, "invalid_argument", "a process takes at most %d arguments",
                       RBX_PROCESS_ARGS_MAX);
        return false;
    }
    a->argv = calloc(n + 2, sizeof *a->argv);
    if (!a->argv) {
        http_error_set(err, 500, "internal", "out of memory");
        return false;
    }
    a->argv[0] = cmd;
    for (size_t i = 0; i < n; i++) {
        json_t *arg = json_array_get(args, i);
        if (!json_is_string(arg) || strlen(json_string_value(arg)) != json_string_length(arg)) {
            bad(err, "process.args must be an array of strings without NUL bytes");
            return false;
        }
        a->argv[i + 1] = json_string_value(arg);
    }
    a->request.argv = a->argv;
    a->request.argc = n + 1;
    return true;
}

/* pty: {"size": {"cols": C, "rows": R}}, each 1 to RBX_PROCESS_TERMINAL_MAX. */
static bool terminal_size(json_t *pty, uint16_t *cols, uint16_t *rows, http_error *err)
{
    json_t *size = json_object_get(pty, "size");
    uint32_t c = 0, r = 0;
    if (!json_is_object(pty) || !json_is_object(size)) {
        bad(err, "pty must be {\"size\": {\"cols\": N, \"rows\": N}}");
        return false;
    }
    if (!member_uint32(size, "cols", &c, err) || !member_uint32(size, "rows", &r, err))
        return false;
    if (c < 1 || r < 1 || c > RBX_PROCESS_TERMINAL_MAX || r > RBX_PROCESS_TERMINAL_MAX) {
        http_error_set(err, 400, "invalid_argument",
                       "a terminal has 1 to %d columns and rows, not %u x %u",
                       RBX_PROCESS_TERMINAL_MAX, (unsigned)c, (unsigned)r);
        return false;
    }
    *cols = (uint16_t)c;
    *rows = (uint16_t)r;
    return true;
}

static bool start_args_read(start_args *a, json_t *message, const e2b_sandbox_view *view,
                            http_error *err)
{
    rbx_process_request *r = &a->request;
    rbx_process_request_init(r);
    json_t *config = json_object_get(message, "process");
    if (!json_is_object(config)) {
        bad(err, "process must be {\"cmd\": ..., \"args\": [...]}");
        return false;
    }
    if (!start_argv(a, config, err) ||
        !start_env(a, view->env, json_object_get(config, "envs"), err))
        return false;
    const char *cwd, *tag;
    if (!member_string(config, "cwd", &cwd, err) || !member_string(message, "tag", &tag, err))
        return false;
    if (cwd && cwd[0] && cwd[0] != '/') { /* relative to the user's home, as envd has it */
        size_t len = sizeof HOME + 1 + strlen(cwd);
        char *full = own(a, malloc(len));
        if (!full) {
            http_error_set(err, 500, "internal", "out of memory");
            return false;
        }
        snprintf(full, len, "%s/%s", HOME, cwd);
        cwd = full;
    }
    r->cwd = cwd && cwd[0] ? cwd : NULL;
    r->tag = tag;
    json_t *pty = json_object_get(message, "pty");
    if (pty && !json_is_null(pty) && !terminal_size(pty, &r->cols, &r->rows, err))
        return false;
    /* Absent means open (older clients); the SDK's commands say. */
    json_t *stdin_open = json_object_get(message, "stdin");
    if (stdin_open && !json_is_boolean(stdin_open) && !json_is_null(stdin_open)) {
        bad(err, "stdin must be true or false");
        return false;
    }
    r->stdin_open = !json_is_false(stdin_open);
    r->session_id = view->session_id;
    r->image = view->image[0] ? view->image : NULL;
    r->network = view->network;
    if (view->egress_allow) {
        size_t n = json_array_size(view->egress_allow);
        a->egress = calloc(n + 1, sizeof *a->egress);
        if (!a->egress) {
            http_error_set(err, 500, "internal", "out of memory");
            return false;
        }
        for (size_t i = 0; i < n; i++)
            if (json_is_string(json_array_get(view->egress_allow, i)))
                a->egress[r->egress_allow_count++] =
                    json_string_value(json_array_get(view->egress_allow, i));
        r->egress_allow = a->egress;
    }
    return true;
}

/* The sandbox was paused or killed while its process started: a stop
 * that began after the process had been checked in, but whose kill ran
 * before it registered, did not see it (the engine refuses a process only
 * while the stop runs). Then the process goes here. */
static bool still_running(http_server *server, const e2b_sandbox_view *view, http_error *err)
{
    e2b_sandbox s;
    bool running = e2b_sandboxes_get(server->sandboxes, view->id, &s);
    if (running) {
        running = !s.paused && !strcmp(s.session_id, view->session_id);
        e2b_sandbox_release(&s);
    }
    if (!running)
        http_error_set(err, MHD_HTTP_BAD_GATEWAY, "not_found", "sandbox %s was not found",
                       view->id);
    return running;
}

enum MHD_Result http_e2b_process_start(http_request *req)
{
    http_error err;
    e2b_sandbox_view view = {0};
    json_t *message = e2b_connect_stream_request(req, &err);
    if (!message ||
        !e2b_sandbox_for_request(req->server, req->connection, E2B_PORT_ENVD, &view, &err) ||
        !user_known(req, &err)) {
        json_decref(message);
        e2b_sandbox_view_release(&view);
        return e2b_stream_refused(req, &err);
    }
    start_args args = {0};
    bool ok = start_args_read(&args, message, &view, &err);
    enum MHD_Result queued = MHD_NO;
    e2b_stream *stream = ok ? e2b_stream_open(req, KEEPALIVE, &queued) : NULL;
    if (stream)
        (void)e2b_stream_join(stream, view.id);
    watch *w = stream ? watch_new(req->server, stream) : NULL;
    if (stream && !w)
        http_error_set(&err, 500, "internal", "out of memory");
    rbx_error engine_err;
    if (w && rbx_process_start(req->server->engine, &args.request, on_event, w, &w->process,
                               &engine_err) != RBX_OK) {
        process_error(&err, &engine_err);
        watch_free(w);
        w = NULL;
    }
    if (w && !still_running(req->server, &view, &err)) {
        (void)rbx_process_signal(w->process, SIGKILL, &engine_err);
        rbx_process_unwatch(w->process, 1);
        watch_free(w);
        w = NULL;
    }
    start_args_free(&args);
    json_decref(message);
    e2b_sandbox_view_release(&view);
    if (!ok)
        return e2b_stream_refused(req, &err);
    if (stream && !w)
        e2b_stream_end(stream, &err);
    if (w) {
        w->id = 1; /* rbx_process_start's watcher */
        pump_start(w);
    }
    return queued;
}

/* --- Connect ---------------------------------------------------------------------------------- */

/* The request's process, in the request's sandbox (whose id goes to
 * sandbox, when not NULL); false with err. */
static bool find_process(http_request *req, json_t *message, rbx_process **process,
                         char sandbox[E2B_SANDBOX_ID_MAX + 1], http_error *err)
{
    e2b_sandbox_view view = {0};
    uint32_t pid;
    if (!e2b_sandbox_for_request(req->server, req->connection, E2B_PORT_ENVD, &view, err))
        return false;
    bool ok = selected_pid(message, &pid, err);
    rbx_error engine_err;
    if (ok && rbx_process_find(req->server->engine, view.session_id, pid, process, &engine_err) !=
                  RBX_OK) {
        process_error(err, &engine_err);
        ok = false;
    }
    if (sandbox)
        memcpy(sandbox, view.id, sizeof view.id);
    e2b_sandbox_view_release(&view);
    return ok;
}

enum MHD_Result http_e2b_process_connect(http_request *req)
{
    http_error err;
    rbx_process *process = NULL;
    json_t *message = e2b_connect_stream_request(req, &err);
    char sandbox[E2B_SANDBOX_ID_MAX + 1];
    bool ok = message && find_process(req, message, &process, sandbox, &err);
    json_decref(message);
    if (!ok)
        return e2b_stream_refused(req, &err);
    enum MHD_Result queued;
    e2b_stream *stream = e2b_stream_open(req, KEEPALIVE, &queued);
    if (stream)
        (void)e2b_stream_join(stream, sandbox);
    watch *w = stream ? watch_new(req->server, stream) : NULL;
    if (!w) {
        rbx_process_free(process);
        if (stream) {
            http_error_set(&err, 500, "internal", "out of memory");
            e2b_stream_end(stream, &err);
        }
        return queued;
    }
    w->process = process;
    rbx_error engine_err;
    if (rbx_process_watch(process, on_event, w, &w->id, &engine_err) != RBX_OK) {
        process_error(&err, &engine_err);
        e2b_stream_end(stream, &err);
        watch_free(w);
        return queued;
    }
    pump_start(w);
    return queued;
}

/* --- unary calls ------------------------------------------------------------------------------ */

static json_t *process_info_json(const rbx_process_info *info)
{
    json_t *args = json_array(), *envs = json_object();
    for (size_t i = 1; info->argv[i]; i++)
        json_array_append_new(args, json_string(info->argv[i]));
    for (size_t i = 0; info->env[i]; i++) {
        char *eq = strchr(info->env[i], '=');
        if (eq) {
            *eq = 0; /* our copy */
            json_object_set_new(envs, info->env[i], json_string(eq + 1));
            *eq = '=';
        }
    }
    json_t *config = json_pack("{s:s, s:o, s:o}", "cmd", info->argv[0], "args", args, "envs", envs);
    if (config && info->cwd)
        json_object_set_new(config, "cwd", json_string(info->cwd));
    json_t *entry = config ? json_pack("{s:o, s:I}", "config", config, "pid", (json_int_t)info->pid)
                           : NULL;
    if (entry && info->tag)
        json_object_set_new(entry, "tag", json_string(info->tag));
    return entry;
}

enum MHD_Result http_e2b_process_list(http_request *req)
{
    http_error err;
    e2b_sandbox_view view = {0};
    json_t *message = e2b_connect_unary_request(req, &err);
    if (!message ||
        !e2b_sandbox_for_request(req->server, req->connection, E2B_PORT_ENVD, &view, &err)) {
        json_decref(message);
        return http_reply_error(req, &err);
    }
    json_decref(message);
    rbx_process_info *infos;
    size_t count;
    rbx_error engine_err;
    rbx_status status =
        rbx_process_list(req->server->engine, view.session_id, &infos, &count, &engine_err);
    e2b_sandbox_view_release(&view);
    if (status != RBX_OK) {
        process_error(&err, &engine_err);
        return http_reply_error(req, &err);
    }
    json_t *list = json_array();
    for (size_t i = 0; i < count; i++)
        json_array_append_new(list, process_info_json(&infos[i]));
    rbx_process_infos_free(infos, count);
    return e2b_connect_reply(req, json_pack("{s:o}", "processes", list));
}

/* Runs a unary call on the request's process: parse, find, act, reply {}. */
typedef rbx_status (*process_action)(rbx_process *process, json_t *message, rbx_error *engine_err,
                                     http_error *err);

static enum MHD_Result unary_on_process(http_request *req, process_action act)
{
    http_error err = {0};
    rbx_process *process = NULL;
    json_t *message = e2b_connect_unary_request(req, &err);
    bool ok = message && find_process(req, message, &process, NULL, &err);
    if (ok) {
        rbx_error engine_err = {0};
        rbx_status status = act(process, message, &engine_err, &err);
        if (status != RBX_OK && engine_err.status != RBX_OK)
            process_error(&err, &engine_err);
        ok = status == RBX_OK;
    }
    rbx_process_free(process);
    json_decref(message);
    return ok ? e2b_connect_reply(req, json_object()) : http_reply_error(req, &err);
}

/* ProcessInput: {"stdin": base64} or {"pty": base64}; an absent one is empty. */
static bool input_bytes(json_t *input, char **data, size_t *len, http_error *err)
{
    *data = NULL;
    *len = 0;
    if (!input || json_is_null(input))
        return true;
    json_t *bytes = json_is_object(input) ? json_object_get(input, "stdin") : NULL;
    if (json_is_object(input) && !bytes)
        bytes = json_object_get(input, "pty");
    if (!json_is_object(input) || (bytes && !json_is_string(bytes))) {
        bad(err, "input must be {\"stdin\": BASE64} or {\"pty\": BASE64}");
        return false;
    }
    if (!bytes)
        return true;
    if (!api_base64_decode(json_string_value(bytes), json_string_length(bytes), data, len)) {
        bad(err, "input's bytes must be base64");
        return false;
    }
    return true;
}

static rbx_status write_input(rbx_process *process, json_t *input, rbx_error *engine_err,
                              http_error *err)
{
    char *data;
    size_t len;
    if (!input_bytes(input, &data, &len, err))
        return RBX_EINVAL;
    rbx_status status = len ? rbx_process_write(process, data, len, engine_err) : RBX_OK;
    free(data);
    return status;
}

static rbx_status act_send_input(rbx_process *process, json_t *message, rbx_error *engine_err,
                                 http_error *err)
{
    return write_input(process, json_object_get(message, "input"), engine_err, err);
}

static rbx_status act_close_stdin(rbx_process *process, json_t *message, rbx_error *engine_err,
                                  http_error *err)
{
    (void)message;
    (void)err;
    return rbx_process_close_stdin(process, engine_err);
}

/* Signal: "SIGNAL_SIGKILL" or 9, "SIGNAL_SIGTERM" or 15. */
static rbx_status act_send_signal(rbx_process *process, json_t *message, rbx_error *engine_err,
                                  http_error *err)
{
    json_t *signal = json_object_get(message, "signal");
    const char *name = json_string_value(signal);
    json_int_t number = json_is_integer(signal) ? json_integer_value(signal) : -1;
    int sig = (name && !strcmp(name, "SIGNAL_SIGKILL")) || number == 9    ? SIGKILL
              : (name && !strcmp(name, "SIGNAL_SIGTERM")) || number == 15 ? SIGTERM
                                                                          : 0;
    if (!sig) {
        bad(err, "signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
        return RBX_EINVAL;
    }
    return rbx_process_signal(process, sig, engine_err);
}

static rbx_status act_update(rbx_process *process, json_t *message, rbx_error *engine_err,
                             http_error *err)
{
    json_t *pty = json_object_get(message, "pty");
    if (!pty || json_is_null(pty))
        return RBX_OK; /* nothing to change */
    uint16_t cols, rows;
    if (!terminal_size(pty, &cols, &rows, err))
        return RBX_EINVAL;
    return rbx_process_resize(process, cols, rows, engine_err);
}

enum MHD_Result http_e2b_process_send_input(http_request *req)
{
    return unary_on_process(req, act_send_input);
}

enum MHD_Result http_e2b_process_close_stdin(http_request *req)
{
    return unary_on_process(req, act_close_stdin);
}

enum MHD_Result http_e2b_process_send_signal(http_request *req)
{
    return unary_on_process(req, act_send_signal);
}

enum MHD_Result http_e2b_process_update(http_request *req)
{
    return unary_on_process(req, act_update);
}

/* --- StreamInput ------------------------------------------------------------------------------ */

/* A client stream (Python's commands.stream_input): {"start": {"process":
 * {"pid"}}} first, then {"data": {"input": ...}} and {"keepalive": {}}.
 * The body is read whole before this runs (its size within the server's
 * body limit); the answer is a stream of one {} and its end. */
enum MHD_Result http_e2b_process_stream_input(http_request *req)
{
    http_error err = {0};
    rbx_process *process = NULL;
    json_t *messages = e2b_connect_client_stream(req, &err);
    json_t *first = json_array_get(messages, 0);
    bool ok = messages != NULL;
    if (ok && !json_is_object(json_object_get(first, "start"))) {
        bad(&err, "a StreamInput begins with {\"start\": {\"process\": {\"pid\": N}}}");
        ok = false;
    }
    ok = ok && find_process(req, json_object_get(first, "start"), &process, NULL, &err);
    for (size_t i = 1; ok && i < json_array_size(messages); i++) {
        json_t *message = json_array_get(messages, i);
        json_t *data = json_object_get(message, "data");
        if (json_object_get(message, "keepalive"))
            continue;
        if (!json_is_object(data)) {
            bad(&err, "a StreamInput's messages are {\"data\": {\"input\": ...}} or keepalive");
            ok = false;
            break;
        }
        rbx_error engine_err = {0};
        if (write_input(process, json_object_get(data, "input"), &engine_err, &err) != RBX_OK) {
            if (engine_err.status != RBX_OK)
                process_error(&err, &engine_err);
            ok = false;
        }
    }
    rbx_process_free(process);
    json_decref(messages);
    if (!ok)
        return e2b_stream_refused(req, &err);
    enum MHD_Result queued;
    e2b_stream *stream = e2b_stream_open(req, NULL, &queued);
    if (stream) {
        e2b_stream_send(stream, json_object());
        e2b_stream_end(stream, NULL);
    }
    return queued;
}
