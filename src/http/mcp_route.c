/* /mcp: MCP's Streamable HTTP transport (MCP 2025-03-26, 2025-06-18 and
 * 2025-11-25; 2026-07-28, which has no sessions, in serve_stateless).
 * POST carries one JSON-RPC message: a request is answered with
 * application/json, or, for a tools/call of a client that accepts it,
 * text/event-stream (its progress, then its result); notifications and
 * responses get 202. GET opens the server's own SSE stream (one per
 * session), DELETE ends the session. The initialize request opens a
 * session and its answer names it in Mcp-Session-Id, which every later
 * request must send (400 without it, 404 for one that has ended). The
 * token, Origin and Host rules are those of the rest of the API (the
 * request's head was checked in server.c before any of this). Errors are
 * JSON-RPC error objects, as MCP clients expect. */
#include "http/mcp_http.h"

#include "api/base64.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The revisions an MCP-Protocol-Version header of a session may name
 * (those the MCP server negotiates; lifecycle.c). 2026-07-28 has no
 * sessions: its requests are served one by one (serve_stateless). */
static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};
/* The TypeScript SDK's code for an unknown session. */
#define RPC_SESSION_NOT_FOUND (-32001)

static json_t *rpc_error_body(json_t *id, int code, const char *message, json_t *data)
{
    json_t *error = json_pack("{s:i, s:o}", "code", code, "message",
                              http_json_text(message, strlen(message)));
    if (data)
        json_object_set_new(error, "data", data);
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error",
                     error);
}

/* The API's errors (token, origin, body size, content type) as JSON-RPC. */
static json_t *error_body(const http_error_view *err)
{
    int code = err->status == MHD_HTTP_NOT_FOUND     ? RPC_SESSION_NOT_FOUND
               : err->status == MHD_HTTP_BAD_REQUEST ? RPC_INVALID_REQUEST
                                                     : RPC_SERVER_BUSY;
    return rpc_error_body(NULL, code, err->message, NULL);
}

__attribute__((format(printf, 6, 7))) static enum MHD_Result
reply_rpc_error(http_request *req, unsigned status, json_t *id, int code, json_t *data,
                const char *fmt, ...)
{
    char message[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return http_reply_json(req, status, rpc_error_body(id, code, message, data), NULL, NULL);
}

static const char *header(http_request *req, const char *name)
{
    return MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, name);
}

/* Whether the Accept header takes type ("text/event-stream"); a missing
 * header takes JSON only. */
static bool accepts(http_request *req, const char *type)
{
    const char *accept = header(req, MHD_HTTP_HEADER_ACCEPT);
    if (!accept)
        return !strcmp(type, "application/json");
    const char *slash = strchr(type, '/');
    char family[32];
    snprintf(family, sizeof family, "%.*s/*", (int)(slash - type), type);
    return strcasestr(accept, type) || strstr(accept, "*/*") || strcasestr(accept, family);
}

static bool version_known(const char *version)
{
    for (size_t i = 0; i < sizeof versions / sizeof *versions; i++)
        if (!strcmp(version, versions[i]))
            return true;
    return false;
}

/* 400 for an MCP-Protocol-Version the server does not speak. */
static bool version_refused(http_request *req, json_t *id, enum MHD_Result *queued)
{
    const char *version = header(req, "MCP-Protocol-Version");
    if (!version || version_known(version))
        return false;
    *queued = reply_rpc_error(req, MHD_HTTP_BAD_REQUEST, id, RPC_UNSUPPORTED_VERSION,
                              json_pack("{s:o, s:s%}", "supported", mcp_supported_versions(),
                                        "requested", version, strnlen(version, 40)),
                              "Unsupported protocol version %.40s (MCP-Protocol-Version); this "
                              "server speaks " MCP_STATELESS_VERSION " (no initialize), and "
                              "2025-11-25, 2025-06-18 and 2025-03-26 (initialize with one)",
                              version);
    return true;
}

