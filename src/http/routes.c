/* The routes: one table, which docs/openapi.json describes route by route
 * (tests/http/test_openapi.py holds them to each other). */
#include "http/http.h"

#include <stdlib.h>
#include <string.h>

static const route runbox_routes[] = {
    {"GET", "/", http_handle_page, BODY_NONE, true},
    {"GET", "/playground/app.js", http_handle_page, BODY_NONE, true},
    {"GET", "/playground/app.css", http_handle_page, BODY_NONE, true},
    {"GET", "/healthz", http_handle_health, BODY_NONE, true},
    {"GET", "/livez", http_handle_live, BODY_NONE, true},
    {"POST", "/v1/admin/drain", http_handle_drain, BODY_JSON_OPTIONAL, false},
    {"GET", "/metrics", http_handle_metrics, BODY_NONE, false},
    {"GET", "/openapi.json", http_handle_openapi, BODY_NONE, false},
    {"POST", "/v1/execute", http_handle_execute, BODY_JSON, false},
    {"GET", "/v1/images", http_handle_images, BODY_NONE, false},
    {"GET", "/v1/sessions", http_handle_sessions_list, BODY_NONE, false},
    {"POST", "/v1/sessions", http_handle_sessions_create, BODY_JSON_OPTIONAL, false},
    {"GET", "/v1/sessions/{id}", http_handle_session_get, BODY_NONE, false},
    {"DELETE", "/v1/sessions/{id}", http_handle_session_delete, BODY_NONE, false},
    {"POST", "/v1/sessions/{id}/restart", http_handle_session_restart, BODY_JSON_OPTIONAL, false},
    {"POST", "/v1/sessions/{id}/execute", http_handle_execute, BODY_JSON, false},
    {"GET", "/v1/sessions/{id}/export", http_handle_session_export, BODY_NONE, false},
    {"POST", "/v1/sessions/{id}/import", http_handle_session_import, BODY_RAW, false},
    {"GET", "/v1/sessions/{id}/files", http_handle_files_list, BODY_NONE, false},
    {"GET", "/v1/sessions/{id}/files/{path}", http_handle_file_get, BODY_NONE, false},
    {"PUT", "/v1/sessions/{id}/files/{path}", http_handle_file_put, BODY_RAW, false},
    {"DELETE", "/v1/sessions/{id}/files/{path}", http_handle_file_delete, BODY_NONE, false},
};

const http_api http_runbox_api = {
    .name = "runbox",
    .routes = runbox_routes,
    .route_count = sizeof runbox_routes / sizeof *runbox_routes,
    .authorized = http_auth_ok,
    .unauthorized = "'Authorization: Bearer TOKEN'",
};

typedef struct span {
    const char *start;
    size_t len;
} span;

/* Matches a decoded path against a pattern: {id} is one non-empty
 * segment, {path} the non-empty rest (slashes included). */
static bool match(const char *pattern, const char *path, span *id, span *rest)
{
    while (*pattern) {
        if (!strncmp(pattern, "{id}", 4)) {
            size_t n = strcspn(path, "/");
            if (n == 0)
                return false;
            *id = (span){path, n};
            path += n;
            pattern += 4;
        } else if (!strcmp(pattern, "{path}")) {
            *rest = (span){path, strlen(path)};
            return *path != 0;
        } else if (*pattern++ != *path++) {
            return false;
        }
    }
    return *path == 0;
}

/* HEAD is answered wherever GET is (MHD leaves the body out). */
static bool method_matches(const char *wanted, const char *method)
{
    return !strcmp(wanted, method) || (!strcmp(wanted, "GET") && !strcmp(method, "HEAD"));
}

static enum MHD_Result not_allowed(http_request *req, const char *allow)
{
    http_error err;
    http_error_set(&err, MHD_HTTP_METHOD_NOT_ALLOWED, "method_not_allowed",
                   "%.16s is not allowed here (allowed: %s)", req->method, allow);
    json_t *body = req->api->error_body ? req->api->error_body(&err) : json_object();
    if (!req->api->error_body)
        json_object_set_new(body, "error", http_error_json(&err));
    return http_reply_json(req, MHD_HTTP_METHOD_NOT_ALLOWED, body, MHD_HTTP_HEADER_ALLOW, allow);
}

bool http_route(http_request *req, enum MHD_Result *queued)
{
    char allow[64] = "";
    const route *routes = req->api->routes;
    for (size_t i = 0; i < req->api->route_count; i++) {
        span id = {0}, rest = {0};
        /* A route without a handler is a placeholder: not served yet. */
        if (!routes[i].handle || !match(routes[i].pattern, req->path, &id, &rest))
            continue;
        if (!method_matches(routes[i].method, req->method)) {
            size_t used = strlen(allow);
            snprintf(allow + used, sizeof allow - used, "%s%s%s", used ? ", " : "",
                     routes[i].method, strcmp(routes[i].method, "GET") ? "" : ", HEAD");
            continue;
        }
        req->route = &routes[i];
        req->session_id = id.start ? strndup(id.start, id.len) : NULL;
        req->file_path = rest.start ? strndup(rest.start, rest.len) : NULL;
        if ((id.start && !req->session_id) || (rest.start && !req->file_path)) {
            *queued = MHD_NO;
            return false;
        }
        return true;
    }
    if (allow[0])
        *queued = not_allowed(req, allow);
    else
        *queued =
            http_reply_fail(req, MHD_HTTP_NOT_FOUND, "not_found", "no such route: %.200s%s",
                            req->path, req->api == &http_runbox_api ? " (see /openapi.json)" : "");
    return false;
}

bool http_route_is_open(const http_api *api, const char *path)
{
    for (size_t i = 0; i < api->route_count; i++)
        if (api->routes[i].open && !strcmp(api->routes[i].pattern, path))
            return true;
    return false;
}

enum MHD_Result http_handle_openapi(http_request *req)
{
    size_t len = (size_t)http_openapi_json_size;
    struct MHD_Response *response =
        MHD_create_response_from_buffer(len, (void *)http_openapi_json, MHD_RESPMEM_PERSISTENT);
    if (!response)
        return MHD_NO;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    return http_reply(req, MHD_HTTP_OK, response, len);
}
