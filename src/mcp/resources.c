/* Sessions' files as MCP resources. resources/list walks every session
 * this engine lists (on stdio that is what list_sessions shows: all the
 * engine's sessions; a front end serving several callers lists only the
 * caller's) in order of session id, then path, MCP_RESOURCES_PAGE at a
 * time; the cursor names the last resource a page held, so a listing
 * resumes right after it even when files came or went meanwhile. Reads go
 * through rbx_file_get, which refuses links, paths out of the session and
 * anything but a regular file, up to MCP_RESOURCE_READ_MAX bytes. */
#include "api/base64.h"
#include "mcp/mcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CURSOR_VERSION "r1."

/* ---- the cursor: "r1." and the hex of "session_id/path" ---- */

static json_t *cursor_of(const char *session_id, const char *path)
{
    size_t len = strlen(session_id) + 1 + strlen(path);
    char *text = malloc(strlen(CURSOR_VERSION) + 2 * len + 1);
    if (!text)
        return NULL;
    char *out = text + sprintf(text, "%s", CURSOR_VERSION);
    for (const char *p = session_id; *p; p++)
        out += sprintf(out, "%02x", (unsigned char)*p);
    out += sprintf(out, "2f");
    for (const char *p = path; *p; p++)
        out += sprintf(out, "%02x", (unsigned char)*p);
    json_t *cursor = json_string(text);
    free(text);
    return cursor;
}

static bool cursor_read(const char *cursor, char session_id[RBX_SESSION_ID_MAX + 1], char *path,
                        size_t path_size)
{
    size_t prefix = strlen(CURSOR_VERSION), hex = strlen(cursor);
    if (strncmp(cursor, CURSOR_VERSION, prefix) != 0 || (hex - prefix) % 2 ||
        (hex - prefix) / 2 >= RBX_SESSION_ID_MAX + 1 + path_size)
        return false;
    char text[RBX_SESSION_ID_MAX + 2 + MCP_URI_MAX];
    size_t len = 0;
    static const char digits[] = "0123456789abcdef";
    for (const char *p = cursor + prefix; *p; p += 2) {
        const char *high = strchr(digits, p[0]), *low = strchr(digits, p[1]);
        if (!high || !low || !p[0] || !p[1] || (high == digits && low == digits))
            return false; /* not lowercase hex, or a NUL byte */
        text[len++] = (char)((high - digits) << 4 | (low - digits));
    }
    text[len] = 0;
    char *slash = strchr(text, '/');
    if (!slash || (size_t)(slash - text) > RBX_SESSION_ID_MAX || strlen(slash + 1) >= path_size)
        return false;
    *slash = 0;
    memcpy(session_id, text, (size_t)(slash - text) + 1);
    memcpy(path, slash + 1, strlen(slash + 1) + 1);
    return rbx_session_id_valid(session_id) && path[0];
}

/* ---- resources/list ---- */

static json_t *iso_time(int64_t unix_time)
{
    char text[32];
    time_t t = (time_t)unix_time;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_string(text);
}

static json_t *describe_file(const char *session_id, const mcp_file *file)
{
    char *uri = mcp_resource_uri(session_id, file->path);
    if (!uri)
        return NULL;
    char title[1200];
    snprintf(title, sizeof title, "%s (session %s)", file->path, session_id);
    json_t *resource = json_pack("{s:s, s:o, s:o, s:I, s:{s:o}}", "uri", uri, "name",
                                 rpc_text(file->path, strlen(file->path)), "title",
                                 rpc_text(title, strlen(title)), "size", (json_int_t)file->size,
                                 "annotations", "lastModified", iso_time(file->modified_unix));
    free(uri);
    const char *mime = mcp_mime_by_name(file->path);
    if (resource && mime)
        json_object_set_new(resource, "mimeType", json_string(mime));
    return resource;
}

static int by_id(const void *a, const void *b)
{
    return strcmp(*(const rbx_session_id *)a, *(const rbx_session_id *)b);
}

typedef struct listing {
    json_t *resources;
    char after_id[RBX_SESSION_ID_MAX + 1]; /* "" from the start */
    char after_path[MCP_URI_MAX + 1];
    bool full; /* a page's worth taken, and one more seen */
} listing;