/* The session a request names; NULL with the reply queued otherwise. */
static mcp_session *named_session(http_request *req, json_t *id, enum MHD_Result *queued)
{
    const char *session_id = header(req, "Mcp-Session-Id");
    if (!session_id) {
        *queued = reply_rpc_error(req, MHD_HTTP_BAD_REQUEST, id, RPC_INVALID_REQUEST,
                                  NULL,
                                  "Bad Request: send the Mcp-Session-Id header that the "
                                  "initialize response gave (only initialize comes without one)");
        return NULL;
    }
    mcp_session *session = mcp_session_find(req->server->mcp, session_id);
    if (!session)
        *queued = reply_rpc_error(req, MHD_HTTP_NOT_FOUND, id, RPC_SESSION_NOT_FOUND, NULL,
                                  "Session not found: it ended (deleted, idle for too long, or "
                                  "the server restarted) or never existed; initialize a new one");
    return session;
}

static enum MHD_Result accepted(http_request *req)
{
    struct MHD_Response *response = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    if (!response)
        return MHD_NO;
    return http_reply(req, MHD_HTTP_ACCEPTED, response, 0);
}

/* The body as one JSON-RPC message; NULL with the reply queued otherwise. */
static json_t *read_message(http_request *req, rpc_message *message, rpc_kind *kind,
                            enum MHD_Result *queued)
{
    const http_body *body = &req->body;
    if (!http_json_depth_ok(body->data, body->len)) {
        *queued = reply_rpc_error(req, MHD_HTTP_BAD_REQUEST, NULL, RPC_PARSE_ERROR, NULL,
                                  "Parse error: the JSON is nested too deep");
        return NULL;
    }
    json_error_t error;
    json_t *json = json_loadb(body->data ? body->data : "", body->len,
                              JSON_DECODE_ANY | JSON_ALLOW_NUL, &error);
    if (!json) {
        *queued = reply_rpc_error(req, MHD_HTTP_BAD_REQUEST, NULL, RPC_PARSE_ERROR, NULL,
                                  "Parse error: %s (at byte %d)", error.text, error.position);
        return NULL;
    }
    char why[300];
    *kind = rpc_read(json, message, why, sizeof why);
    if (*kind == RPC_INVALID) {
        *queued = reply_rpc_error(req, MHD_HTTP_BAD_REQUEST, message->id, RPC_INVALID_REQUEST,
                                  NULL, "Invalid Request: %s", why);
        json_decref(json);
        return NULL;
    }
    return json;
}

/* A request: its exchange waits for what the MCP server sends for it. */
static enum MHD_Result take_request(http_request *req, mcp_session *session, bool opened,
                                    json_t *json, const rpc_message *message)
{
    bool call = !strcmp(message->method, "tools/call");
    json_t *token = json_object_get(json_object_get(message->params, "_meta"), "progressToken");
    bool sse = call && accepts(req, "text/event-stream");
    http_error err;
    /* The exchange takes a reference of its own; the caller keeps its. */
    mcp_session_hold(session);
    mcp_exchange *exchange =
        mcp_exchange_open(req, session, message->id, call ? token : NULL, sse, &err);
    if (!exchange)
        return reply_rpc_error(req, err.status, message->id, RPC_INVALID_REQUEST, NULL, "%s",
                               err.message);
    mcp_session_take(session, json);
    /* A session opens with a successful initialize; a failed one ends it
     * (its error still goes to the client, without a session id). */
    bool named = opened && session->server->version;
    if (opened && !named)
        mcp_session_end(session, "initialize_failed");
    return mcp_exchange_reply(req, exchange, named ? session->id : NULL);
}

/* MCP 2026-07-28: its MCP-Protocol-Version header, or (a client that
 * forgot it, to be told so) a request without a session whose _meta names
 * a revision. */
static bool stateless_request(http_request *req, rpc_kind kind, const rpc_message *message)
{
    const char *version = header(req, "MCP-Protocol-Version");
    if (version)
        return !strcmp(version, MCP_STATELESS_VERSION);
    return kind == RPC_REQUEST && !header(req, "Mcp-Session-Id") &&
           strcmp(message->method, "initialize") &&
           json_object_get(json_object_get(message->params, "_meta"),
                           "io.modelcontextprotocol/protocolVersion");
}

static enum MHD_Result count_routing_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                            const char *value)
{
    (void)kind;
    (void)value;
    static const char *const names[] = {"MCP-Protocol-Version", "Mcp-Method", "Mcp-Name"};
    const char **duplicated = cls;
    for (size_t i = 0; i < 3; i++)
        if (!strcasecmp(key, names[i])) {
            unsigned bit = 1u << i;
            if (((uintptr_t)duplicated[1]) & bit)
                duplicated[0] = names[i];
            duplicated[1] = (const char *)((uintptr_t)duplicated[1] | bit);
        }
    return MHD_YES;
}

