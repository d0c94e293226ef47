/* E2B's code-interpreter protocol (../shared/E2B-PROTOCOL.md, checked
 * against the released e2b-code-interpreter SDK): POST /execute streams
 * NDJSON lines (stdout, stderr, result, error, number_of_executions,
 * end_of_execution, keepalive) from a stateful call into a context's
 * kernel; /contexts creates, lists, restarts and removes contexts. The
 * execution is runbox's own (limits, isolation, admission, interrupt when
 * the client leaves); only its events are written in E2B's words.
 *
 * A request naming a sandbox of the control plane (E2b-Sandbox-Id) runs
 * in that sandbox: its session, envVars, image and network, its own
 * contexts. One naming none, or E2B's debug sandbox, runs as before
 * sandboxes (the contexts of sandbox ""). */
#include "http/http.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* --- the stream in E2B's words ------------------------------------------------------- */

static char *line_of(json_t *object, size_t *len)
{
    char *json = object ? json_dumps(object, JSON_COMPACT) : NULL;
    json_decref(object);
    if (!json)
        return NULL;
    size_t n = strlen(json);
    char *line = realloc(json, n + 2);
    if (!line) {
        free(json);
        return NULL;
    }
    memcpy(line + n, "\n", 2);
    *len = n + 1;
    return line;
}

