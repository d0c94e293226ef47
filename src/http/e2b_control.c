/* E2B's control plane (../shared/E2B-SANDBOX-PROTOCOL.md section 2):
 * sandboxes made, listed, connected to, paused and killed. Errors are
 * {"code": <HTTP status>, "message"}, which both SDKs parse (Python
 * crashes on a documented error status without it, and JS decides "not
 * found" from the body's code). The list is in e2b_list.c, the bodies
 * the SDKs read in e2b_describe.c. */
#include "http/http.h"

#include <stdlib.h>
#include <string.h>

static json_t *control_error_body(const http_error *err)
{
    return json_pack("{s:i, s:o}", "code", (int)err->status, "message",
                     http_json_text(err->message, strlen(err->message)));
}

static enum MHD_Result not_found(http_request *req)
{
    return http_reply_fail(req, MHD_HTTP_NOT_FOUND, "not_found", "sandbox %.80s not found",
                           req->session_id);
}

static enum MHD_Result no_content(http_request *req)
{
    struct MHD_Response *response = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    if (!response)
        return MHD_NO;
    return http_reply(req, MHD_HTTP_NO_CONTENT, response, 0);
}

/* --- finding the sandbox of the path ----------------------------------------------------- */

/* Sandbox {id}, unless it is gone: one whose time is up but that the
 * reaper has not reached yet is killed (or paused) now, as it would be
 * within the second. */
static bool path_sandbox(http_request *req, e2b_sandbox *s)
{
    http_server *server = req->server;
    if (strlen(req->session_id) > E2B_SANDBOX_ID_MAX ||
        !e2b_sandboxes_get(server->sandboxes, req->session_id, s))
        return false;
    if (s->paused || s->end_ms > e2b_now_ms())
        return true;
    bool auto_pause = s->auto_pause, was_paused;
    e2b_sandbox_release(s);
    if (!auto_pause) {
        e2b_sandbox_kill(server, req->session_id);
        return false;
    }
    e2b_sandbox_pause(server, req->session_id, &was_paused);
    return e2b_sandboxes_get(server->sandboxes, req->session_id, s);
}

/* --- the routes ------------------------------------------------------------------------ */

static enum MHD_Result create_sandbox(http_request *req, json_t *body)
{
    http_error err;
    e2b_sandbox s;
    char why[300];
    if (http_drain_refuses(req, NULL, &err))
        return http_reply_error(req, &err);
    if (!e2b_create_settings(req->server, body, &s, &err))
        return http_reply_error(req, &err);
    if (!e2b_sandboxes_add(req->server->sandboxes, &s, why, sizeof why))
        return http_reply_fail(req, MHD_HTTP_SERVICE_UNAVAILABLE, "no_room", "%s", why);
    rbx_error engine_err;
    if (rbx_session_create(req->server->engine, s.session_id, &engine_err) != RBX_OK) {
        e2b_sandbox_kill(req->server, s.id);
        e2b_sandbox_release(&s);
        return http_reply_engine(req, &engine_err);
    }
    json_t *log = http_log_event("e2b_sandbox_created");
    json_object_set_new(log, "sandbox_id", json_string(s.id));
    json_object_set_new(log, "template", json_string(s.template_id));
    http_log_emit(log);
    json_t *reply = e2b_sandbox_json(&s);
    e2b_sandbox_release(&s);
    return http_reply_json(req, MHD_HTTP_CREATED, reply, NULL, NULL);
}

static enum MHD_Result handle_create(http_request *req)
{
    json_t *body;
    http_error err;
    if (!http_body_json(req, &body, &err))
        return http_reply_error(req, &err);
    enum MHD_Result queued = create_sandbox(req, body);
    json_decref(body);
    return queued;
}

/* Connect (and the older resume): a running sandbox is given at least
 * `timeout` more seconds (200); a paused one resumes with them (201): its
 * files are there, its kernels start afresh. resume_only: 409 when it runs. */
