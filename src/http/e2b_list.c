/* GET /v2/sandboxes: E2B's list of sandboxes, filtered by metadata,
 * state, template and start, in pages (limit, nextToken; the next page's
 * token in the X-Next-Token header, none on the last). Sandboxes are
 * listed by their start (order asc, the default, or desc; ties by id), and
 * a token names the last one a page held, so a sandbox killed between
 * pages moves nothing. */
#include "api/percent.h"
#include "http/http.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LIST_DEFAULT_LIMIT 100
#define LIST_MAX_LIMIT 1000
#define METADATA_QUERY_MAX 8192

static const char *query(http_request *req, const char *name)
{
    return MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, name);
}

/* The metadata filter: after the query's own decoding a form string
 * k=v&k2=v2 whose parts the SDKs percent-encoded once more (E2B's
 * "a b" travels as a%252520b): each part is decoded twice. */
static json_t *metadata_filter(const char *value, http_error *err)
{
    json_t *filter = json_object();
    if (strlen(value) > METADATA_QUERY_MAX) {
        json_decref(filter);
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                       "the metadata filter is longer than %d bytes", METADATA_QUERY_MAX);
        return NULL;
    }
    char *text = strdup(value), *rest = text, *pair;
    bool ok = text != NULL;
    while (ok && (pair = strsep(&rest, "&"))) {
        if (!*pair)
            continue;
        char *eq = strchr(pair, '=');
        if (!eq) {
            ok = false;
            break;
        }
        *eq = 0;
        char *key = pair, *val = eq + 1;
        ok = api_percent_decode(key) && api_percent_decode(key) && api_percent_decode(val) &&
             api_percent_decode(val) && *key;
        if (ok)
            json_object_set_new(filter, key, json_string(val));
    }
    free(text);
    if (!ok || json_object_size(filter) > 64) {
        json_decref(filter);
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                       "the metadata filter is key=value pairs joined by &, each part "
                       "percent-encoded (at most 64 pairs)");
        return NULL;
    }
    return filter;
}

static bool metadata_matches(json_t *metadata, json_t *filter)
{
    const char *key;
    json_t *want;
    json_object_foreach(filter, key, want)
    {
        json_t *have = json_object_get(metadata, key);
        if (!have || strcmp(json_string_value(have), json_string_value(want)))
            return false;
    }
    return true;
}

/* state: running, paused, or both, comma-separated (absent: both). */
static bool state_filter(const char *value, bool *running, bool *paused, http_error *err)
{
    *running = *paused = !value;
    if (!value)
        return true;
    char *text = strdup(value), *rest = text, *state;
    bool ok = text != NULL;
    while (ok && (state = strsep(&rest, ","))) {
        if (!strcmp(state, "running"))
            *running = true;
        else if (!strcmp(state, "paused"))
            *paused = true;
        else
            ok = false;
    }
    free(text);
    if (!ok)
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                       "'state' is running, paused, or both comma-separated");
    return ok;
}

static bool limit_of(const char *value, size_t *limit, http_error *err)
{
    *limit = LIST_DEFAULT_LIMIT;
    if (!value)
        return true;
    char *end;
    long n = strtol(value, &end, 10);
    if (!*value || *end || n < 1 || n > LIST_MAX_LIMIT) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                       "'limit' must be a whole number from 1 to %d", LIST_MAX_LIMIT);
        return false;
    }
    *limit = (size_t)n;
    return true;
}

/* A page's token: "<start in ms>.<id>" of the last sandbox it held. */
typedef struct cursor {
    int64_t started_ms;
    char id[E2B_SANDBOX_ID_MAX + 1];
} cursor;

static bool cursor_of(const char *token, cursor *at, http_error *err)
{
    char *end;
    long long ms = strtoll(token, &end, 10);
    if (end == token || *end != '.' || ms < 0 || strlen(end + 1) == 0 ||
        strlen(end + 1) > E2B_SANDBOX_ID_MAX) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                       "'nextToken' is not one this server gave (X-Next-Token)");
        return false;
    }
    at->started_ms = ms;
    snprintf(at->id, sizeof at->id, "%s", end + 1);
    return true;
}