static json_int_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (json_int_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* E2B's result fields for Jupyter's MIME types; others go to "extra". */
static const char *const mime_fields[][2] = {
    {"text/plain", "text"},        {"text/html", "html"},
    {"text/markdown", "markdown"}, {"image/svg+xml", "svg"},
    {"image/png", "png"},          {"image/jpeg", "jpeg"},
    {"application/pdf", "pdf"},    {"text/latex", "latex"},
    {"application/json", "json"},  {"application/javascript", "javascript"},
};

/* E2B shows a string's repr without its quotes: 'abc' is text abc. */
static json_t *plain_text(json_t *value)
{
    const char *text = json_string_value(value);
    size_t len = json_string_length(value);
    if (text && len >= 2 && (text[0] == '\'' || text[0] == '"') && text[len - 1] == text[0])
        return json_stringn(text + 1, len - 2);
    return json_incref(value);
}

/* A rich output ({"kind", "data": {MIME: value}}) as a "result" line. */
static json_t *result_line(const char *data, size_t len)
{
    json_t *output = json_loadb(data, len, 0, NULL);
    json_t *bundle = json_object_get(output, "data");
    if (!json_is_object(bundle)) {
        json_decref(output);
        return NULL;
    }
    const char *kind = json_string_value(json_object_get(output, "kind"));
    json_t *line = json_pack("{s:s, s:b}", "type", "result", "is_main_result",
                             kind && !strcmp(kind, "execute_result"));
    json_t *extra = json_object();
    const char *mime;
    json_t *value;
    json_object_foreach(bundle, mime, value)
    {
        const char *field = NULL;
        for (size_t i = 0; i < sizeof mime_fields / sizeof *mime_fields && !field; i++)
            if (!strcmp(mime_fields[i][0], mime))
                field = mime_fields[i][1];
        if (!field)
            json_object_set(extra, mime, value);
        else if (!strcmp(field, "text"))
            json_object_set_new(line, field, plain_text(value));
        else
            json_object_set(line, field, value);
    }
    if (json_object_size(extra))
        json_object_set(line, "extra", extra);
    json_decref(extra);
    json_decref(output);
    return line;
}

static char *e2b_output(rbx_stream stream, const char *data, size_t len, size_t *frame_len)
{
    if (stream == RBX_DISPLAY)
        return line_of(result_line(data, len), frame_len);
    return line_of(json_pack("{s:s, s:o, s:I}", "type", stream == RBX_STDOUT ? "stdout" : "stderr",
                             "text", http_json_text(data, len), "timestamp", now_ns()),
                   frame_len);
}

/* The error's message: on the line that starts with its name (Python
 * prints it last, Node first), else the last line printed, else the exit
 * code (a failed shell command, sys.exit). */
/* Whether a traceback's line is "<type>: <value>" for the exception name:
 * the type is the name, or a dotted path ending in it, as Python prints a
 * class of another module or one defined in a function
 * (Tool.forward.<locals>.FinalAnswerException: ...). */
static bool names_exception(const char *line, const char *end, const char *name, size_t name_len)
{
    const char *colon = memchr(line, ':', (size_t)(end - line));
    if (!colon || colon + 1 >= end || colon[1] != ' ' || (size_t)(colon - line) < name_len ||
        memcmp(colon - name_len, name, name_len) != 0)
        return false;
    const char *type_start = colon - name_len;
    if (type_start > line && type_start[-1] != '.')
        return false;
    for (const char *c = line; c < colon; c++)
        if (*c == ' ' || *c == '\t')
            return false;
    return true;
}

static json_t *error_value(const char *name, const char *text, size_t len, int exit_code)
{
    size_t name_len = strlen(name);
    const char *found = NULL, *found_end = NULL, *last = NULL, *last_end = NULL;
    for (const char *line = text; line < text + len;) {
        const char *end = memchr(line, '\n', (size_t)(text + len - line));
        if (!end)
            end = text + len;
        if (names_exception(line, end, name, name_len)) {
            found = memchr(line, ':', (size_t)(end - line)) + 2;
            found_end = end;
        }
        if (end > line) {
            last = line;
            last_end = end;
        }
        line = end + 1;
    }
    if (found)
        return http_json_text(found, (size_t)(found_end - found));
    if (last)
        return http_json_text(last, (size_t)(last_end - last));
    char code[32];
    snprintf(code, sizeof code, "exit code %d", exit_code);
    return json_string(code);
}

/* An execution whose kernel had to start afresh (it died, or the sandbox
 * was paused or its server stopped where it could not hibernate) is told
 * so on its stderr: E2B's SDK shows it in execution.logs.stderr. */
static json_t *kernel_lost_line(const rbx_result *result)
{
    char note[300];
    snprintf(note, sizeof note,
             "runbox: this sandbox's %s kernel had to start afresh (it stopped, or the sandbox "
             "was paused or its server restarted where it could not hibernate): variables and "
             "imports are gone, files are kept\n",
             result->language ? result->language : "");
    return json_pack("{s:s, s:s, s:I}", "type", "stderr", "text", note, "timestamp", now_ns());
}

static char *e2b_end(const rbx_result *result, const http_error *err, size_t *frame_len)
{
    json_t *lines = json_array();
    if (result && result->kernel_restarted)
        json_array_append_new(lines, kernel_lost_line(result));
    if (!result) {
        json_array_append_new(lines,
                              json_pack("{s:s, s:s, s:s, s:s}", "type", "error", "name", err->code,
                                        "value", err->message, "traceback", err->message));
    } else {
        if (result->error_type) {
            const char *name = result->exception ? result->exception : result->error_type;
            json_array_append_new(
                lines,
                json_pack("{s:s, s:s, s:o, s:o}", "type", "error", "name", name, "value",
                          error_value(name, result->error, result->error_len, result->exit_code),
                          "traceback", http_json_text(result->error, result->error_len)));
        }
        json_array_append_new(lines,
                              json_pack("{s:s, s:I}", "type", "number_of_executions",
                                        "execution_count", (json_int_t)result->execution_count));
    }
    json_array_append_new(lines, json_pack("{s:s}", "type", "end_of_execution"));
    /* One frame of whole lines. */
    char *frame = NULL;
    size_t total = 0, i;
    json_t *line;
    json_array_foreach(lines, i, line)
    {
        size_t n;
        char *text = line_of(json_incref(line), &n);
        char *grown = text ? realloc(frame, total + n + 1) : NULL;
        if (!grown) {
            free(text);
            free(frame);
            json_decref(lines);
            return NULL;
        }
        frame = grown;
        memcpy(frame + total, text, n + 1);
        total += n;
        free(text);
    }
    json_decref(lines);
    *frame_len = total;
    return frame;
}

/* The SDK notices a dropped connection by these, and ignores them. */
static const stream_dialect e2b_dialect = {
    .output = e2b_output,
    .end = e2b_end,
    .keepalive = "{\"type\":\"keepalive\"}\n",
    .keepalive_ms = 5000,
    .content_type = "application/x-ndjson",
};

/* --- languages and contexts ---------------------------------------------------------- */

/* E2B's names (python, js, javascript, ts, typescript, bash, sh) are
 * runbox's languages and aliases. */
static const char *language_of(const char *name)
{
    return rbx_runtime_canonical(name);
}

static enum MHD_Result unknown_language(http_request *req, const char *name)
{
    return http_reply_fail(req, MHD_HTTP_BAD_REQUEST, "invalid_request",
                           "language '%.64s' is not served here (accepted: python, javascript "
                           "(js, typescript, ts), bash (sh))",
                           name);
}

static enum MHD_Result no_context(http_request *req, const char *id)
{
    return http_reply_fail(req, MHD_HTTP_NOT_FOUND, "not_found", "context %.80s not found", id);
}

/* A string field, or NULL when absent or null; false when it is another type. */
static bool optional_string(json_t *body, const char *name, const char **value)
{
    json_t *field = body ? json_object_get(body, name) : NULL;
    *value = json_string_value(field);
    return !field || json_is_null(field) || *value;
}

/* The sandbox the request is for: view.id "" for none (or the debug
 * one); else its own, once its token is right (else the reply is queued). */
static bool sandbox_of(http_request *req, e2b_sandbox_view *view, enum MHD_Result *queued)
{
    *view = (e2b_sandbox_view){.network = -1};
    if (!e2b_request_sandbox_id(req->connection))
        return true;
    http_error err;
    if (e2b_sandbox_for_request(req->server, req->connection, E2B_PORT_CODE_INTERPRETER, view,
                                &err))
        return true;
    *queued = http_reply_error(req, &err);
    return false;
}

/* --- POST /execute ------------------------------------------------------------------- */

/* The context the request names, or its language's default one. */
static bool context_for(http_request *req, json_t *body, const e2b_sandbox_view *sandbox,
                        e2b_context *context, enum MHD_Result *queued)
{
    const char *id, *language;
    if (!optional_string(body, "context_id", &id) ||
        !optional_string(body, "language", &language)) {
        *queued = http_reply_fail(req, MHD_HTTP_BAD_REQUEST, "invalid_request",
                                  "'context_id' and 'language' must be strings");
        return false;
    }
    if (id && language) {
        *queued = http_reply_fail(req, MHD_HTTP_BAD_REQUEST, "invalid_request",
                                  "give 'context_id' or 'language', not both: a context has its "
                                  "language");
        return false;
    }
    if (id) {
        if (!e2b_contexts_find(req->server->contexts, sandbox->id, id, context)) {
            *queued = no_context(req, id);
            return false;
        }
        return true;
    }
    const char *canonical = language_of(language ? language : "python");
    if (!canonical) {
        *queued = unknown_language(req, language);
        return false;
    }
    if (!e2b_contexts_default(req->server->contexts, sandbox->id,
                              sandbox->id[0] ? sandbox->session_id : NULL, canonical, context)) {
        *queued = http_reply_fail(req, MHD_HTTP_INTERNAL_SERVER_ERROR, "system_error",
                                  "cannot keep the default %s context", canonical);
        return false;
    }
    return true;
}

/* The sandbox's settings on runbox's request: its image, network and
 * egress, and its envVars under the call's own env_vars. */
static void apply_sandbox(json_t *request, const e2b_sandbox_view *sandbox, json_t *env_vars)
{
    if (sandbox->image[0])
        json_object_set_new(request, "image", json_string(sandbox->image));
    if (sandbox->network >= 0)
        json_object_set_new(request, "network", json_boolean(sandbox->network));
    if (sandbox->egress_allow)
        json_object_set(request, "egress_allow", sandbox->egress_allow);
    json_t *env = json_deep_copy(sandbox->env);
    if (env && json_is_object(env_vars))
        json_object_update(env, env_vars);
    if (env)
        json_object_set_new(request, "env", env);
    else if (env_vars && !json_is_null(env_vars))
        json_object_set(request, "env", env_vars);
}

/* runbox's own execute request for it: a stateful call in the context's
 * session, with the longest timeout the operator allows (E2B's clients
 * keep their own and disconnect, which interrupts the code). */
static json_t *runbox_request(const http_server *server, json_t *body, const e2b_context *context,
                              const e2b_sandbox_view *sandbox, http_error *err)
{
    json_t *code = json_object_get(body, "code");
    json_t *env = json_object_get(body, "env_vars");
    if (!json_is_string(code)) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                       "'code' is required: the code to run, a string");
        return NULL;
    }
    json_t *request = json_pack("{s:s, s:O, s:s, s:b, s:f}", "language", context->language, "code",
                                code, "session_id", context->session_id, "stateful", 1, "timeout",
                                rbx_engine_config(server->engine)->max_timeout_s);
    if (request && sandbox->id[0])
        apply_sandbox(request, sandbox, env);
    else if (request && env && !json_is_null(env))
        json_object_set(request, "env", env);
    if (!request)
        http_error_set(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "system_error", "out of memory");
    return request;
}