/* Adds the session's files past the cursor; stops once the page is full. */
static void add_session(rbx_engine *engine, const char *session_id, listing *page)
{
    mcp_snapshot *snapshot = mcp_snapshot_list(engine, session_id);
    size_t count;
    const mcp_file *files = mcp_snapshot_files(snapshot, &count);
    bool resuming = !strcmp(session_id, page->after_id);
    for (size_t i = 0; i < count && !page->full; i++) {
        if (resuming && strcmp(files[i].path, page->after_path) <= 0)
            continue;
        if (json_array_size(page->resources) == MCP_RESOURCES_PAGE) {
            page->full = true;
            break;
        }
        json_t *resource = describe_file(session_id, &files[i]);
        if (resource)
            json_array_append_new(page->resources, resource);
    }
    mcp_snapshot_free(snapshot);
}

void mcp_answer_resources_list(mcp_server *server, const rpc_message *request)
{
    listing page = {.resources = json_array()};
    json_t *cursor = json_object_get(request->params, "cursor");
    mcp_client_set_listed(server->client);
    if (cursor && (!json_is_string(cursor) || !cursor_read(json_string_value(cursor), page.after_id,
                                                           page.after_path,
                                                           sizeof page.after_path))) {
        json_decref(page.resources);
        rpc_fail(server->output, request->id, RPC_INVALID_PARAMS,
                 "Invalid params: unknown cursor (pass the nextCursor of the previous page, "
                 "or none for the first page)");
        return;
    }
    rbx_session_id *ids;
    size_t count;
    rbx_error err = {0};
    if (rbx_session_ids(server->engine, &ids, &count, &err) != RBX_OK) {
        json_decref(page.resources);
        rpc_fail(server->output, request->id, RPC_INTERNAL_ERROR, "Internal error: %s",
                 err.message);
        return;
    }
    if (count)
        qsort(ids, count, sizeof *ids, by_id);
    for (size_t i = 0; i < count && !page.full; i++)
        if (strcmp(ids[i], page.after_id) >= 0)
            add_session(server->engine, ids[i], &page);
    free(ids);
    json_t *result = json_pack("{s:o}", "resources", page.resources);
    if (page.full) {
        json_t *last = json_array_get(page.resources, MCP_RESOURCES_PAGE - 1);
        char id[RBX_SESSION_ID_MAX + 1], path[MCP_URI_MAX + 1], why[200];
        if (mcp_resource_uri_parse(json_string_value(json_object_get(last, "uri")), id, path,
                                   sizeof path, why, sizeof why) == MCP_URI_FILE)
            json_object_set_new(result, "nextCursor", cursor_of(id, path));
    }
    /* Files change with every call: no caching. */
    mcp_reply_cacheable(server, request->id, result, 0);
}

void mcp_answer_resource_templates(mcp_server *server, const rpc_message *request)
{
    if (json_object_get(request->params, "cursor")) {
        rpc_fail(server->output, request->id, RPC_INVALID_PARAMS,
                 "Invalid params: unknown cursor (resources/templates/list has a single page)");
        return;
    }
    json_t *template = json_pack(
        "{s:s, s:s, s:s, s:s}", "uriTemplate", MCP_RESOURCE_TEMPLATE, "name", "session-file",
        "title", "A file in a session",
        "description",
        "A file that code wrote in a session's /home/user, by session id and path relative to "
        "/home/user (e.g. runbox://sessions/analysis/files/out/plot.png). Text files are read as "
        "text, others as base64 blobs with a MIME type; links are never followed.");
    mcp_reply_cacheable(server, request->id, json_pack("{s:[o]}", "resourceTemplates", template),
                        60000);
}

/* ---- resources/read ---- */

static json_t *contents(const char *uri, const char *path, const char *data, size_t len)
{
    const char *mime = mcp_mime_by_name(path);
    if (mcp_text_content(data, len))
        return json_pack("{s:s, s:s, s:s%}", "uri", uri, "mimeType", mime ? mime : "text/plain",
                         "text", data, len);
    if (!mime)
        mime = mcp_mime_by_magic((const unsigned char *)data, len);
    char *blob = api_base64_encode(data, len, true, NULL);
    json_t *item = blob ? json_pack("{s:s, s:s, s:s}", "uri", uri, "mimeType",
                                    mime ? mime : "application/octet-stream", "blob", blob)
                        : NULL;
    free(blob);
    return item;
}

static void not_found(mcp_server *server, const rpc_message *request, const char *uri,
                      const char *why)
{
    /* MCP 2026-07-28 (SEP-2164) says -32602 where earlier revisions said
     * -32002. */
    bool stateless = server->version && !strcmp(server->version, MCP_STATELESS_VERSION);
    json_t *response = rpc_error(request->id,
                                 stateless ? RPC_INVALID_PARAMS : RPC_RESOURCE_NOT_FOUND,
                                 "Resource not found: %s", why);
    json_object_set_new(json_object_get(response, "error"), "data",
                        json_pack("{s:o}", "uri", rpc_text(uri, strlen(uri))));
    mcp_output_send(server->output, response);
}

