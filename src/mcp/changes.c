/* What a tool call changed in its session, found without polling: the
 * session's regular files (path, size, modification time; at most
 * MCP_SNAPSHOT_MAX, the first by path) are listed before the call and
 * again after it, through the engine's file API, which never follows a
 * link. A file changed when its size or time differs. The engine lists
 * whole seconds, so a rewrite of the same size within the second the
 * first list was taken would look unchanged: such files (at most
 * HASHED_MAX, of at most HASHED_BYTES) are hashed in both lists and
 * compared by content; past those bounds they count as changed (a
 * change may be reported once too often, never missed).
 *
 * A listing costs about 4 ms per 1,000 files, so it is taken only when
 * someone needs the changes: the result's resource_link items, or a
 * subscriber (mcp_client_watches). And the listing after a call is kept,
 * of the MCP_KEPT_MAX sessions last used, as the next call's listing
 * before: one listing a call, not two. A call that lists nothing drops
 * its session's kept listing, which would no longer be the files before
 * the next. What changed between two calls by other means (runbox's HTTP
 * files API, another process) is then reported at the next call, as
 * changed by it: told late, never missed. */
#include "mcp/mcp.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HASHED_MAX 32
#define HASHED_BYTES ((size_t)1 << 20)

struct mcp_snapshot {
    int64_t taken_unix; /* the second the list was taken */
    mcp_file *files;    /* regular files only, sorted by path */
    size_t count;
};

static int by_path(const void *a, const void *b)
{
    return strcmp(((const mcp_file *)a)->path, ((const mcp_file *)b)->path);
}

/* Written in the second the list was taken, or later (a clock a second
 * apart from the file system's): its time alone cannot tell a rewrite. */
static bool ambiguous(const mcp_file *file, int64_t taken_unix)
{
    return file->modified_unix >= taken_unix - 1;
}

static bool hash_file(rbx_engine *engine, const char *session_id, const char *path,
                      uint64_t *hash)
{
    char *data;
    size_t len;
    rbx_error err = {0};
    if (rbx_file_get(engine, session_id, path, HASHED_BYTES, &data, &len, &err) != RBX_OK)
        return false;
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)data[i]) * 1099511628211ULL;
    free(data);
    *hash = h;
    return true;
}

/* The engine's list, kept small: a path and two numbers a file (the
 * engine's entries are 1.1 KB each, and a session may have 10,000). */
static bool keep_files(mcp_snapshot *snapshot, const rbx_file_info *infos, size_t count)
{
    snapshot->files = calloc(count ? count : 1, sizeof *snapshot->files);
    if (!snapshot->files)
        return false;
    for (size_t i = 0; i < count; i++) {
        if (strcmp(infos[i].type, "file") != 0)
            continue;
        mcp_file *file = &snapshot->files[snapshot->count];
        if (!(file->path = strdup(infos[i].path)))
            return false;
        file->size = infos[i].size;
        file->modified_unix = infos[i].modified_unix;
        snapshot->count++;
    }
    return true;
}

/* Files written from the second hash_from_unix on are hashed: the list
 * after a call hashes those that the list before it did. */
static mcp_snapshot *take(rbx_engine *engine, const char *session_id, int64_t hash_from_unix)
{
    mcp_snapshot *snapshot = calloc(1, sizeof *snapshot);
    rbx_error err = {0};
    rbx_file_info *infos = NULL;
    size_t count = 0;
    if (!snapshot)
        return NULL;
    snapshot->taken_unix = (int64_t)time(NULL);
    if (!session_id || !rbx_session_id_valid(session_id) ||
        rbx_file_list(engine, session_id, &infos, &count, &err) != RBX_OK)
        return snapshot;
    bool kept = keep_files(snapshot, infos, count);
    free(infos);
    if (!kept) { /* out of memory: an empty list, as if the session had no files */
        mcp_snapshot_free(snapshot);
        return calloc(1, sizeof *snapshot);
    }
    if (snapshot->count) /* an empty list may be NULL, which qsort must not get */
        qsort(snapshot->files, snapshot->count, sizeof *snapshot->files, by_path);
    for (size_t i = MCP_SNAPSHOT_MAX; i < snapshot->count; i++)
        free(snapshot->files[i].path);
    if (snapshot->count > MCP_SNAPSHOT_MAX)
        snapshot->count = MCP_SNAPSHOT_MAX;
    size_t hashed = 0;
    for (size_t i = 0; i < snapshot->count && hashed < HASHED_MAX; i++) {
        mcp_file *file = &snapshot->files[i];
        if (ambiguous(file, hash_from_unix) && file->size <= HASHED_BYTES)
            hashed += file->hashed = hash_file(engine, session_id, file->path, &file->hash);
    }
    return snapshot;
}

mcp_snapshot *mcp_snapshot_list(rbx_engine *engine, const char *session_id)
{
    return take(engine, session_id, INT64_MAX); /* no file is recent enough to hash */
}

const mcp_file *mcp_snapshot_files(const mcp_snapshot *snapshot, size_t *count)
{
    *count = snapshot ? snapshot->count : 0;
    return snapshot ? snapshot->files : NULL;
}

