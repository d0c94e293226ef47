/* E2B's sandboxes (http.h): a registry in memory, written whole to
 * <state>/e2b-sandboxes.json (a new file, mode 0600, renamed over the old
 * one) at each change, so that a restarted server, or one killed while
 * writing, finds the last complete list. The file holds the sandboxes'
 * access tokens: it is the server's own, like the state directory. */
#include "http/http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define SANDBOXES_FILE "e2b-sandboxes.json"
/* A sandbox's session is "e2b-" and its id (the contexts' defaults are
 * "e2b-<language>", which no sandbox id of ID_LEN characters can be). */
#define SESSION_PREFIX "e2b-"
/* E2B's ids are lowercase letters and digits: 20 of them are 103 bits. */
#define ID_LEN 20
/* Tokens: 32 random bytes as hex, 256 bits. */
#define TOKEN_BYTES 32

/* A killed sandbox's session, watched for a while (http.h). */
typedef struct grave {
    e2b_name session;
    int64_t killed_ms;
} grave;
#define GRAVES_MAX 256

struct e2b_sandboxes {
    pthread_mutex_t lock;
    char *path;
    e2b_sandbox *list;
    size_t count;
    grave graves[GRAVES_MAX]; /* a ring: the oldest goes first */
    size_t grave_next;
};

int64_t e2b_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* --- ids and tokens -------------------------------------------------------------------- */

static bool random_id(char *out, size_t len)
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    size_t n = 0;
    while (n < len) {
        unsigned char bytes[32];
        if (getrandom(bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes)
            return false;
        /* 252 = 7 x 36: rejecting the rest keeps every character equally likely. */
        for (size_t i = 0; i < sizeof bytes && n < len; i++)
            if (bytes[i] < 252)
                out[n++] = alphabet[bytes[i] % 36];
    }
    out[n] = 0;
    return true;
}

static bool random_token(char *out)
{
    unsigned char bytes[TOKEN_BYTES];
    if (getrandom(bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes)
        return false;
    for (size_t i = 0; i < sizeof bytes; i++)
        snprintf(out + 2 * i, 3, "%02x", bytes[i]);
    return true;
}

/* --- the file -------------------------------------------------------------------------- */

static json_t *sandbox_json(const e2b_sandbox *s)
{
    json_t *entry = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:O, s:O, s:I, s:I, s:b}", "id", s->id, "session_id",
        s->session_id, "envd_token", s->envd_token, "traffic_token", s->traffic_token,
        "template_id", s->template_id, "image", s->image, "network", s->network, "metadata",
        s->metadata, "env_vars", s->env_vars, "started_ms", (json_int_t)s->started_ms, "end_ms",
        (json_int_t)s->end_ms, "paused", s->paused);
    if (entry)
        json_object_set_new(entry, "auto_pause", json_boolean(s->auto_pause));
    if (entry && s->egress_allow)
        json_object_set(entry, "egress_allow", s->egress_allow);
    if (entry && s->network_settings)
        json_object_set(entry, "network_settings", s->network_settings);
    return entry;
}

static bool copy_field(json_t *entry, const char *name, char *out, size_t size, bool empty_ok)
{
    const char *value = json_string_value(json_object_get(entry, name));
    if (!value || strlen(value) >= size || (!empty_ok && !*value))
        return false;
    memcpy(out, value, strlen(value) + 1);
    return true;
}

static bool strings_object(json_t *value)
{
    const char *key;
    json_t *item;
    if (!json_is_object(value))
        return false;
    json_object_foreach(value, key, item)
    {
        if (!json_is_string(item))
            return false;
    }
    return true;
}

/* Entries that do not make sense are skipped: the file is runbox's own,
 * and a sandbox lost is a 404 the SDKs understand. */
static bool valid_entry(json_t *entry, e2b_sandbox *out)
{
    *out = (e2b_sandbox){0};
    json_t *metadata = json_object_get(entry, "metadata");
    json_t *env_vars = json_object_get(entry, "env_vars");
    json_t *egress = json_object_get(entry, "egress_allow");
    json_t *network = json_object_get(entry, "network_settings");
    if (!copy_field(entry, "id", out->id, sizeof out->id, false) ||
        !copy_field(entry, "session_id", out->session_id, sizeof out->session_id, false) ||
        !rbx_session_id_valid(out->session_id) ||
        !copy_field(entry, "envd_token", out->envd_token, sizeof out->envd_token, false) ||
        !copy_field(entry, "traffic_token", out->traffic_token, sizeof out->traffic_token, false) ||
        !copy_field(entry, "template_id", out->template_id, sizeof out->template_id, false) ||
        !copy_field(entry, "image", out->image, sizeof out->image, true) ||
        !strings_object(metadata) || !strings_object(env_vars) ||
        (egress && !json_is_array(egress)) || (network && !json_is_object(network)))
        return false;
    out->network = (int)json_integer_value(json_object_get(entry, "network"));
    if (out->network < -1 || out->network > 1)
        out->network = -1;
    out->started_ms = json_integer_value(json_object_get(entry, "started_ms"));
    out->end_ms = json_integer_value(json_object_get(entry, "end_ms"));
    out->paused = json_is_true(json_object_get(entry, "paused"));
    out->auto_pause = json_is_true(json_object_get(entry, "auto_pause"));
    out->metadata = json_incref(metadata);
    out->env_vars = json_incref(env_vars);
    out->egress_allow = json_incref(egress);
    out->network_settings = json_incref(network);
    return true;
}