/* startedAfter: RFC 3339 / ISO 8601, 2026-01-02T03:04:05[.fff](Z|+hh:mm). */
static bool time_of(const char *text, int64_t *ms)
{
    struct tm tm = {0};
    const char *rest = strptime(text, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!rest)
        return false;
    int64_t fraction_ms = 0, scale = 100;
    if (*rest == '.')
        for (rest++; *rest >= '0' && *rest <= '9'; rest++, scale /= 10)
            fraction_ms += scale * (*rest - '0');
    int offset_s = 0, hours, minutes;
    if (*rest == 'Z' || *rest == 'z') {
        rest++;
    } else if ((*rest == '+' || *rest == '-') &&
               sscanf(rest + 1, "%2d:%2d", &hours, &minutes) == 2) {
        offset_s = (hours * 60 + minutes) * 60 * (*rest == '-' ? -1 : 1);
        rest += 6;
    } else if (*rest) {
        return false;
    }
    if (*rest)
        return false;
    *ms = ((int64_t)timegm(&tm) - offset_s) * 1000 + fraction_ms;
    return true;
}

static int by_start(const void *a, const void *b)
{
    const e2b_sandbox *x = a, *y = b;
    if (x->started_ms != y->started_ms)
        return x->started_ms < y->started_ms ? -1 : 1;
    return strcmp(x->id, y->id);
}

static int by_start_desc(const void *a, const void *b)
{
    return by_start(b, a);
}

/* Past the cursor in the listing's order. */
static bool after(const e2b_sandbox *s, const cursor *at, bool desc)
{
    if (at->started_ms < 0)
        return true;
    int order = s->started_ms != at->started_ms ? (s->started_ms > at->started_ms ? 1 : -1)
                                                : strcmp(s->id, at->id);
    return desc ? order < 0 : order > 0;
}

/* The filters of the query beside the page. */
typedef struct list_query {
    bool running, paused, desc;
    size_t limit;
    cursor at;
    json_t *metadata;
    const char *template_id;
    int64_t started_after_ms;
} list_query;

static bool query_of(http_request *req, list_query *q, http_error *err)
{
    *q = (list_query){.at.started_ms = -1, .started_after_ms = -1};
    const char *metadata = query(req, "metadata");
    const char *token = query(req, "nextToken");
    const char *order = query(req, "order");
    const char *started = query(req, "startedAfter");
    q->template_id = query(req, "template");
    if (!state_filter(query(req, "state"), &q->running, &q->paused, err) ||
        !limit_of(query(req, "limit"), &q->limit, err) ||
        (token && *token && !cursor_of(token, &q->at, err)) ||
        (metadata && !(q->metadata = metadata_filter(metadata, err))))
        return false;
    if (order && strcmp(order, "asc") && strcmp(order, "desc")) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request", "'order' is asc or desc");
        return false;
    }
    q->desc = order && !strcmp(order, "desc");
    if (started && !time_of(started, &q->started_after_ms)) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                       "'startedAfter' is a time such as 2026-01-02T03:04:05Z");
        return false;
    }
    return true;
}

static bool listed(const e2b_sandbox *s, const list_query *q, int64_t now)
{
    bool live = s->paused || s->end_ms > now; /* else gone at the reaper's next round */
    return live && after(s, &q->at, q->desc) && (s->paused ? q->paused : q->running) &&
           (!q->metadata || metadata_matches(s->metadata, q->metadata)) &&
           (!q->template_id || !strcmp(q->template_id, s->template_id)) &&
           s->started_ms >= q->started_after_ms;
}

enum MHD_Result e2b_handle_list(http_request *req)
{
    http_error err;
    list_query q;
    if (!query_of(req, &q, &err)) {
        json_decref(q.metadata);
        return http_reply_error(req, &err);
    }
    size_t count = 0;
    e2b_sandbox *all = e2b_sandboxes_all(req->server->sandboxes, &count);
    qsort(all, count, sizeof *all, q.desc ? by_start_desc : by_start);
    json_t *list = json_array();
    int64_t now = e2b_now_ms();
    char next[E2B_SANDBOX_ID_MAX + 32] = "";
    bool more = false; /* another sandbox is past this page: it gets a token */
    for (size_t i = 0; i < count && !more; i++) {
        if (!listed(&all[i], &q, now))
            continue;
        if (json_array_size(list) == q.limit) {
            more = true;
            continue;
        }
        json_array_append_new(list, e2b_listed_json(req->server, &all[i]));
        snprintf(next, sizeof next, "%lld.%s", (long long)all[i].started_ms, all[i].id);
    }
    for (size_t i = 0; i < count; i++)
        e2b_sandbox_release(&all[i]);
    free(all);
    json_decref(q.metadata);
    return http_reply_json(req, MHD_HTTP_OK, list, more ? "X-Next-Token" : NULL,
                           more ? next : NULL);
}
