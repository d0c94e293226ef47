/* filesystem.Filesystem's watches (E2B-SANDBOX-PROTOCOL.md section 4):
 * WatchDir, a server stream fed by a producer thread per watch ({"start"},
 * then {"filesystem": FilesystemEvent} as things change, {"keepalive"}
 * in silences), which stops when the client goes, the sandbox goes or its
 * directory is removed; and the polling watcher of Python's sync SDK
 * (CreateWatcher, GetWatcherEvents, RemoveWatcher), whose events wait in
 * its inotify instance between polls. Every watch is counted in one
 * registry, bounded per sandbox and in all (each holds an inotify
 * instance, of which a user has 128 by default); a polling watcher nobody
 * polls for E2B_WATCHER_IDLE_S is freed at the next filesystem call.
 * Every filesystem call of every sandbox takes the registry's lock, so it
 * is held only to find, count and unlink: a poll takes its events (up to
 * thousands, each stat'ed, new directories read) holding its watcher
 * instead, and whatever unlinks a held watcher leaves its freeing to the
 * poll's end. */
#include "http/e2b_envd.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define POLL_MS 500 /* how soon a producer sees its sandbox or client go */
#define WATCHER_ID_SIZE 33 /* 32 hex digits */

typedef struct watcher {
    struct watcher *next;
    char id[WATCHER_ID_SIZE];
    char sandbox_id[E2B_SANDBOX_ID_MAX + 1];
    bool include_entry;
    bool polled;  /* CreateWatcher's; else the slot of a WatchDir stream */
    bool gone;    /* its sandbox went: its stream ends */
    bool unlinked; /* out of the registry: the last poll holding it frees it */
    unsigned polls; /* polls under way, outside the registry's lock */
    pthread_mutex_t taking; /* one poll at a time takes its events */
    int64_t last_used_us;
    rbx_file_watch *watch; /* polled ones' (a stream's producer owns its own) */
} watcher;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static watcher *registry;
static size_t registry_count;

static void watcher_free(watcher *w)
{
    rbx_file_watch_close(w->watch);
    pthread_mutex_destroy(&w->taking);
    free(w);
}

/* Frees a list of unlinked watchers, after the lock is let go: closing an
 * inotify instance of many watches is not free either. */
static void free_unlinked(watcher *list)
{
    while (list) {
        watcher *next = list->next;
        watcher_free(list);
        list = next;
    }
}

/* Takes w, at *at, out of the registry (the lock held); it joins *freed
 * unless a poll holds it, which then frees it. */
static void unlink_at(watcher **at, watcher **freed)
{
    watcher *w = *at;
    *at = w->next;
    registry_count--;
    w->unlinked = true;
    w->next = NULL;
    if (!w->polls) {
        w->next = *freed;
        *freed = w;
    }
}

/* Unlinks w (the lock held), as unlink_at. */
static void unlink_watcher(watcher *w, watcher **freed)
{
    for (watcher **at = &registry; *at; at = &(*at)->next)
        if (*at == w) {
            unlink_at(at, freed);
            return;
        }
}

/* Polling watchers nobody asked for in a while go (the lock held); a
 * poll under way is a use. */
static void sweep_idle(watcher **freed)
{
    int64_t now = http_now_us();
    for (watcher **at = &registry; *at;) {
        watcher *w = *at;
        if (w->polled && !w->polls &&
            now - w->last_used_us > (int64_t)E2B_WATCHER_IDLE_S * 1000000)
            unlink_at(at, freed);
        else
            at = &w->next;
    }
}

/* A place in the registry for a new watch; NULL with err (429) when the
 * sandbox or the server has all it may. A polled one's watch is the
 * registry's from here, and its id is copied to polled_id: once the lock
 * is let go, its sandbox's end may free it. */