static bool load(e2b_sandboxes *r, char *why, size_t why_size)
{
    bool absent;
    json_t *root = e2b_state_load(r->path, &absent, why, why_size);
    if (!root)
        return absent;
    size_t i;
    json_t *entry;
    json_array_foreach(json_object_get(root, "sandboxes"), i, entry)
    {
        if (r->count < E2B_SANDBOXES_MAX && valid_entry(entry, &r->list[r->count]))
            r->count++;
    }
    json_decref(root);
    return true;
}

static bool save(e2b_sandboxes *r)
{
    json_t *list = json_array();
    for (size_t i = 0; i < r->count; i++)
        json_array_append_new(list, sandbox_json(&r->list[i]));
    return e2b_state_save(r->path, json_pack("{s:o}", "sandboxes", list));
}

/* --- the registry ---------------------------------------------------------------------- */

e2b_sandboxes *e2b_sandboxes_open(const char *state_dir, char *why, size_t why_size)
{
    e2b_sandboxes *r = calloc(1, sizeof *r);
    if (!r || asprintf(&r->path, "%s/" SANDBOXES_FILE, state_dir) < 0 ||
        !(r->list = calloc(E2B_SANDBOXES_MAX, sizeof *r->list))) {
        if (r)
            free(r->path);
        free(r);
        snprintf(why, why_size, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&r->lock, NULL);
    if (!load(r, why, why_size)) {
        e2b_sandboxes_free(r);
        return NULL;
    }
    return r;
}

void e2b_sandbox_release(e2b_sandbox *s)
{
    json_decref(s->metadata);
    json_decref(s->env_vars);
    json_decref(s->egress_allow);
    json_decref(s->network_settings);
    s->metadata = s->env_vars = s->egress_allow = s->network_settings = NULL;
}

void e2b_sandboxes_free(e2b_sandboxes *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->count; i++)
        e2b_sandbox_release(&r->list[i]);
    pthread_mutex_destroy(&r->lock);
    free(r->list);
    free(r->path);
    free(r);
}

static e2b_sandbox *find(e2b_sandboxes *r, const char *id)
{
    for (size_t i = 0; i < r->count; i++)
        if (!strcmp(r->list[i].id, id))
            return &r->list[i];
    return NULL;
}

/* A copy whose JSON fields are references of their own. */
static void copy_out(const e2b_sandbox *from, e2b_sandbox *out)
{
    *out = *from;
    json_incref(out->metadata);
    json_incref(out->env_vars);
    json_incref(out->egress_allow);
    json_incref(out->network_settings);
}

bool e2b_sandboxes_add(e2b_sandboxes *r, e2b_sandbox *sandbox, char *why, size_t why_size)
{
    if (!random_id(sandbox->id, ID_LEN) || !random_token(sandbox->envd_token) ||
        !random_token(sandbox->traffic_token)) {
        snprintf(why, why_size, "no randomness for a sandbox id");
        e2b_sandbox_release(sandbox);
        return false;
    }
    snprintf(sandbox->session_id, sizeof sandbox->session_id, SESSION_PREFIX "%.*s", ID_LEN,
             sandbox->id);
    pthread_mutex_lock(&r->lock);
    bool ok = r->count < E2B_SANDBOXES_MAX;
    if (ok) {
        copy_out(sandbox, &r->list[r->count++]);
        if (!(ok = save(r))) {
            e2b_sandbox_release(&r->list[--r->count]);
            snprintf(why, why_size, "cannot write %s: %s", r->path, strerror(errno));
        }
    } else {
        snprintf(why, why_size,
                 "there are %d sandboxes, the most this server keeps: kill one first",
                 E2B_SANDBOXES_MAX);
    }
    pthread_mutex_unlock(&r->lock);
    if (!ok)
        e2b_sandbox_release(sandbox);
    return ok;
}