/* A header's value as the client meant it: without the spaces around it
 * (HTTP's optional whitespace), and a "=?base64?...?=" one (how a value
 * that no header can carry is sent) decoded; malloc'ed, NULL for none or a
 * bad encoding. */
static char *header_text(http_request *req, const char *name)
{
    const char *value = header(req, name);
    if (!value)
        return NULL;
    value += strspn(value, " \t");
    size_t len = strlen(value);
    while (len && (value[len - 1] == ' ' || value[len - 1] == '\t'))
        len--;
    if (len >= 12 && !strncmp(value, "=?base64?", 9) && !strncmp(value + len - 2, "?=", 2)) {
        char *decoded;
        size_t decoded_len;
        if (!api_base64_decode(value + 9, len - 11, &decoded, &decoded_len))
            return NULL;
        /* Not NUL-terminated; a NUL inside names nothing. */
        char *text = memchr(decoded, 0, decoded_len) ? NULL : strndup(decoded, decoded_len);
        free(decoded);
        return text;
    }
    return strndup(value, len);
}

/* The envelope's checks (src/mcp/envelope.c) with the headers: errors go
 * back at once with their HTTP status, and no MCP server is made. */
static bool envelope_refused(http_request *req, const rpc_message *message,
                             enum MHD_Result *queued)
{
    const char *duplicated[2] = {NULL, NULL};
    MHD_get_connection_values(req->connection, MHD_HEADER_KIND, count_routing_header,
                              duplicated);
    char *version = header_text(req, "MCP-Protocol-Version");
    char *method = header_text(req, "Mcp-Method");
    char *name = header_text(req, "Mcp-Name");
    mcp_envelope_headers headers = {
        .version = version, .method = method, .name = name, .duplicated = duplicated[0]};
    json_t *data;
    char why[300];
    int code = mcp_envelope_check(message->method, message->params, &headers, &data, why,
                                  sizeof why);
    free(version);
    free(method);
    free(name);
    if (!code)
        return false;
    *queued = reply_rpc_error(req, mcp_http_status_of(code), message->id, code, data, "%s", why);
    return true;
}

/* One request of MCP 2026-07-28: an MCP server of its own answers it (a
 * call or a listen stream on text/event-stream when the client takes it),
 * and is gone with the answer. A notification is acknowledged and dropped
 * (a client cancels by closing its response). */
static enum MHD_Result serve_stateless(http_request *req, rpc_kind kind,
                                       const rpc_message *message, json_t *json)
{
    enum MHD_Result queued;
    if (kind == RPC_NOTIFICATION)
        return accepted(req);
    if (kind != RPC_REQUEST)
        return reply_rpc_error(req, MHD_HTTP_BAD_REQUEST, message->id, RPC_INVALID_REQUEST,
                               NULL, "Invalid Request: post a single JSON-RPC request or "
                                     "notification");
    bool listen = !strcmp(message->method, "subscriptions/listen");
    if (listen && !accepts(req, "text/event-stream"))
        return reply_rpc_error(req, MHD_HTTP_NOT_ACCEPTABLE, message->id, RPC_INVALID_REQUEST,
                               NULL, "Not Acceptable: a subscriptions/listen answer is "
                                     "text/event-stream");
    if (envelope_refused(req, message, &queued))
        return queued;
    char address[64];
    http_error err;
    mcp_client_address(req->connection, address, sizeof address);
    mcp_session *session = mcp_session_single(req->server->mcp, address, &err);
    if (!session)
        return reply_rpc_error(req, err.status, message->id, RPC_SERVER_BUSY, NULL, "%s",
                               err.message);
    bool streams = listen || !strcmp(message->method, "tools/call");
    json_t *token = json_object_get(json_object_get(message->params, "_meta"), "progressToken");
    mcp_exchange *exchange =
        mcp_exchange_open(req, session, message->id, streams ? token : NULL,
                          streams && accepts(req, "text/event-stream"), &err);
    if (!exchange)
        return reply_rpc_error(req, err.status, message->id, RPC_INVALID_REQUEST, NULL, "%s",
                               err.message);
    mcp_session_hold(session); /* across the take: the answer may end the exchange */
    mcp_session_take(session, json);
    queued = mcp_exchange_reply(req, exchange, NULL);
    mcp_session_release(session);
    return queued;
}

