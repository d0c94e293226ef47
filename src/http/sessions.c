/* Sessions: create, list, describe, remove. The fields are the CLI's
 * `sessions list --json` fields. */
#include "http/http.h"

#include <stdlib.h>
#include <string.h>

/* How long removal waits for executions it cancelled to let go. */
#define REMOVE_WAIT_S 10.0

static json_t *session_json(const rbx_session_info *info)
{
    json_t *obj = api_json_of_text(rbx_session_info_to_json(info));
    return obj ? obj : json_object();
}

/* The optional body names the session: {"session_id": "mine"}. */
static bool wanted_id(http_request *req, char *id, http_error *err)
{
    json_t *body;
    if (!http_body_json(req, &body, err))
        return false;
    json_t *given = body ? json_object_get(body, "session_id") : NULL;
    const char *name = given && json_is_string(given) ? json_string_value(given) : NULL;
    bool ok = false;
    if (body && json_object_size(body) != (given ? 1u : 0u))
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                       "unknown field in the body (accepted: session_id)");
    else if (given && !json_is_null(given) && !name)
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                       "'session_id' must be a string");
    else if (name && (!rbx_session_id_valid(name) || strlen(name) != json_string_length(given)))
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                       "invalid session id: it must match " RBX_SESSION_ID_PATTERN);
    else
        ok = true;
    /* Behind a balancer the header routed the request: it names the
     * session when the body does not, and must agree when it does. */
    const char *header = http_routed_session(req);
    if (ok && !http_session_agrees(req, name, err))
        ok = false;
    if (ok && (name || header))
        snprintf(id, RBX_SESSION_ID_MAX + 1, "%s", name ? name : header);
    else if (ok)
        rbx_session_id_new(id);
    json_decref(body);
    return ok;
}

enum MHD_Result http_handle_sessions_create(http_request *req)
{
    char id[RBX_SESSION_ID_MAX + 1];
    http_error err;
    if (!wanted_id(req, id, &err) || http_drain_refuses(req, id, &err))
        return http_reply_error(req, &err);
    rbx_error engine_err = {0};
    if (rbx_session_create(req->server->engine, id, &engine_err) != RBX_OK)
        return http_reply_engine(req, &engine_err);
    char location[RBX_SESSION_ID_MAX + 16];
    snprintf(location, sizeof location, "/v1/sessions/%s", id);
    return http_reply_json(req, MHD_HTTP_CREATED, json_pack("{s:s}", "session_id", id),
                           MHD_HTTP_HEADER_LOCATION, location);
}

enum MHD_Result http_handle_sessions_list(http_request *req)
{
    rbx_session_info *infos;
    size_t count;
    rbx_error err = {0};
    if (rbx_session_list(req->server->engine, &infos, &count, &err) != RBX_OK)
        return http_reply_engine(req, &err);
    json_t *list = json_array();
    for (size_t i = 0; i < count; i++)
        json_array_append_new(list, session_json(&infos[i]));
    free(infos);
    return http_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "sessions", list), NULL, NULL);
}

enum MHD_Result http_handle_session_get(http_request *req)
{
    rbx_session_info info;
    rbx_error err = {0};
    if (rbx_session_info_get(req->server->engine, req->session_id, &info, &err) != RBX_OK)
        return http_reply_engine(req, &err);
    return http_reply_json(req, MHD_HTTP_OK, session_json(&info), NULL, NULL);
}

/* Whatever runs in the session, or waits here to run in it, is stopped
 * first (queued ones too, which the engine does not know of yet); then
 * the session and its files go. */
enum MHD_Result http_handle_session_delete(http_request *req)
{
    rbx_engine *engine = req->server->engine;
    rbx_error err = {0};
    http_executions_cancel_session(req->server, req->session_id);
    if (rbx_session_remove(engine, req->session_id, REMOVE_WAIT_S, &err) != RBX_OK)
        return http_reply_engine(req, &err);
    return http_reply_json(req, MHD_HTTP_OK,
                           json_pack("{s:s, s:b}", "session_id", req->session_id, "removed", 1),
                           NULL, NULL);
}

/* Stops the session's kernels (its files stay): the next stateful call
 * starts afresh. ?language=python restarts one. */
enum MHD_Result http_handle_session_restart(http_request *req)
{
    const char *language =
        MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, "language");
    size_t stopped = 0;
    rbx_error err = {0};
    if (rbx_session_restart(req->server->engine, req->session_id, language, &stopped, &err) !=
        RBX_OK)
        return http_reply_engine(req, &err);
    return http_reply_json(
        req, MHD_HTTP_OK,
        json_pack("{s:s, s:I}", "session_id", req->session_id, "stopped", (json_int_t)stopped),
        NULL, NULL);
}