static enum MHD_Result execute_in(http_request *req, json_t *body, const e2b_sandbox_view *sandbox)
{
    http_error err;
    e2b_context context;
    enum MHD_Result queued;
    if (!context_for(req, body, sandbox, &context, &queued)) {
        json_decref(body);
        return queued;
    }
    /* A draining node runs the contexts whose sessions it holds (they have
     * run here), nothing new. */
    if (http_drain_refuses(req, context.session_id, &err)) {
        json_decref(body);
        return http_reply_error(req, &err);
    }
    json_t *request = runbox_request(req->server, body, &context, sandbox, &err);
    json_decref(body);
    if (!request)
        return http_reply_error(req, &err);
    execution *ex = http_execution_new(req, request, &err);
    if (!ex)
        return http_reply_error(req, &err);
    if (strcmp(context.cwd, E2B_DEFAULT_CWD)) {
        if (!(ex->kernel_cwd = strdup(context.cwd))) {
            http_execution_free(ex);
            return MHD_NO;
        }
        ex->form.request.kernel_cwd = ex->kernel_cwd;
    }
    ex->format = STREAM_NDJSON;
    ex->dialect = &e2b_dialect;
    enum MHD_Result refused;
    if (!http_execution_admit(req, ex, &refused))
        return refused;
    return http_stream_reply(req, ex);
}