static enum MHD_Result handle_post(http_request *req)
{
    if (!accepts(req, "application/json") && !accepts(req, "text/event-stream"))
        return reply_rpc_error(req, MHD_HTTP_NOT_ACCEPTABLE, NULL, RPC_INVALID_REQUEST, NULL,
                               "Not Acceptable: accept application/json and text/event-stream");
    rpc_message message;
    rpc_kind kind;
    enum MHD_Result queued;
    json_t *json = read_message(req, &message, &kind, &queued);
    if (!json)
        return queued;
    if (stateless_request(req, kind, &message)) {
        queued = serve_stateless(req, kind, &message, json);
        json_decref(json);
        return queued;
    }
    bool initialize = kind == RPC_REQUEST && !strcmp(message.method, "initialize");
    mcp_session *session = NULL;
    if (initialize && !header(req, "Mcp-Session-Id")) {
        char address[64];
        http_error err;
        mcp_client_address(req->connection, address, sizeof address);
        if (!(session = mcp_session_open(req->server->mcp, address, &err)))
            queued = reply_rpc_error(req, err.status, message.id, RPC_SERVER_BUSY, NULL, "%s",
                                     err.message);
    } else if (!version_refused(req, message.id, &queued)) {
        session = named_session(req, message.id, &queued);
    }
    if (session && kind == RPC_REQUEST) {
        queued = take_request(req, session, initialize && !header(req, "Mcp-Session-Id"), json,
                              &message);
    } else if (session) {
        mcp_session_take(session, json);
        queued = accepted(req);
    }
    if (session)
        mcp_session_release(session);
    json_decref(json);
    return queued;
}

/* MCP 2026-07-28 has only POST: no session to stream for or to end. */
static bool post_only(http_request *req, enum MHD_Result *queued)
{
    const char *version = header(req, "MCP-Protocol-Version");
    if (!version || strcmp(version, MCP_STATELESS_VERSION))
        return false;
    struct MHD_Response *response = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    if (!response) {
        *queued = MHD_NO;
        return true;
    }
    MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "POST");
    *queued = http_reply(req, MHD_HTTP_METHOD_NOT_ALLOWED, response, 0);
    return true;
}

static enum MHD_Result handle_get(http_request *req)
{
    if (!accepts(req, "text/event-stream"))
        return reply_rpc_error(req, MHD_HTTP_NOT_ACCEPTABLE, NULL, RPC_INVALID_REQUEST, NULL,
                               "Not Acceptable: the GET stream is text/event-stream");
    enum MHD_Result queued;
    if (post_only(req, &queued) || version_refused(req, NULL, &queued))
        return queued;
    mcp_session *session = named_session(req, NULL, &queued);
    if (!session)
        return queued;
    /* No event ids are given, so a Last-Event-ID names nothing: nothing is
     * replayed, and the stream starts afresh. */
    http_error err;
    mcp_exchange *stream = mcp_exchange_open(req, session, NULL, NULL, true, &err);
    if (!stream)
        return reply_rpc_error(req, err.status, NULL, RPC_INVALID_REQUEST, NULL, "%s",
                               err.message);
    return mcp_exchange_reply(req, stream, NULL);
}

static enum MHD_Result handle_delete(http_request *req)
{
    enum MHD_Result queued;
    if (post_only(req, &queued) || version_refused(req, NULL, &queued))
        return queued;
    mcp_session *session = named_session(req, NULL, &queued);
    if (!session)
        return queued;
    mcp_session_end(session, "deleted");
    mcp_session_release(session);
    struct MHD_Response *response = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    if (!response)
        return MHD_NO;
    return http_reply(req, MHD_HTTP_NO_CONTENT, response, 0);
}

mcp_sessions *http_mcp_sessions_new(http_server *server)
{
    return mcp_sessions_new(server, mcp_exchange_route, mcp_exchange_end_all);
}

static const route mcp_routes[] = {
    {"POST", "/mcp", handle_post, BODY_JSON, false},
    {"GET", "/mcp", handle_get, BODY_NONE, false},
    {"DELETE", "/mcp", handle_delete, BODY_NONE, false},
};

const http_api http_mcp_api = {
    .name = "mcp",
    .routes = mcp_routes,
    .route_count = sizeof mcp_routes / sizeof *mcp_routes,
    .authorized = http_auth_ok,
    .unauthorized = "'Authorization: Bearer TOKEN' (the server's API token)",
    .error_body = error_body,
};