bool e2b_sandboxes_get(e2b_sandboxes *r, const char *id, e2b_sandbox *out)
{
    pthread_mutex_lock(&r->lock);
    e2b_sandbox *found = find(r, id);
    if (found)
        copy_out(found, out);
    pthread_mutex_unlock(&r->lock);
    return found != NULL;
}

e2b_sandbox *e2b_sandboxes_all(e2b_sandboxes *r, size_t *count)
{
    pthread_mutex_lock(&r->lock);
    e2b_sandbox *all = calloc(r->count + 1, sizeof *all);
    *count = all ? r->count : 0;
    for (size_t i = 0; i < *count; i++)
        copy_out(&r->list[i], &all[i]);
    pthread_mutex_unlock(&r->lock);
    return all;
}

bool e2b_sandboxes_find_running(e2b_sandboxes *r, int64_t now_ms, e2b_sandbox_match *matches,
                                void *context, e2b_sandbox *out)
{
    pthread_mutex_lock(&r->lock);
    const e2b_sandbox *found = NULL;
    for (size_t i = 0; i < r->count && !found; i++)
        if (!r->list[i].paused && r->list[i].end_ms > now_ms && matches(&r->list[i], context))
            found = &r->list[i];
    if (found)
        copy_out(found, out);
    pthread_mutex_unlock(&r->lock);
    return found != NULL;
}

bool e2b_sandboxes_set_end(e2b_sandboxes *r, const char *id, int64_t end_ms)
{
    pthread_mutex_lock(&r->lock);
    e2b_sandbox *found = find(r, id);
    if (found) {
        found->end_ms = end_ms;
        (void)save(r); /* in force either way; a restart would keep the old end */
    }
    pthread_mutex_unlock(&r->lock);
    return found != NULL;
}

bool e2b_sandboxes_set_paused(e2b_sandboxes *r, const char *id, bool paused, int64_t end_ms,
                              bool *was_paused)
{
    pthread_mutex_lock(&r->lock);
    e2b_sandbox *found = find(r, id);
    bool changed = found && found->paused != paused;
    *was_paused = found && found->paused;
    if (changed) {
        found->paused = paused;
        found->end_ms = end_ms;
        (void)save(r);
    }
    pthread_mutex_unlock(&r->lock);
    return changed;
}

bool e2b_sandboxes_remove(e2b_sandboxes *r, const char *id, e2b_sandbox *removed)
{
    pthread_mutex_lock(&r->lock);
    e2b_sandbox *found = find(r, id);
    if (found) {
        *removed = *found;
        *found = r->list[--r->count];
        (void)save(r);
    }
    pthread_mutex_unlock(&r->lock);
    return found != NULL;
}

e2b_name *e2b_sandboxes_expired(e2b_sandboxes *r, int64_t now_ms, size_t *count)
{
    pthread_mutex_lock(&r->lock);
    e2b_name *ids = calloc(r->count + 1, sizeof *ids);
    size_t n = 0;
    for (size_t i = 0; ids && i < r->count; i++)
        if (!r->list[i].paused && r->list[i].end_ms <= now_ms)
            snprintf(ids[n++].text, sizeof ids->text, "%s", r->list[i].id);
    pthread_mutex_unlock(&r->lock);
    *count = n;
    return ids;
}

void e2b_sandboxes_bury(e2b_sandboxes *r, const char *session_id)
{
    pthread_mutex_lock(&r->lock);
    grave *g = &r->graves[r->grave_next++ % GRAVES_MAX];
    snprintf(g->session.text, sizeof g->session.text, "%s", session_id);
    g->killed_ms = e2b_now_ms();
    pthread_mutex_unlock(&r->lock);
}

e2b_name *e2b_sandboxes_graves(e2b_sandboxes *r, int64_t now_ms, size_t *count)
{
    pthread_mutex_lock(&r->lock);
    e2b_name *names = calloc(GRAVES_MAX, sizeof *names);
    size_t n = 0;
    for (size_t i = 0; names && i < GRAVES_MAX; i++) {
        const grave *g = &r->graves[i];
        if (g->session.text[0] && now_ms - g->killed_ms < E2B_GRAVE_S * 1000)
            names[n++] = g->session;
    }
    pthread_mutex_unlock(&r->lock);
    *count = n;
    return names;
}

/* --- requests to a sandbox ------------------------------------------------------------- */

const char *e2b_request_sandbox_id(struct MHD_Connection *connection)
{
    const char *id = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "E2b-Sandbox-Id");
    return id && *id && strcmp(id, E2B_DEBUG_SANDBOX_ID) ? id : NULL;
}

