/* filesystem.Filesystem's unary methods (E2B-SANDBOX-PROTOCOL.md section
 * 4), Connect with JSON: Stat, MakeDir, Move, ListDir, Remove. Each runs
 * through e2b_fs_unary (e2b_watch.c), which finds its sandbox first, then
 * its user (Authorization: Basic), then reads its message, and answers; a
 * call does only its own work. The paths go through e2b_envd_path (/home/user
 * is the session) and the engine's rbx_file_* (beneath it, links never
 * followed). */
#include "http/e2b_envd.h"

#include <stdlib.h>
#include <string.h>

/* {"entry": EntryInfo} of the session path rel. */
static json_t *entry_message(http_request *req, const e2b_sandbox_view *view, const char *rel,
                             http_error *err)
{
    rbx_file_entry entry;
    rbx_error engine_err = {0};
    if (rbx_file_stat(req->server->engine, view->session_id, rel, &entry, &engine_err) !=
        RBX_OK) {
        e2b_envd_engine_error(err, &engine_err);
        return NULL;
    }
    json_t *message = json_pack("{s:o}", "entry", e2b_envd_entry_json(&entry));
    rbx_file_entry_clear(&entry);
    return message;
}

static json_t *stat_call(http_request *req, const e2b_sandbox_view *view, json_t *body,
                         http_error *err)
{
    char rel[1100];
    if (!e2b_envd_path_field(body, "path", rel, sizeof rel, err))
        return NULL;
    return entry_message(req, view, rel, err);
}

enum MHD_Result e2b_handle_fs_stat(http_request *req)
{
    return e2b_fs_unary(req, stat_call);
}

/* A path that names /home/user itself, where an operation needs another. */
static bool not_home(const char *rel, const char *what, http_error *err)
{
    if (rel[0])
        return true;
    http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_argument", "cannot %s %s itself", what,
                   E2B_DEFAULT_CWD);
    return false;
}

static json_t *make_dir_call(http_request *req, const e2b_sandbox_view *view, json_t *body,
                             http_error *err)
{
    char rel[1100];
    if (!e2b_envd_path_field(body, "path", rel, sizeof rel, err))
        return NULL;
    bool made = false;
    rbx_error engine_err = {0};
    if (!rel[0])
        made = false; /* /home/user is there: already_exists, as for any directory */
    else if (rbx_file_mkdir(req->server->engine, view->session_id, rel, &made, &engine_err) !=
             RBX_OK) {
        e2b_envd_engine_error(err, &engine_err);
        return NULL;
    }
    if (made)
        return entry_message(req, view, rel, err);
    /* the SDK's make_dir returns false for it */
    http_error_set(err, MHD_HTTP_CONFLICT, "already_exists", "directory %.300s already exists",
                   json_string_value(json_object_get(body, "path")));
    return NULL;
}

enum MHD_Result e2b_handle_fs_make_dir(http_request *req)
{
    return e2b_fs_unary(req, make_dir_call);
}

static json_t *move_call(http_request *req, const e2b_sandbox_view *view, json_t *body,
                         http_error *err)
{
    char from[1100], to[1100];
    if (!e2b_envd_path_field(body, "source", from, sizeof from, err) ||
        !e2b_envd_path_field(body, "destination", to, sizeof to, err) ||
        !not_home(from, "move", err) || !not_home(to, "replace", err))
        return NULL;
    rbx_error engine_err = {0};
    if (rbx_file_move(req->server->engine, view->session_id, from, to, &engine_err) != RBX_OK) {
        e2b_envd_engine_error(err, &engine_err);
        return NULL;
    }
    return entry_message(req, view, to, err);
}

enum MHD_Result e2b_handle_fs_move(http_request *req)
{
    return e2b_fs_unary(req, move_call);
}

static json_t *list_dir_call(http_request *req, const e2b_sandbox_view *view, json_t *body,
                             http_error *err)
{
    char rel[1100];
    json_t *depth = json_object_get(body, "depth");
    /* Proto3 JSON leaves out a 0, which the SDKs never send: it is 1. */
    json_int_t levels = depth ? (json_is_integer(depth) ? json_integer_value(depth) : -1) : 1;
    if (levels == 0)
        levels = 1;
    if (levels < 1) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_argument",
                       "'depth' must be a whole number of at least 1");
        return NULL;
    }
    if (!e2b_envd_path_field(body, "path", rel, sizeof rel, err))
        return NULL;
    rbx_file_entry *entries;
    size_t count;
    rbx_error engine_err = {0};
    if (rbx_file_list_depth(req->server->engine, view->session_id, rel,
                            levels > 64 ? 64 : (unsigned)levels, &entries, &count,
                            &engine_err) != RBX_OK) {
        e2b_envd_engine_error(err, &engine_err);
        return NULL;
    }
    json_t *list = json_array();
    for (size_t i = 0; i < count; i++)
        json_array_append_new(list, e2b_envd_entry_json(&entries[i]));
    rbx_file_entries_free(entries, count);
    return json_pack("{s:o}", "entries", list);
}

enum MHD_Result e2b_handle_fs_list_dir(http_request *req)
{
    return e2b_fs_unary(req, list_dir_call);
}

static json_t *remove_call(http_request *req, const e2b_sandbox_view *view, json_t *body,
                           http_error *err)
{
    char rel[1100];
    if (!e2b_envd_path_field(body, "path", rel, sizeof rel, err) || !not_home(rel, "remove", err))
        return NULL;
    rbx_error engine_err = {0};
    /* A file, a link (not what it points to) or a whole tree. */
    if (rbx_file_delete(req->server->engine, view->session_id, rel, &engine_err) != RBX_OK) {
        e2b_envd_engine_error(err, &engine_err);
        return NULL;
    }
    return json_object();
}

enum MHD_Result e2b_handle_fs_remove(http_request *req)
{
    return e2b_fs_unary(req, remove_call);
}

enum MHD_Result e2b_handle_fs_unknown(http_request *req)
{
    e2b_sandbox_view view;
    http_error err;
    if (!e2b_sandbox_for_request(req->server, req->connection, E2B_PORT_ENVD, &view, &err))
        return http_reply_error(req, &err);
    e2b_sandbox_view_release(&view);
    return http_reply_fail(req, MHD_HTTP_NOT_IMPLEMENTED, "unimplemented",
                           "filesystem.Filesystem has no method %.100s", req->session_id);
}