static enum MHD_Result connect_sandbox(http_request *req, bool resume_only)
{
    json_t *body;
    http_error err;
    int64_t timeout_s;
    if (!http_body_json(req, &body, &err))
        return http_reply_error(req, &err);
    bool timed = e2b_create_timeout(body, &timeout_s, &err);
    json_decref(body);
    if (!timed)
        return http_reply_error(req, &err);
    e2b_sandbox s;
    if (!path_sandbox(req, &s))
        return not_found(req);
    http_server *server = req->server;
    int64_t end_ms = e2b_now_ms() + timeout_s * 1000;
    unsigned status = MHD_HTTP_OK;
    bool was_paused;
    if (!s.paused && resume_only) {
        e2b_sandbox_release(&s);
        return http_reply_fail(req, MHD_HTTP_CONFLICT, "conflict", "sandbox %.80s is running",
                               req->session_id);
    }
    if (s.paused) {
        rbx_error engine_err;
        if (!rbx_session_exists(server->engine, s.session_id) &&
            rbx_session_create(server->engine, s.session_id, &engine_err) != RBX_OK) {
            e2b_sandbox_release(&s);
            return http_reply_engine(req, &engine_err);
        }
        if (e2b_sandboxes_set_paused(server->sandboxes, s.id, false, end_ms, &was_paused)) {
            e2b_sandbox_resume(server, s.id, s.session_id);
            status = MHD_HTTP_CREATED;
        }
    } else if (end_ms > s.end_ms) {
        e2b_sandboxes_set_end(server->sandboxes, s.id, end_ms);
    }
    json_t *reply = e2b_sandbox_json(&s);
    e2b_sandbox_release(&s);
    return http_reply_json(req, status, reply, NULL, NULL);
}

static enum MHD_Result handle_connect(http_request *req)
{
    return connect_sandbox(req, false);
}

static enum MHD_Result handle_resume(http_request *req)
{
    return connect_sandbox(req, true);
}

static enum MHD_Result handle_get(http_request *req)
{
    e2b_sandbox s;
    if (!path_sandbox(req, &s))
        return not_found(req);
    json_t *detail = e2b_detail_json(req->server, &s);
    e2b_sandbox_release(&s);
    return http_reply_json(req, MHD_HTTP_OK, detail, NULL, NULL);
}

static enum MHD_Result handle_kill(http_request *req)
{
    e2b_sandbox s;
    if (!path_sandbox(req, &s))
        return not_found(req);
    e2b_sandbox_release(&s);
    if (!e2b_sandbox_kill(req->server, req->session_id))
        return not_found(req);
    return no_content(req);
}

/* The sandbox ends `timeout` seconds from now, sooner or later than it
 * would have. */
static enum MHD_Result handle_timeout(http_request *req)
{
    json_t *body;
    http_error err;
    int64_t timeout_s;
    if (!http_body_json(req, &body, &err))
        return http_reply_error(req, &err);
    bool given = json_object_get(body, "timeout") != NULL;
    bool timed = e2b_create_timeout(body, &timeout_s, &err);
    json_decref(body);
    if (!timed)
        return http_reply_error(req, &err);
    if (!given)
        return http_reply_fail(req, MHD_HTTP_BAD_REQUEST, "invalid_request",
                               "'timeout' is required: the sandbox's seconds from now");
    e2b_sandbox s;
    if (!path_sandbox(req, &s))
        return not_found(req);
    e2b_sandbox_release(&s);
    if (!e2b_sandboxes_set_end(req->server->sandboxes, req->session_id,
                               e2b_now_ms() + timeout_s * 1000))
        return not_found(req);
    return no_content(req);
}

/* E2B's keep-alive: at least `duration` seconds more (never less). */
static enum MHD_Result handle_refresh(http_request *req)
{
    json_t *body;
    http_error err;
    if (!http_body_json(req, &body, &err))
        return http_reply_error(req, &err);
    json_t *duration = body ? json_object_get(body, "duration") : NULL;
    bool ok = !duration || (json_is_integer(duration) && json_integer_value(duration) >= 0 &&
                            json_integer_value(duration) <= 3600);
    int64_t seconds = duration ? json_integer_value(duration) : 60;
    json_decref(body);
    if (!ok)
        return http_reply_fail(req, MHD_HTTP_BAD_REQUEST, "invalid_request",
                               "'duration' must be a whole number of seconds from 0 to 3600");
    e2b_sandbox s;
    if (!path_sandbox(req, &s))
        return not_found(req);
    int64_t end_ms = e2b_now_ms() + seconds * 1000;
    if (end_ms > s.end_ms)
        e2b_sandboxes_set_end(req->server->sandboxes, s.id, end_ms);
    e2b_sandbox_release(&s);
    return no_content(req);
}