/* Takes time that depends on the expected token's length only. */
bool e2b_same_token(const char *given, const char *expected)
{
    size_t given_len = strlen(given), expected_len = strlen(expected);
    volatile unsigned char diff = given_len != expected_len;
    for (size_t i = 0; i < expected_len; i++)
        diff |= (unsigned char)(expected[i] ^ (i < given_len ? given[i] : 0));
    return diff == 0;
}

/* envd takes its access token only: E2B gives the traffic token for the
 * sandbox's public ports (the code interpreter's), never for envd's
 * files and processes. The code interpreter takes either, as the SDK
 * sends the traffic token on every request and the access token on
 * /execute; each token shown must be the sandbox's, and one must be. */
static bool tokens_match(struct MHD_Connection *connection, e2b_port port, const e2b_sandbox *s)
{
    const char *access =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "X-Access-Token");
    const char *traffic =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "E2B-Traffic-Access-Token");
    bool access_ok = access && e2b_same_token(access, s->envd_token);
    if (port == E2B_PORT_ENVD)
        return access_ok;
    bool traffic_ok = traffic && e2b_same_token(traffic, s->traffic_token);
    return (access || traffic) && (!access || access_ok) && (!traffic || traffic_ok);
}

/* The running sandbox the request names, once its token matches; the
 * caller releases it. */
static bool find_for_request(http_server *server, struct MHD_Connection *connection,
                             e2b_port port, e2b_sandbox *s, http_error *err)
{
    const char *id = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "E2b-Sandbox-Id");
    bool known = id && server->sandboxes && strlen(id) <= E2B_SANDBOX_ID_MAX &&
                 e2b_sandboxes_get(server->sandboxes, id, s);
    if (!known || s->paused || s->end_ms <= e2b_now_ms()) {
        if (known)
            e2b_sandbox_release(s);
        http_error_set(err, MHD_HTTP_BAD_GATEWAY, "not_found", "sandbox %.80s was not found",
                       id && strlen(id) <= E2B_SANDBOX_ID_MAX ? id : "(none or too long)");
        return false;
    }
    if (!tokens_match(connection, port, s)) {
        e2b_sandbox_release(s);
        if (port == E2B_PORT_ENVD)
            http_error_set(err, MHD_HTTP_UNAUTHORIZED, "unauthenticated",
                           "the sandbox's access token is missing or wrong: send the "
                           "envdAccessToken that creating or connecting to it returned as "
                           "X-Access-Token");
        else
            http_error_set(err, MHD_HTTP_UNAUTHORIZED, "unauthenticated",
                           "the sandbox's token is missing or wrong: send its "
                           "trafficAccessToken as E2B-Traffic-Access-Token or its "
                           "envdAccessToken as X-Access-Token");
        return false;
    }
    return true;
}

bool e2b_sandbox_for_request(http_server *server, struct MHD_Connection *connection,
                             e2b_port port, e2b_sandbox_view *view, http_error *err)
{
    e2b_sandbox s;
    return find_for_request(server, connection, port, &s, err) &&
           e2b_sandbox_found(server, &s, view, err);
}

/* The view of a sandbox found and checked: what the handlers run in. */
static bool view_of(http_server *server, const e2b_sandbox *s, e2b_sandbox_view *view,
                    http_error *err)
{
    *view = (e2b_sandbox_view){.network = s->network};
    snprintf(view->id, sizeof view->id, "%s", s->id);
    snprintf(view->session_id, sizeof view->session_id, "%s", s->session_id);
    snprintf(view->image, sizeof view->image, "%s", s->image);
    view->env = json_incref(s->env_vars);
    view->egress_allow = json_incref(s->egress_allow);
    /* Its session exists from its creation; a sandbox restored from the
     * file after the session went (a state directory cleaned by hand)
     * gets it back, empty. */
    rbx_error engine_err;
    if (!rbx_session_exists(server->engine, view->session_id) &&
        rbx_session_create(server->engine, view->session_id, &engine_err) != RBX_OK) {
        e2b_sandbox_view_release(view);
        http_error_from_engine(err, &engine_err);
        return false;
    }
    return true;
}

bool e2b_sandbox_found(http_server *server, e2b_sandbox *sandbox, e2b_sandbox_view *view,
                       http_error *err)
{
    bool ok = !view || view_of(server, sandbox, view, err);
    e2b_sandbox_release(sandbox);
    return ok;
}

void e2b_sandbox_view_release(e2b_sandbox_view *view)
{
    json_decref(view->env);
    json_decref(view->egress_allow);
    view->env = view->egress_allow = NULL;
}