void mcp_snapshot_free(mcp_snapshot *snapshot)
{
    for (size_t i = 0; snapshot && i < snapshot->count; i++)
        free(snapshot->files[i].path);
    if (snapshot)
        free(snapshot->files);
    free(snapshot);
}

/* ---- the listings kept between calls ---- */

typedef struct kept_listing {
    rbx_engine *engine; /* NULL: a free slot */
    char session_id[RBX_SESSION_ID_MAX + 1];
    mcp_snapshot *snapshot;
    uint64_t used; /* when it was kept, on the clock of `uses` */
} kept_listing;

static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static kept_listing kept[MCP_KEPT_MAX];
static uint64_t uses;

static kept_listing *kept_of(rbx_engine *engine, const char *session_id)
{
    for (size_t i = 0; i < MCP_KEPT_MAX; i++)
        if (kept[i].engine == engine && !strcmp(kept[i].session_id, session_id))
            return &kept[i];
    return NULL;
}

/* The session's kept listing, taken out (two calls never share one), or NULL. */
static mcp_snapshot *unkeep(rbx_engine *engine, const char *session_id)
{
    pthread_mutex_lock(&kept_lock);
    kept_listing *slot = kept_of(engine, session_id);
    mcp_snapshot *snapshot = slot ? slot->snapshot : NULL;
    if (slot)
        *slot = (kept_listing){0};
    pthread_mutex_unlock(&kept_lock);
    return snapshot;
}

/* Keeps snapshot as the session's, in place of an older one or of the
 * listing used longest ago. */
static void keep(rbx_engine *engine, const char *session_id, mcp_snapshot *snapshot)
{
    pthread_mutex_lock(&kept_lock);
    kept_listing *slot = kept_of(engine, session_id);
    for (size_t i = 0; i < MCP_KEPT_MAX && !slot; i++)
        if (!kept[i].engine)
            slot = &kept[i];
    if (!slot) {
        slot = &kept[0];
        for (size_t i = 1; i < MCP_KEPT_MAX; i++)
            if (kept[i].used < slot->used)
                slot = &kept[i];
    }
    mcp_snapshot *replaced = slot->snapshot;
    *slot = (kept_listing){.engine = engine, .snapshot = snapshot, .used = ++uses};
    snprintf(slot->session_id, sizeof slot->session_id, "%s", session_id);
    pthread_mutex_unlock(&kept_lock);
    mcp_snapshot_free(replaced);
}

mcp_snapshot *mcp_changes_before(rbx_engine *engine, mcp_output *output, const char *session_id,
                                 bool links)
{
    if (!session_id || !rbx_session_id_valid(session_id))
        return NULL; /* a one-off session: gone when the call ends */
    mcp_client *client = mcp_client_of(output);
    bool needed =
        (links && mcp_client_takes_links(client)) || mcp_client_watches(client, session_id);
    mcp_snapshot *snapshot = unkeep(engine, session_id);
    if (!needed) {
        mcp_snapshot_free(snapshot);
        return NULL;
    }
    return snapshot ? snapshot : take(engine, session_id, (int64_t)time(NULL));
}

/* ---- comparing ---- */

static const mcp_file *find(const mcp_snapshot *snapshot, const char *path)
{
    mcp_file key = {.path = (char *)path};
    return snapshot && snapshot->count
               ? bsearch(&key, snapshot->files, snapshot->count, sizeof key, by_path)
               : NULL;
}

/* Whether the file differs from what the list before saw of it. */
static bool changed(const mcp_file *then, const mcp_file *now, const mcp_snapshot *before)
{
    if (!then || then->size != now->size || then->modified_unix != now->modified_unix)
        return true;
    if (!ambiguous(now, before->taken_unix))
        return false;
    return !then->hashed || !now->hashed || then->hash != now->hash;
}

static json_t *resource_link(const char *uri, const mcp_file *file, bool created)
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
                    json_t *uris, json_t *links, size_t *more)
{
    bool came_or_went = false;
    for (size_t i = 0; i < after->count; i++) {
        const mcp_file *now = &after->files[i], *then = find(before, now->path);
        if (!changed(then, now, before))
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
    for (size_t i = 0; i < before->count; i++) {
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
                           mcp_snapshot *before)
{
    if (!before || !session_id || !rbx_session_id_valid(session_id)) {
        mcp_snapshot_free(before);
        return NULL;
    }
    mcp_snapshot *after = take(engine, session_id, before->taken_unix);
    if (!after) { /* out of memory */
        mcp_snapshot_free(before);
        return NULL;
    }
    json_t *uris = json_array(), *links = json_array();
    size_t more = 0;
    bool came_or_went = compare(session_id, before, after, uris, links, &more);
    mcp_snapshot_free(before);
    keep(engine, session_id, after);
    mcp_client *client = mcp_client_of(output);
    mcp_client_notify(client, uris, came_or_went);
    mcp_client_notify_peers(client, uris, came_or_went);
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