static enum MHD_Result handle_execute(http_request *req)
{
    json_t *body;
    http_error err;
    if (!http_body_json(req, &body, &err))
        return http_reply_error(req, &err);
    e2b_sandbox_view sandbox;
    enum MHD_Result queued;
    if (!sandbox_of(req, &sandbox, &queued)) {
        json_decref(body);
        return queued;
    }
    queued = execute_in(req, body, &sandbox);
    e2b_sandbox_view_release(&sandbox);
    return queued;
}

/* --- /contexts ----------------------------------------------------------------------- */

static enum MHD_Result handle_contexts_list(http_request *req)
{
    e2b_sandbox_view sandbox;
    enum MHD_Result queued;
    if (!sandbox_of(req, &sandbox, &queued))
        return queued;
    /* A sandbox lists its default contexts from the start, as E2B does. */
    e2b_context unused;
    for (size_t i = 0; sandbox.id[0] && i < 2; i++)
        (void)e2b_contexts_default(req->server->contexts, sandbox.id, sandbox.session_id,
                                   i ? "javascript" : "python", &unused);
    queued = http_reply_json(req, MHD_HTTP_OK,
                             e2b_contexts_list(req->server->contexts, sandbox.id), NULL, NULL);
    e2b_sandbox_view_release(&sandbox);
    return queued;
}

static enum MHD_Result create_context(http_request *req, json_t *body,
                                      const e2b_sandbox_view *sandbox)
{
    const char *language, *cwd;
    bool typed = optional_string(body, "language", &language) && optional_string(body, "cwd", &cwd);
    const char *canonical = typed ? language_of(language ? language : "python") : NULL;
    e2b_context context;
    http_error err;
    if (!typed)
        return http_reply_fail(req, MHD_HTTP_BAD_REQUEST, "invalid_request",
                               "'language' and 'cwd' must be strings");
    if (http_drain_refuses(req, NULL, &err))
        return http_reply_error(req, &err);
    if (!canonical)
        return unknown_language(req, language);
    if (cwd && (cwd[0] != '/' || strlen(cwd) > RBX_KERNEL_CWD_MAX))
        return http_reply_fail(req, MHD_HTTP_BAD_REQUEST, "invalid_request",
                               "'cwd' must be an absolute path of at most %d bytes, such as "
                               "/home/user/project",
                               RBX_KERNEL_CWD_MAX);
    /* A sandbox at its cap is told so with 429 (both SDKs show its status and
     * reason, Python its body too), with no Retry-After: waiting frees nothing. */
    if (!e2b_contexts_add(req->server->contexts, sandbox->id, canonical,
                          cwd ? cwd : E2B_DEFAULT_CWD, &context, &err))
        return err.status != MHD_HTTP_TOO_MANY_REQUESTS
                   ? http_reply_error(req, &err)
                   : http_reply_json(req, err.status,
                                     json_pack("{s:o}", "error", http_error_json(&err)), NULL,
                                     NULL);
    return http_reply_json(req, MHD_HTTP_OK, e2b_context_json(&context), NULL, NULL);
}

static enum MHD_Result handle_context_create(http_request *req)
{
    json_t *body;
    http_error err;
    if (!http_body_json(req, &body, &err))
        return http_reply_error(req, &err);
    e2b_sandbox_view sandbox;
    enum MHD_Result queued;
    if (sandbox_of(req, &sandbox, &queued)) {
        queued = create_context(req, body, &sandbox);
        e2b_sandbox_view_release(&sandbox);
    }
    json_decref(body);
    return queued;
}

