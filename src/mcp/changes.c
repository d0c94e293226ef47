/* What a tool call changed in its session, found without polling: the
 * session's regular files (path, size, modification time; at most
 * MCP_SNAPSHOT_MAX, the first by path) are listed before the call and
 * again after it, through the engine's file API, which never follows a
 * link. A file is changed when its size or time differs, or when its time
 * is in the second the call started or later: the engine lists whole
 * seconds, so a rewrite of the same size within one second is still seen
 * (and a file written just before the call, in the same second, may be
 * reported once too often, never missed). */
#include "mcp/mcp.h"

#include <stdlib.h>
#include <string.h>

struct mcp_snapshot {
    rbx_file_info *files; /* regular files only, sorted by path */
    size_t count;
};

static int by_path(const void *a, const void *b)
{
    return strcmp(((const rbx_file_info *)a)->path, ((const rbx_file_info *)b)->path);
}

mcp_snapshot *mcp_snapshot_take(rbx_engine *engine, const char *session_id)
{
    mcp_snapshot *snapshot = calloc(1, sizeof *snapshot);
    rbx_error err = {0};
    if (!snapshot || !session_id || !rbx_session_id_valid(session_id) ||
        rbx_file_list(engine, session_id, &snapshot->files, &snapshot->count, &err) != RBX_OK)
        return snapshot;
    size_t kept = 0;
    for (size_t i = 0; i < snapshot->count; i++)
        if (!strcmp(snapshot->files[i].type, "file"))
            snapshot->files[kept++] = snapshot->files[i];
    qsort(snapshot->files, kept, sizeof *snapshot->files, by_path);
    snapshot->count = kept < MCP_SNAPSHOT_MAX ? kept : MCP_SNAPSHOT_MAX;
    return snapshot;
}

const rbx_file_info *mcp_snapshot_files(const mcp_snapshot *snapshot, size_t *count)
{
    *count = snapshot ? snapshot->count : 0;
    return snapshot ? snapshot->files : NULL;
}

void mcp_snapshot_free(mcp_snapshot *snapshot)
{
    if (snapshot)
        free(snapshot->files);
    free(snapshot);
}

static const rbx_file_info *find(const mcp_snapshot *snapshot, const char *path)
{
    rbx_file_info key;
    snprintf(key.path, sizeof key.path, "%s", path);
    return snapshot ? bsearch(&key, snapshot->files, snapshot->count, sizeof key, by_path) : NULL;
}

static json_t *resource_link(const char *uri, const rbx_file_info *file, bool created)
{
    json_t *link = json_pack("{s:s, s:s, s:o, s:s, s:I}", "type", "resource_link", "uri", uri,
                             "name", rpc_text(file->path, strlen(file->path)), "description",
                             created ? "created by this call" : "changed by this call", "size",
                             (json_int_t)file->size);
    const char *mime = mcp_mime_by_name(file->path);
    if (mime)
        json_object_set_new(link, "mimeType", json_string(mime));
    return link;
}

/* The URIs of files created, changed or removed, and whether any came or
 * went; the links of those created or changed go into links. */
static bool compare(const char *session_id, const mcp_snapshot *before, const mcp_snapshot *after,
                    int64_t since_unix, json_t *uris, json_t *links, size_t *more)
{
    bool came_or_went = false;
    for (size_t i = 0; i < after->count; i++) {
        const rbx_file_info *now = &after->files[i], *then = find(before, now->path);
        if (then && then->size == now->size && then->modified_unix == now->modified_unix &&
            now->modified_unix < since_unix)
            continue;
        came_or_went |= !then;
        char *uri = mcp_resource_uri(session_id, now->path);
        if (!uri)
            continue;
        json_array_append_new(uris, json_string(uri));
        if (json_array_size(links) < MCP_LINKS_MAX)
            json_array_append_new(links, resource_link(uri, now, !then));
        else
            (*more)++;
        free(uri);
    }
    for (size_t i = 0; before && i < before->count; i++) {
        if (find(after, before->files[i].path))
            continue;
        came_or_went = true;
        char *uri = mcp_resource_uri(session_id, before->files[i].path);
        if (uri)
            json_array_append_new(uris, json_string(uri));
        free(uri);
    }
    return came_or_went;
}

json_t *mcp_changes_report(rbx_engine *engine, mcp_output *output, const char *session_id,
                           const mcp_snapshot *before, int64_t since_unix)
{
    mcp_snapshot *after = mcp_snapshot_take(engine, session_id);
    json_t *uris = json_array(), *links = json_array();
    size_t more = 0;
    bool came_or_went = after && session_id &&
                        compare(session_id, before, after, since_unix, uris, links, &more);
    mcp_snapshot_free(after);
    mcp_client *client = mcp_client_of(output);
    mcp_client_notify(client, uris, came_or_went);
    json_decref(uris);
    if (!json_array_size(links) || !mcp_client_takes_links(client)) {
        json_decref(links);
        return NULL;
    }
    if (more) {
        char text[200];
        snprintf(text, sizeof text,
                 "%zu more files were created or changed (at most %d links per result); "
                 "resources/list lists them all.",
                 more, MCP_LINKS_MAX);
        json_array_append_new(links, json_pack("{s:s, s:s}", "type", "text", "text", text));
    }
    return links;
}