static watcher *reserve(const e2b_sandbox_view *view, bool include_entry,
                        rbx_file_watch *polled_watch, char polled_id[WATCHER_ID_SIZE],
                        http_error *err)
{
    watcher *freed = NULL;
    pthread_mutex_lock(&registry_lock);
    sweep_idle(&freed);
    size_t mine = 0;
    for (watcher *w = registry; w; w = w->next)
        mine += !strcmp(w->sandbox_id, view->id);
    watcher *w = NULL;
    if (mine >= E2B_WATCHES_PER_SANDBOX)
        http_error_set(err, MHD_HTTP_TOO_MANY_REQUESTS, "resource_exhausted",
                       "sandbox %s already watches %d directories: stop one first", view->id,
                       E2B_WATCHES_PER_SANDBOX);
    else if (registry_count >= E2B_WATCHES_MAX)
        http_error_set(err, MHD_HTTP_TOO_MANY_REQUESTS, "resource_exhausted",
                       "this server already watches %d directories: try again later",
                       E2B_WATCHES_MAX);
    else if (!(w = calloc(1, sizeof *w)))
        http_error_set(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal", "out of memory");
    if (w) {
        unsigned char rnd[16];
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
            memset(rnd, 0, sizeof rnd); /* ids are checked against their sandbox too */
        for (size_t i = 0; i < sizeof rnd; i++)
            snprintf(w->id + 2 * i, 3, "%02x", rnd[i]);
        snprintf(w->sandbox_id, sizeof w->sandbox_id, "%s", view->id);
        w->include_entry = include_entry;
        w->polled = polled_watch != NULL;
        w->watch = polled_watch;
        if (polled_id)
            memcpy(polled_id, w->id, WATCHER_ID_SIZE);
        w->last_used_us = http_now_us();
        pthread_mutex_init(&w->taking, NULL);
        w->next = registry;
        registry = w;
        registry_count++;
    }
    pthread_mutex_unlock(&registry_lock);
    free_unlinked(freed);
    return w;
}

void e2b_watchers_sweep(void)
{
    watcher *freed = NULL;
    pthread_mutex_lock(&registry_lock);
    sweep_idle(&freed);
    pthread_mutex_unlock(&registry_lock);
    free_unlinked(freed);
}

/* Here, beside the registry, so that every filesystem call sweeps the idle
 * watchers first and e2b_filesystem.c depends on this file, not both ways. */
enum MHD_Result e2b_fs_unary(http_request *req, e2b_fs_call *call)
{
    http_error err;
    e2b_sandbox_view view;
    e2b_watchers_sweep();
    if (!e2b_sandbox_for_request(req->server, req->connection, E2B_PORT_ENVD, &view, &err))
        return http_reply_error(req, &err);
    json_t *body = NULL, *message = NULL;
    if (e2b_envd_user(req->connection, false, &err) &&
        (body = e2b_connect_unary_request(req, &err))) {
        /* What a call leaves that could not build its answer (json_pack). */
        http_error_set(&err, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal", "out of memory");
        message = call(req, &view, body, &err);
    }
    e2b_sandbox_view_release(&view);
    json_decref(body);
    return message ? e2b_connect_reply(req, message) : http_reply_error(req, &err);
}

/* A stream's slot goes (a stream's slot is never polled, so it is freed
 * here). */
static void release(watcher *w)
{
    watcher *freed = NULL;
    pthread_mutex_lock(&registry_lock);
    unlink_watcher(w, &freed);
    pthread_mutex_unlock(&registry_lock);
    free_unlinked(freed);
}

void e2b_watchers_sandbox_gone(const char *sandbox_id)
{
    watcher *freed = NULL;
    pthread_mutex_lock(&registry_lock);
    for (watcher **at = &registry; *at;) {
        watcher *w = *at;
        if (strcmp(w->sandbox_id, sandbox_id)) {
            at = &w->next;
        } else if (w->polled) {
            unlink_at(at, &freed);
        } else {
            w->gone = true; /* its producer ends the stream */
            at = &w->next;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    free_unlinked(freed);
}

static const char *event_type(rbx_file_change change)
{
    switch (change) {
    case RBX_FILE_CREATED: return "EVENT_TYPE_CREATE";
    case RBX_FILE_WRITTEN: return "EVENT_TYPE_WRITE";
    case RBX_FILE_REMOVED: return "EVENT_TYPE_REMOVE";
    case RBX_FILE_RENAMED: return "EVENT_TYPE_RENAME";
    case RBX_FILE_CHMODDED: return "EVENT_TYPE_CHMOD";
    }
    return "EVENT_TYPE_UNSPECIFIED";
}

/* FilesystemEvent: the name relative to the watched directory, and with
 * include_entry the entry as it is now (when it still is). */
static json_t *event_json(rbx_file_watch *watch, bool include_entry, const rbx_file_event *e)
{
    json_t *event = json_pack("{s:o, s:s}", "name", http_json_text(e->name, strlen(e->name)),
                              "type", event_type(e->change));
    rbx_file_entry entry;
    rbx_error err;
    if (include_entry && e->change != RBX_FILE_REMOVED && e->change != RBX_FILE_RENAMED &&
        rbx_file_watch_stat(watch, e->name, &entry, &err) == RBX_OK) {
        json_object_set_new(event, "entry", e2b_envd_entry_json(&entry));
        rbx_file_entry_clear(&entry);
    }
    return event;
}

static bool get_flag(json_t *body, const char *camel, const char *snake, bool *value,
                     http_error *err)
{
    json_t *v = json_object_get(body, camel);
    if (!v)
        v = json_object_get(body, snake);
    if (v && !json_is_boolean(v)) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_argument", "'%s' must be true or false",
                       camel);
        return false;
    }
    *value = json_is_true(v);
    return true;
}

/* The watch a request asks for: its path, recursive and includeEntry. */
static bool watch_request(json_t *body, char *rel, size_t size, bool *recursive,
                          bool *include_entry, http_error *err)
{
    return e2b_envd_path_field(body, "path", rel, size, err) &&
           get_flag(body, "recursive", "recursive", recursive, err) &&
           get_flag(body, "includeEntry", "include_entry", include_entry, err);
}

/* --- WatchDir: a server stream ------------------------------------------------------- */

typedef struct watch_stream {
    e2b_stream *stream;
    rbx_file_watch *watch;
    watcher *slot;
    bool client_left;
} watch_stream;

static void send_event(void *arg, const rbx_file_event *e)
{
    watch_stream *ws = arg;
    if (!ws->client_left &&
        !e2b_stream_send(ws->stream, json_pack("{s:o}", "filesystem",
                                               event_json(ws->watch, ws->slot->include_entry, e))))
        ws->client_left = true;
}

static bool slot_gone(watcher *w)
{
    pthread_mutex_lock(&registry_lock);
    bool gone = w->gone;
    pthread_mutex_unlock(&registry_lock);
    return gone;
}

static void *produce(void *arg)
{
    watch_stream *ws = arg;
    http_error err;
    bool failed = false;
    ws->client_left = !e2b_stream_send(ws->stream, json_pack("{s:{}}", "start"));
    while (!ws->client_left && !e2b_stream_client_gone(ws->stream)) {
        if (slot_gone(ws->slot)) {
            http_error_set(&err, MHD_HTTP_BAD_GATEWAY, "unavailable", "sandbox %s was not found",
                           ws->slot->sandbox_id);
            failed = true;
            break;
        }
        struct pollfd p = {.fd = rbx_file_watch_fd(ws->watch), .events = POLLIN};
        if (poll(&p, 1, POLL_MS) <= 0)
            continue;
        bool dir_gone = false;
        rbx_file_watch_take(ws->watch, send_event, ws, &dir_gone);
        if (dir_gone && !ws->client_left) {
            http_error_set(&err, MHD_HTTP_NOT_FOUND, "not_found",
                           "the watched directory was removed");
            failed = true;
            break;
        }
    }
    e2b_stream_end(ws->stream, failed ? &err : NULL);
    rbx_file_watch_close(ws->watch);
    release(ws->slot);
    free(ws);
    return NULL;
}

enum MHD_Result e2b_handle_fs_watch_dir(http_request *req)
{
    http_error err;
    e2b_sandbox_view view;
    if (!e2b_sandbox_for_request(req->server, req->connection, E2B_PORT_ENVD, &view, &err))
        return e2b_stream_refused(req, &err);
    json_t *body = NULL;
    char rel[1100];
    bool recursive = false, include_entry = false;
    watcher *slot = NULL;
    rbx_file_watch *watch = NULL;
    rbx_error engine_err = {0};
    bool ok = e2b_envd_user(req->connection, false, &err) &&
              (body = e2b_connect_stream_request(req, &err)) &&
              watch_request(body, rel, sizeof rel, &recursive, &include_entry, &err) &&
              (slot = reserve(&view, include_entry, NULL, NULL, &err));
    if (ok && rbx_file_watch_open(req->server->engine, view.session_id, rel, recursive, &watch,
                                  &engine_err) != RBX_OK) {
        e2b_envd_engine_error(&err, &engine_err);
        ok = false;
    }
    json_decref(body);
    e2b_sandbox_view_release(&view);
    watch_stream *ws = ok ? calloc(1, sizeof *ws) : NULL;
    if (!ws) {
        rbx_file_watch_close(watch);
        if (slot)
            release(slot);
        if (ok)
            http_error_set(&err, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal", "out of memory");
        return e2b_stream_refused(req, &err);
    }
    enum MHD_Result queued;
    *ws = (watch_stream){.watch = watch, .slot = slot};
    ws->stream = e2b_stream_open(req, "{\"keepalive\":{}}", &queued);
    if (ws->stream) /* the sandbox's kill ends it, read or not */
        (void)e2b_stream_join(ws->stream, slot->sandbox_id);
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (!ws->stream || pthread_create(&thread, &attr, produce, ws) != 0) {
        if (ws->stream) {
            http_error_set(&err, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable",
                           "cannot start the watch's thread");
            e2b_stream_end(ws->stream, &err);
        }
        rbx_file_watch_close(watch);
        release(slot);
        free(ws);
    }
    pthread_attr_destroy(&attr);
    return queued;
}

/* --- The polling watcher ------------------------------------------------------------- */

static json_t *create_watcher_call(http_request *req, const e2b_sandbox_view *view,
                                   json_t *body, http_error *err)
{
    char rel[1100];
    bool recursive = false, include_entry = false;
    rbx_file_watch *watch = NULL;
    rbx_error engine_err = {0};
    if (!watch_request(body, rel, sizeof rel, &recursive, &include_entry, err))
        return NULL;
    if (rbx_file_watch_open(req->server->engine, view->session_id, rel, recursive, &watch,
                            &engine_err) != RBX_OK) {
        e2b_envd_engine_error(err, &engine_err);
        return NULL;
    }
    char id[WATCHER_ID_SIZE];
    if (!reserve(view, include_entry, watch, id, err)) {
        rbx_file_watch_close(watch);
        return NULL;
    }
    return json_pack("{s:s}", "watcherId", id);
}

enum MHD_Result e2b_handle_fs_create_watcher(http_request *req)
{
    return e2b_fs_unary(req, create_watcher_call);
}

/* The request's watcher of its sandbox (the lock held); NULL with err. */
static watcher *find_polled(json_t *body, const char *sandbox_id, http_error *err)
{
    json_t *id = json_object_get(body, "watcherId");
    if (!id)
        id = json_object_get(body, "watcher_id");
    if (!json_is_string(id)) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_argument",
                       "'watcherId' (a string) is required");
        return NULL;
    }
    for (watcher *w = registry; w; w = w->next)
        if (w->polled && !strcmp(w->id, json_string_value(id)) &&
            !strcmp(w->sandbox_id, sandbox_id))
            return w;
    http_error_set(err, MHD_HTTP_NOT_FOUND, "not_found", "watcher %.64s was not found",
                   json_string_value(id));
    return NULL;
}

typedef struct polled_events {
    const watcher *w;
    json_t *events;
} polled_events;

static void collect_event(void *arg, const rbx_file_event *e)
{
    polled_events *p = arg;
    json_array_append_new(p->events, event_json(p->w->watch, p->w->include_entry, e));
}

/* The watcher is held (polls) while its events are taken without the
 * registry's lock: a RemoveWatcher, its sandbox's end or a sweep meanwhile
 * only unlinks it, and the last poll holding it frees it. */
static json_t *get_watcher_events_call(http_request *req, const e2b_sandbox_view *view,
                                       json_t *body, http_error *err)
{
    watcher *freed = NULL;
    pthread_mutex_lock(&registry_lock);
    sweep_idle(&freed);
    watcher *w = find_polled(body, view->id, err);
    if (w) {
        w->polls++;
        w->last_used_us = http_now_us();
    }
    pthread_mutex_unlock(&registry_lock);
    free_unlinked(freed);
    if (!w)
        return NULL;
    polled_events p = {.w = w, .events = json_array()};
    bool dir_gone = false;
    pthread_mutex_lock(&w->taking);
    rbx_file_watch_take(w->watch, collect_event, &p, &dir_gone);
    pthread_mutex_unlock(&w->taking);
    pthread_mutex_lock(&registry_lock);
    w->last_used_us = http_now_us();
    if (dir_gone && !w->unlinked) /* what it saw last is answered; the next poll finds none */
        unlink_watcher(w, &freed);
    bool last = --w->polls == 0 && w->unlinked;
    pthread_mutex_unlock(&registry_lock);
    if (last)
        watcher_free(w);
    return json_pack("{s:o}", "events", p.events);
}

enum MHD_Result e2b_handle_fs_get_watcher_events(http_request *req)
{
    return e2b_fs_unary(req, get_watcher_events_call);
}

static json_t *remove_watcher_call(http_request *req, const e2b_sandbox_view *view,
                                   json_t *body, http_error *err)
{
    watcher *freed = NULL;
    pthread_mutex_lock(&registry_lock);
    watcher *w = find_polled(body, view->id, err);
    if (w)
        unlink_watcher(w, &freed);
    pthread_mutex_unlock(&registry_lock);
    free_unlinked(freed); /* unless a poll holds it */
    return w ? json_object() : NULL;
}

enum MHD_Result e2b_handle_fs_remove_watcher(http_request *req)
{
    return e2b_fs_unary(req, remove_watcher_call);
}
