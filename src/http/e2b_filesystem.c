/* filesystem.Filesystem's unary methods (E2B-SANDBOX-PROTOCOL.md section
 * 4), Connect with JSON: Stat, MakeDir, Move, ListDir, Remove. Each finds
 * its sandbox first, then its user (Authorization: Basic), then reads its
 * message; the paths go through e2b_envd_path (/home/user is the session)
 * and the engine's rbx_file_* (beneath it, links never followed). */
#include "http/e2b_envd.h"

#include <stdlib.h>
#include <string.h>

static enum MHD_Result finish(http_request *req, e2b_sandbox_view *view, json_t *body,
                              json_t *message, const http_error *err)
{
    e2b_sandbox_view_release(view);
    json_decref(body);
    if (!message)
        return http_reply_error(req, err);
    return e2b_connect_reply(req, message);
}

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

enum MHD_Result e2b_handle_fs_stat(http_request *req)
{
    e2b_sandbox_view view;
    json_t *body;
    enum MHD_Result queued;
    if (!e2b_fs_begin(req, &view, &body, &queued))
        return queued;
    http_error err;
    char rel[1100];
    json_t *message = e2b_envd_path_field(body, "path", rel, sizeof rel, &err)
                          ? entry_message(req, &view, rel, &err)
                          : NULL;
    return finish(req, &view, body, message, &err);
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

enum MHD_Result e2b_handle_fs_make_dir(http_request *req)
{
    e2b_sandbox_view view;
    json_t *body;
    enum MHD_Result queued;
    if (!e2b_fs_begin(req, &view, &body, &queued))
        return queued;
    http_error err;
    char rel[1100];
    json_t *message = NULL;
    if (e2b_envd_path_field(body, "path", rel, sizeof rel, &err)) {
        bool made = false;
        rbx_error engine_err = {0};
        if (!rel[0])
            made = false; /* /home/user is there: already_exists, as for any directory */
        else if (rbx_file_mkdir(req->server->engine, view.session_id, rel, &made,
                                &engine_err) != RBX_OK) {
            e2b_envd_engine_error(&err, &engine_err);
            return finish(req, &view, body, NULL, &err);
        }
        if (!made) /* the SDK's make_dir returns false for it */
            http_error_set(&err, MHD_HTTP_CONFLICT, "already_exists",
                           "directory %.300s already exists",
                           json_string_value(json_object_get(body, "path")));
        else
            message = entry_message(req, &view, rel, &err);
    }
    return finish(req, &view, body, message, &err);
}

enum MHD_Result e2b_handle_fs_move(http_request *req)
{
    e2b_sandbox_view view;
    json_t *body;
    enum MHD_Result queued;
    if (!e2b_fs_begin(req, &view, &body, &queued))
        return queued;
    http_error err;
    char from[1100], to[1100];
    json_t *message = NULL;
    if (e2b_envd_path_field(body, "source", from, sizeof from, &err) &&
        e2b_envd_path_field(body, "destination", to, sizeof to, &err) &&
        not_home(from, "move", &err) && not_home(to, "replace", &err)) {
        rbx_error engine_err = {0};
        if (rbx_file_move(req->server->engine, view.session_id, from, to, &engine_err) != RBX_OK)
            e2b_envd_engine_error(&err, &engine_err);
        else
            message = entry_message(req, &view, to, &err);
    }
    return finish(req, &view, body, message, &err);
}

enum MHD_Result e2b_handle_fs_list_dir(http_request *req)
{
    e2b_sandbox_view view;
    json_t *body;
    enum MHD_Result queued;
    if (!e2b_fs_begin(req, &view, &body, &queued))
        return queued;
    http_error err;
    char rel[1100];
    json_t *message = NULL;
    json_t *depth = json_object_get(body, "depth");
    /* Proto3 JSON leaves out a 0, which the SDKs never send: it is 1. */
    json_int_t levels = depth ? (json_is_integer(depth) ? json_integer_value(depth) : -1) : 1;
    if (levels == 0)
        levels = 1;
    if (levels < 1)
        http_error_set(&err, MHD_HTTP_BAD_REQUEST, "invalid_argument",
                       "'depth' must be a whole number of at least 1");
    else if (e2b_envd_path_field(body, "path", rel, sizeof rel, &err)) {
        rbx_file_entry *entries;
        size_t count;
        rbx_error engine_err = {0};
        if (rbx_file_list_depth(req->server->engine, view.session_id, rel,
                                levels > 64 ? 64 : (unsigned)levels, &entries, &count,
                                &engine_err) != RBX_OK) {
            e2b_envd_engine_error(&err, &engine_err);
        } else {
            json_t *list = json_array();
            for (size_t i = 0; i < count; i++)
                json_array_append_new(list, e2b_envd_entry_json(&entries[i]));
            rbx_file_entries_free(entries, count);
            message = json_pack("{s:o}", "entries", list);
        }
    }
    return finish(req, &view, body, message, &err);
}

enum MHD_Result e2b_handle_fs_remove(http_request *req)
{
    e2b_sandbox_view view;
    json_t *body;
    enum MHD_Result queued;
    if (!e2b_fs_begin(req, &view, &body, &queued))
        return queued;
    http_error err;
    char rel[1100];
    json_t *message = NULL;
    if (e2b_envd_path_field(body, "path", rel, sizeof rel, &err) &&
        not_home(rel, "remove", &err)) {
        rbx_error engine_err = {0};
        /* A file, a link (not what it points to) or a whole tree. */
        if (rbx_file_delete(req->server->engine, view.session_id, rel, &engine_err) != RBX_OK)
            e2b_envd_engine_error(&err, &engine_err);
        else
            message = json_object();
    }
    return finish(req, &view, body, message, &err);
}

enum MHD_Result e2b_handle_fs_unknown(http_request *req)
{
    e2b_sandbox_view view;
    http_error err;
    if (!e2b_sandbox_for_request(req->server, req->connection, &view, &err))
        return http_reply_error(req, &err);
    e2b_sandbox_view_release(&view);
    return http_reply_fail(req, MHD_HTTP_NOT_IMPLEMENTED, "unimplemented",
                           "filesystem.Filesystem has no method %.100s", req->session_id);
}