static enum MHD_Result handle_pause(http_request *req)
{
    json_t *body;
    http_error err;
    if (!http_body_json(req, &body, &err))
        return http_reply_error(req, &err);
    json_decref(body); /* memory snapshots are not kept: see e2b_sandbox_pause */
    e2b_sandbox s;
    if (!path_sandbox(req, &s))
        return not_found(req);
    e2b_sandbox_release(&s);
    bool was_paused;
    if (e2b_sandbox_pause(req->server, req->session_id, &was_paused))
        return no_content(req);
    if (was_paused)
        return http_reply_fail(req, MHD_HTTP_CONFLICT, "conflict",
                               "sandbox %.80s is already paused", req->session_id);
    return not_found(req);
}

/* One sample, now: memory of its live kernels, disk of its files. CPU use
 * is not measured per sandbox (0). */
static enum MHD_Result handle_metrics(http_request *req)
{
    e2b_sandbox s;
    if (!path_sandbox(req, &s))
        return not_found(req);
    http_server *server = req->server;
    rbx_session_info info = {0};
    rbx_error err;
    (void)rbx_session_info_get(server->engine, s.session_id, &info, &err);
    uint64_t memory = 0;
    for (size_t i = 0; i < info.kernel_count; i++)
        memory += info.kernels[i].memory_bytes;
    json_t *listed = e2b_listed_json(server, &s);
    e2b_sandbox_release(&s);
    int64_t now = e2b_now_ms();
    const rbx_config *config = rbx_engine_config(server->engine);
    json_t *sample = json_pack(
        "{s:o, s:I, s:O, s:f, s:I, s:I, s:I, s:I, s:I}", "timestamp", e2b_time_json(now),
        "timestampUnix", (json_int_t)(now / 1000), "cpuCount", json_object_get(listed, "cpuCount"),
        "cpuUsedPct", 0.0, "memUsed", (json_int_t)memory, "memTotal",
        (json_int_t)config->memory_mb * 1024 * 1024, "memCache", (json_int_t)0, "diskUsed",
        (json_int_t)info.disk_bytes, "diskTotal", (json_int_t)config->disk_cap_bytes);
    json_decref(listed);
    return http_reply_json(req, MHD_HTTP_OK, json_pack("[o]", sample), NULL, NULL);
}

/* The SDKs of today call the /v2 routes; older ones (E2B's 2.45) the
 * others, with the same bodies. */
static const route control_routes[] = {
    {"POST", "/v2/sandboxes", handle_create, BODY_JSON, false},
    {"POST", "/sandboxes", handle_create, BODY_JSON, false},
    {"GET", "/v2/sandboxes", e2b_handle_list, BODY_NONE, false},
    {"GET", "/sandboxes", e2b_handle_list, BODY_NONE, false},
    {"POST", "/v2/sandboxes/{id}/connect", handle_connect, BODY_JSON_OPTIONAL, false},
    {"POST", "/sandboxes/{id}/connect", handle_connect, BODY_JSON_OPTIONAL, false},
    {"POST", "/sandboxes/{id}/resume", handle_resume, BODY_JSON_OPTIONAL, false},
    {"GET", "/sandboxes/{id}", handle_get, BODY_NONE, false},
    {"DELETE", "/sandboxes/{id}", handle_kill, BODY_NONE, false},
    {"POST", "/sandboxes/{id}/timeout", handle_timeout, BODY_JSON, false},
    {"POST", "/sandboxes/{id}/refreshes", handle_refresh, BODY_JSON_OPTIONAL, false},
    {"POST", "/sandboxes/{id}/pause", handle_pause, BODY_JSON_OPTIONAL, false},
    {"GET", "/sandboxes/{id}/metrics", handle_metrics, BODY_NONE, false},
};

static bool control_authorized(const http_server *server, struct MHD_Connection *connection)
{
    static const char *const headers[] = {"X-API-KEY", NULL};
    return http_auth_ok_headers(server, connection, headers);
}

const http_api http_e2b_control_api = {
    .name = "e2b-api",
    .routes = control_routes,
    .route_count = sizeof control_routes / sizeof *control_routes,
    .authorized = control_authorized,
    .unauthorized = "'X-API-KEY: TOKEN' (E2B_API_KEY)",
    .error_body = control_error_body,
};
