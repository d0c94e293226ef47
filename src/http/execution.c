/* One execution's life on the server: a thread of its own waits for its
 * turn (admission), runs it (run.c), and hands its events and its result
 * to the connection's thread, which meanwhile watches the client's socket.
 * The server keeps a list of executions so that shutdown and session
 * removal can cancel them. */
#include "http/http.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What a slow client may leave unread before the program waits for it. */
#define STREAM_PENDING_MAX ((size_t)1 << 20)

execution *http_execution_new(http_request *req, json_t *body, http_error *err)
{
    execution *ex = calloc(1, sizeof *ex);
    if (!ex || http_queue_init(&ex->events, STREAM_PENDING_MAX) != 0) {
        free(ex);
        json_decref(body);
        http_error_set(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "system_error",
                       "out of resources for another execution");
        return NULL;
    }
    ex->server = req->server;
    ex->connection = req->connection;
    ex->bytes_sent = &req->bytes_sent;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(req->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    ex->client_fd = info ? info->connect_fd : -1;
    ex->cancel_read = -1;
    atomic_init(&ex->cancel_fd, -1);
    if (http_run_prepare(ex) != 0) {
        json_decref(body);
        http_queue_destroy(&ex->events);
        free(ex);
        http_error_set(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "system_error",
                       "out of resources for another execution");
        return NULL;
    }
    form_error why;
    if (!api_form_parse(&ex->form, body, &why)) {
        if (why.no_memory)
            http_error_set(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "system_error", "%s", why.message);
        else
            http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request", "%s", why.message);
        http_execution_free(ex);
        return NULL;
    }
    return ex;
}

static void run(execution *ex)
{
    const rbx_config *config = rbx_engine_config(ex->server->engine);
    const rbx_request *request = &ex->form.request;
    double budget_s = request->timeout_s > 0 ? request->timeout_s : config->default_timeout_s;
    if (budget_s > config->max_timeout_s)
        budget_s = config->max_timeout_s; /* the engine refuses it anyway */
    if (request->requirement_count) {
        budget_s += config->install_timeout_s;
        http_metrics_install(ex->server->metrics);
    }
    ex->deadline_us = http_now_us() + (int64_t)(budget_s * 1e6);
    http_run(ex);
}

/* Cancelled before it ran: say why to whoever still listens. */
static void refuse(execution *ex)
{
    if (atomic_load(&ex->cancelled) == CANCEL_SESSION_REMOVED)
        http_error_set(&ex->error, MHD_HTTP_CONFLICT, "session_removed",
                       "session %s was removed before the execution started; nothing ran",
                       ex->session_id);
    else
        http_error_set(&ex->error, MHD_HTTP_SERVICE_UNAVAILABLE, "shutting_down",
                       "runbox is shutting down; the execution did not start");
}

/* The last event of a stream: the result, or why there is none. */
static char *last_event(const execution *ex)
{
    if (ex->has_result)
        return strdup(ex->result);
    json_t *event = json_object();
    json_object_set_new(event, "type", json_string("error"));
    json_object_set_new(event, "error", http_error_json(&ex->error));
    char *json = json_dumps(event, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(event);
    return json;
}

static void finish(execution *ex)
{
    char *frame = NULL;
    size_t frame_len = 0;
    if (ex->dialect) {
        frame =
            ex->has_result ? strdup(ex->result) : ex->dialect->end(NULL, &ex->error, &frame_len);
        frame_len = frame ? strlen(frame) : 0;
    } else if (ex->format != STREAM_NONE) {
        char *json = last_event(ex);
        if (json)
            frame = http_stream_frame(ex->format, ex->has_result ? "result" : "error", json,
                                      &frame_len);
        free(json);
    }
    atomic_store(&ex->done, true);
    http_queue_finish(&ex->events, frame, frame_len);
    free(frame);
    http_server *server = ex->server;
    pthread_mutex_lock(&server->lock);
    server->live--;
    ex->job_over = true; /* the last touch of ex by its job */
    pthread_cond_broadcast(&server->changed);
    pthread_mutex_unlock(&server->lock);
}

static void work(void *arg)
{
    execution *ex = arg;
    admission *a = &ex->server->admission;
    bool admitted = http_admission_wait(a, &ex->ticket, &ex->cancelled);
    if (admitted && atomic_load(&ex->cancelled) == CANCEL_NONE)
        run(ex);
    else
        refuse(ex);
    if (admitted)
        http_admission_leave(a);
    finish(ex);
}

admission_verdict http_execution_start(execution *ex)
{
    http_server *server = ex->server;
    admission_verdict verdict = http_admission_enter(&server->admission, &ex->ticket);
    if (verdict == ADMIT_FULL)
        return verdict;
    const char *session_id = ex->form.request.session_id;
    snprintf(ex->session_id, sizeof ex->session_id, "%s", session_id ? session_id : "");
    pthread_mutex_lock(&server->lock);
    ex->next = server->executions;
    if (ex->next)
        ex->next->prev = ex;
    server->executions = ex;
    server->live++;
    pthread_mutex_unlock(&server->lock);
    ex->linked = true;
    ex->started = true;
    if (rbx_workers_run(server->workers, work, ex) == 0)
        return verdict;
    ex->started = false;
    /* No thread: leave the queue as a cancelled execution would. */
    atomic_store(&ex->cancelled, CANCEL_SHUTDOWN);
    if (http_admission_wait(&server->admission, &ex->ticket, &ex->cancelled))
        http_admission_leave(&server->admission);
    http_error_set(&ex->error, MHD_HTTP_INTERNAL_SERVER_ERROR, "system_error",
                   "cannot start a thread for the execution");
    finish(ex);
    return verdict;
}

bool http_execution_admit(http_request *req, execution *ex, enum MHD_Result *refused)
{
    if (http_execution_start(ex) == ADMIT_FULL) {
        http_execution_free(ex);
        *refused =
            http_reply_fail(req, MHD_HTTP_TOO_MANY_REQUESTS, "queue_full",
                            "%u executions are running and %u waiting, the most this "
                            "server takes; retry later",
                            req->server->options.max_running, req->server->options.max_queue);
        return false;
    }
    http_hold_connection(req->connection);
    return true;
}

bool http_execution_wait(execution *ex, int timeout_ms)
{
    if (http_queue_wait(&ex->events, ex->client_fd, timeout_ms))
        return true;
    http_execution_cancel(ex, CANCEL_CLIENT_GONE);
    return false;
}

bool http_execution_done(execution *ex)
{
    return atomic_load(&ex->done);
}

bool http_execution_succeeded(execution *ex, http_error *err)
{
    if (!ex->has_result)
        *err = ex->error;
    return ex->has_result;
}

char *http_execution_take_result(execution *ex)
{
    char *result = ex->result;
    ex->result = NULL;
    return result;
}

void http_execution_cancel(execution *ex, cancel_reason reason)
{
    int none = CANCEL_NONE;
    if (!atomic_compare_exchange_strong(&ex->cancelled, &none, (int)reason))
        return;
    /* The engine sees its cancel pipe close and kills the sandbox. */
    int fd = atomic_exchange(&ex->cancel_fd, -1);
    if (fd >= 0)
        close(fd);
    http_admission_wake(&ex->server->admission);
    http_queue_wake(&ex->events);
}

void http_execution_free(execution *ex)
{
    http_server *server = ex->server;
    if (ex->started) {
        if (!http_execution_done(ex))
            http_execution_cancel(ex, CANCEL_CLIENT_GONE);
        pthread_mutex_lock(&server->lock);
        while (!ex->job_over)
            pthread_cond_wait(&server->changed, &server->lock);
        pthread_mutex_unlock(&server->lock);
    }
    if (ex->linked) {
        pthread_mutex_lock(&server->lock);
        if (ex->prev)
            ex->prev->next = ex->next;
        else
            server->executions = ex->next;
        if (ex->next)
            ex->next->prev = ex->prev;
        pthread_mutex_unlock(&server->lock);
    }
    int fd = atomic_exchange(&ex->cancel_fd, -1);
    if (fd >= 0)
        close(fd);
    if (ex->cancel_read >= 0)
        close(ex->cancel_read);
    free(ex->result);
    free(ex->kernel_cwd);
    api_form_free(&ex->form);
    http_queue_destroy(&ex->events);
    free(ex);
}

void http_executions_cancel_session(http_server *server, const char *session_id)
{
    pthread_mutex_lock(&server->lock);
    for (execution *ex = server->executions; ex; ex = ex->next)
        if (!http_execution_done(ex) && !strcmp(ex->session_id, session_id))
            http_execution_cancel(ex, CANCEL_SESSION_REMOVED);
    pthread_mutex_unlock(&server->lock);
}

void http_executions_cancel_all(http_server *server)
{
    pthread_mutex_lock(&server->lock);
    for (execution *ex = server->executions; ex; ex = ex->next)
        if (!http_execution_done(ex))
            http_execution_cancel(ex, CANCEL_SHUTDOWN);
    pthread_mutex_unlock(&server->lock);
}

bool http_executions_wait_idle(http_server *server, int64_t deadline_us)
{
    pthread_mutex_lock(&server->lock);
    int64_t left_ms;
    while (server->live > 0 && (left_ms = (deadline_us - http_now_us()) / 1000) > 0)
        http_cond_wait_ms(&server->changed, &server->lock, left_ms < 100 ? left_ms : 100);
    bool idle = server->live == 0;
    pthread_mutex_unlock(&server->lock);
    return idle;
}
