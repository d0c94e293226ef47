/* The end of E2B's sandboxes (http.h): killed by the control plane or by
 * the reaper when their time is up, paused by the control plane. One
 * reaper thread serves every sandbox: it wakes each second, and kills
 * those whose end has passed. */
#include "http/e2b_envd.h"
#include "http/http.h"

#include <stdlib.h>
#include <string.h>

/* How long a kill waits for the session's executions to end once
 * cancelled, before leaving its files for the engine's garbage collection. */
#define KILL_WAIT_S 10.0
#define REAPER_TICK_MS 1000

/* Its executions cancelled (they end as cancelled, and their clients see
 * the end), then its kernels stopped. */
static void stop_session(http_server *server, const char *session_id)
{
    http_executions_cancel_session(server, session_id);
    rbx_session_cancel(server->engine, session_id);
    size_t stopped = 0;
    rbx_error err;
    (void)rbx_session_restart(server->engine, session_id, NULL, &stopped, &err);
}

static void remove_session(http_server *server, const char *session_id)
{
    stop_session(server, session_id);
    rbx_error err;
    if (rbx_session_remove(server->engine, session_id, KILL_WAIT_S, &err) != RBX_OK &&
        err.status != RBX_ENOENT) {
        json_t *line = http_log_event("e2b_sandbox_session_kept");
        json_object_set_new(line, "session_id", json_string(session_id));
        json_object_set_new(line, "message", json_string(err.message));
        http_log_emit(line);
    }
}

/* Out of the registry first, so that no new request reaches it; then
 * what runs in it stops, and its files go. */
bool e2b_sandbox_kill(http_server *server, const char *id)
{
    e2b_sandbox removed;
    if (!e2b_sandboxes_remove(server->sandboxes, id, &removed))
        return false;
    e2b_watchers_sandbox_gone(id);
    size_t count = 0;
    e2b_name *sessions = e2b_contexts_remove_sandbox(server->contexts, id, &count);
    for (size_t i = 0; i < count; i++) {
        e2b_sandboxes_bury(server->sandboxes, sessions[i].text);
        remove_session(server, sessions[i].text);
    }
    free(sessions);
    e2b_sandboxes_bury(server->sandboxes, removed.session_id);
    remove_session(server, removed.session_id);
    /* Its processes have ended: their streams' last events are queued. */
    e2b_streams_end_sandbox(id);
    e2b_sandbox_release(&removed);
    return true;
}

/* Its executions cancelled and its processes paused, to disk or frozen
 * (a resumed sandbox's commands and terminals go on where they were),
 * then its kernels
 * hibernated: its next run_code finds its variables (issue 34). Where one
 * cannot be, it is stopped as a kill would. */
static void hibernate_session(http_server *server, const char *session_id)
{
    http_executions_cancel_session(server, session_id);
    (void)rbx_session_pause(server->engine, session_id, true);
    size_t hibernated = 0;
    rbx_session_hibernate(server->engine, session_id, &hibernated);
}

static void hibernate_kernels(http_server *server, const char *id, const char *session_id)
{
    hibernate_session(server, session_id);
    size_t count = 0;
    e2b_name *sessions = e2b_contexts_sessions(server->contexts, id, &count);
    for (size_t i = 0; i < count; i++)
        hibernate_session(server, sessions[i].text);
    free(sessions);
}

/* Paused first, so that no new request reaches it; then its executions
 * stop, its processes and kernels hibernate, and its streams end. */
bool e2b_sandbox_pause(http_server *server, const char *id, bool *was_paused)
{
    e2b_sandbox s;
    if (!e2b_sandboxes_get(server->sandboxes, id, &s)) {
        *was_paused = false;
        return false;
    }
    bool paused = e2b_sandboxes_set_paused(server->sandboxes, id, true, s.end_ms, was_paused);
    if (paused) {
        e2b_watchers_sandbox_gone(id);
        hibernate_kernels(server, id, s.session_id);
        e2b_streams_end_sandbox(id);
    }
    e2b_sandbox_release(&s);
    return paused;
}

/* Its processes restored or thawed, in each of its sessions: they run on
 * from where the pause left them. */
void e2b_sandbox_resume(http_server *server, const char *id, const char *session_id)
{
    (void)rbx_session_pause(server->engine, session_id, false);
    size_t count = 0;
    e2b_name *sessions = e2b_contexts_sessions(server->contexts, id, &count);
    for (size_t i = 0; i < count; i++)
        (void)rbx_session_pause(server->engine, sessions[i].text, false);
    free(sessions);
}

/* --- the reaper ------------------------------------------------------------------------ */

struct e2b_reaper {
    http_server *server;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping;
};

/* A killed sandbox's session made anew by an execution that raced the
 * kill goes too. */
static void clear_graves(http_server *server)
{
    size_t count = 0;
    e2b_name *graves = e2b_sandboxes_graves(server->sandboxes, e2b_now_ms(), &count);
    for (size_t i = 0; i < count; i++)
        if (rbx_session_exists(server->engine, graves[i].text))
            remove_session(server, graves[i].text);
    free(graves);
}

static void reap(http_server *server)
{
    clear_graves(server);
    size_t count = 0;
    e2b_name *expired = e2b_sandboxes_expired(server->sandboxes, e2b_now_ms(), &count);
    for (size_t i = 0; i < count; i++) {
        e2b_sandbox s;
        if (!e2b_sandboxes_get(server->sandboxes, expired[i].text, &s))
            continue; /* killed meanwhile */
        bool auto_pause = s.auto_pause, was_paused;
        e2b_sandbox_release(&s);
        if (!(auto_pause ? e2b_sandbox_pause(server, expired[i].text, &was_paused)
                         : e2b_sandbox_kill(server, expired[i].text)))
            continue;
        json_t *line = http_log_event("e2b_sandbox_expired");
        json_object_set_new(line, "sandbox_id", json_string(expired[i].text));
        json_object_set_new(line, "then", json_string(auto_pause ? "paused" : "killed"));
        http_log_emit(line);
    }
    free(expired);
}

static void *reaper_main(void *arg)
{
    e2b_reaper *reaper = arg;
    pthread_mutex_lock(&reaper->lock);
    while (!reaper->stopping) {
        pthread_mutex_unlock(&reaper->lock);
        reap(reaper->server);
        pthread_mutex_lock(&reaper->lock);
        if (!reaper->stopping)
            http_cond_wait_ms(&reaper->wake, &reaper->lock, REAPER_TICK_MS);
    }
    pthread_mutex_unlock(&reaper->lock);
    return NULL;
}

e2b_reaper *e2b_reaper_start(http_server *server)
{
    e2b_reaper *reaper = calloc(1, sizeof *reaper);
    if (!reaper)
        return NULL;
    reaper->server = server;
    pthread_mutex_init(&reaper->lock, NULL);
    pthread_cond_init(&reaper->wake, NULL);
    if (pthread_create(&reaper->thread, NULL, reaper_main, reaper) != 0) {
        pthread_cond_destroy(&reaper->wake);
        pthread_mutex_destroy(&reaper->lock);
        free(reaper);
        return NULL;
    }
    return reaper;
}

void e2b_reaper_stop(e2b_reaper *reaper)
{
    if (!reaper)
        return;
    pthread_mutex_lock(&reaper->lock);
    reaper->stopping = true;
    pthread_cond_signal(&reaper->wake);
    pthread_mutex_unlock(&reaper->lock);
    pthread_join(reaper->thread, NULL);
    pthread_cond_destroy(&reaper->wake);
    pthread_mutex_destroy(&reaper->lock);
    free(reaper);
}