/* The context the path names, in the request's sandbox; else the reply
 * (404, or the sandbox's 502 or 401) is queued. */
static bool path_context(http_request *req, e2b_context *context, enum MHD_Result *queued)
{
    e2b_sandbox_view sandbox;
    if (!sandbox_of(req, &sandbox, queued))
        return false;
    bool found = e2b_contexts_find(req->server->contexts, sandbox.id, req->session_id, context);
    e2b_sandbox_view_release(&sandbox);
    if (!found)
        *queued = no_context(req, req->session_id);
    return found;
}

/* Its kernel stops; its files stay. A context whose session never ran
 * has nothing to stop. */
static enum MHD_Result handle_context_restart(http_request *req)
{
    e2b_context context;
    enum MHD_Result queued;
    if (!path_context(req, &context, &queued))
        return queued;
    size_t stopped = 0;
    rbx_error err = {0};
    if (rbx_session_restart(req->server->engine, context.session_id, context.language, &stopped,
                            &err) != RBX_OK &&
        err.status != RBX_ENOENT)
        return http_reply_engine(req, &err);
    return http_reply_json(req, MHD_HTTP_OK, e2b_context_json(&context), NULL, NULL);
}

/* What runs in it is stopped, then its session and files go; a default
 * context of a sandbox only stops its kernel (the session is the
 * sandbox's, which its other languages share). */
static enum MHD_Result handle_context_delete(http_request *req)
{
    e2b_context context;
    enum MHD_Result queued;
    if (!path_context(req, &context, &queued))
        return queued;
    rbx_error err = {0};
    if (strcmp(context.session_id, context.id)) {
        size_t stopped = 0;
        if (rbx_session_restart(req->server->engine, context.session_id, context.language,
                                &stopped, &err) != RBX_OK &&
            err.status != RBX_ENOENT)
            return http_reply_engine(req, &err);
    } else {
        http_executions_cancel_session(req->server, context.id);
        if (rbx_session_remove(req->server->engine, context.id, 10.0, &err) != RBX_OK &&
            err.status != RBX_ENOENT)
            return http_reply_engine(req, &err);
    }
    e2b_contexts_remove(req->server->contexts, context.sandbox, context.id);
    return http_reply_json(req, MHD_HTTP_OK,
                           json_pack("{s:s, s:b}", "id", context.id, "removed", 1), NULL, NULL);
}

static enum MHD_Result handle_health(http_request *req)
{
    return http_reply_json(req, MHD_HTTP_OK, json_pack("{s:s}", "status", "ok"), NULL, NULL);
}

static const route e2b_routes[] = {
    {"GET", "/health", handle_health, BODY_NONE, true},
    {"POST", "/execute", handle_execute, BODY_JSON, false},
    {"GET", "/contexts", handle_contexts_list, BODY_NONE, false},
    {"POST", "/contexts", handle_context_create, BODY_JSON_OPTIONAL, false},
    {"POST", "/contexts/{id}/restart", handle_context_restart, BODY_JSON_OPTIONAL, false},
    {"DELETE", "/contexts/{id}", handle_context_delete, BODY_NONE, false},
};

/* Requests of a sandbox of the control plane show its own tokens, which
 * e2b_admit checks; the others the server's token. */
static bool e2b_authorized(const http_server *server, struct MHD_Connection *connection)
{
    static const char *const headers[] = {"X-Access-Token", "E2B-Traffic-Access-Token", NULL};
    return e2b_request_sandbox_id(connection) || http_auth_ok_headers(server, connection, headers);
}

/* A request that names a sandbox shows its token, checked on the head:
 * no body of /execute is read for a stranger. The handlers check again
 * (sandbox_of), as the sandbox may go while the body comes in. */
static bool e2b_admit(http_request *req, enum MHD_Result *queued)
{
    http_error err;
    if (req->route->open || !e2b_request_sandbox_id(req->connection) ||
        e2b_sandbox_for_request(req->server, req->connection, E2B_PORT_CODE_INTERPRETER, NULL,
                                &err))
        return true;
    *queued = http_reply_error(req, &err);
    return false;
}

const http_api http_e2b_api = {
    .name = "e2b",
    .routes = e2b_routes,
    .route_count = sizeof e2b_routes / sizeof *e2b_routes,
    .authorized = e2b_authorized,
    .admit = e2b_admit,
    .unauthorized = "'X-Access-Token: TOKEN'",
};