/* The URI of a request, or NULL after answering why there is none. */
static const char *request_uri(mcp_server *server, const rpc_message *request)
{
    json_t *uri = json_object_get(request->params, "uri");
    if (!json_is_string(uri) || json_string_length(uri) > MCP_URI_MAX ||
        strlen(json_string_value(uri)) != json_string_length(uri)) {
        rpc_fail(server->output, request->id, RPC_INVALID_PARAMS,
                 "Invalid params: \"uri\" must be a string of at most %d bytes, without NUL",
                 MCP_URI_MAX);
        return NULL;
    }
    return json_string_value(uri);
}

void mcp_answer_resources_read(mcp_server *server, const rpc_message *request)
{
    const char *uri = request_uri(server, request);
    if (!uri)
        return;
    char id[RBX_SESSION_ID_MAX + 1], path[MCP_URI_MAX + 1], why[300];
    mcp_uri_kind kind = mcp_resource_uri_parse(uri, id, path, sizeof path, why, sizeof why);
    if (kind == MCP_URI_FOREIGN)
        return not_found(server, request, uri, why);
    if (kind == MCP_URI_INVALID) {
        rpc_fail(server->output, request->id, RPC_INVALID_PARAMS,
                 "Invalid params: %s is not a session file's URI: %s", uri, why);
        return;
    }
    if (!rbx_session_exists(server->engine, id)) {
        snprintf(why, sizeof why, "no session %s (list_sessions shows those that exist)", id);
        return not_found(server, request, uri, why);
    }
    char *data;
    size_t len;
    rbx_error err = {0};
    rbx_status status =
        rbx_file_get(server->engine, id, path, MCP_RESOURCE_READ_MAX, &data, &len, &err);
    if (status == RBX_ENOENT)
        return not_found(server, request, uri, err.message);
    if (status != RBX_OK) {
        /* Links, directories, devices and files past the cap: the
         * engine's message says which (and the cap). */
        json_t *response = rpc_error(request->id, status == RBX_ESYSTEM ? RPC_INTERNAL_ERROR
                                                                        : RPC_INVALID_PARAMS,
                                     "Cannot read %s: %s (resources/read returns regular files "
                                     "of at most %zu bytes)",
                                     uri, err.message, MCP_RESOURCE_READ_MAX);
        json_object_set_new(json_object_get(response, "error"), "data",
                            json_pack("{s:o, s:I}", "uri", rpc_text(uri, strlen(uri)), "maxBytes",
                                      (json_int_t)MCP_RESOURCE_READ_MAX));
        mcp_output_send(server->output, response);
        return;
    }
    json_t *item = contents(uri, path, data, len);
    free(data);
    if (!item)
        rpc_fail(server->output, request->id, RPC_INTERNAL_ERROR, "Internal error: out of memory");
    else
        mcp_reply_cacheable(server, request->id, json_pack("{s:[o]}", "contents", item), 0);
}

/* ---- subscriptions ---- */

void mcp_answer_resources_subscribe(mcp_server *server, const rpc_message *request)
{
    const char *uri = request_uri(server, request);
    mcp_client *client = mcp_client_of(server->output);
    char why[300] = "the server keeps no subscriptions for this client";
    if (!uri)
        return;
    if (!client || !mcp_client_subscribe(client, uri, why, sizeof why)) {
        rpc_fail(server->output, request->id, RPC_INVALID_PARAMS, "Invalid params: %s", why);
        return;
    }
    rpc_reply(server->output, request->id, json_object());
}

void mcp_answer_resources_unsubscribe(mcp_server *server, const rpc_message *request)
{
    const char *uri = request_uri(server, request);
    if (!uri)
        return;
    mcp_client_unsubscribe(mcp_client_of(server->output), uri);
    rpc_reply(server->output, request->id, json_object());
}

void mcp_answer_subscriptions_listen(mcp_server *server, const rpc_message *request)
{
    mcp_client *client = mcp_client_of(server->output);
    if (!client) {
        rpc_fail(server->output, request->id, RPC_INTERNAL_ERROR,
                 "Internal error: no subscriptions on this transport");
        return;
    }
    mcp_client_listen(client, request->id, json_object_get(request->params, "notifications"));
}
