/* A session's files as E2B's envd shows them (runbox.h): an entry's
 * details, a directory listed to a depth, directories made, renames. Like
 * files.c, every path is resolved beneath the session's directory by the
 * kernel (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), and then
 * only single names are used below a directory opened that way, with
 * AT_SYMLINK_NOFOLLOW / O_NOFOLLOW: a link planted by sandboxed code is
 * described, renamed or removed, never followed. */
#include "base/error.h"
#include "base/fsutil.h"
#include "engine/engine.h"
#include "runbox.h"
#include "sandbox/uids.h"
#include "sessions/files.h"
#include "sessions/session.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define LIST_MAX 10000
#define DEPTH_MAX 32
#define META_PREFIX "user.e2b."

void rbx_file_entry_clear(rbx_file_entry *entry)
{
    free(entry->link_target);
    entry->link_target = NULL;
    for (size_t m = 0; m < entry->meta_count; m++) {
        free(entry->meta_keys[m]);
        free(entry->meta_values[m]);
    }
    entry->meta_count = 0;
}

void rbx_file_entries_free(rbx_file_entry *entries, size_t count)
{
    for (size_t i = 0; entries && i < count; i++)
        rbx_file_entry_clear(&entries[i]);
    free(entries);
}

/* An owner as the sandbox sees it: runbox as root maps sandbox uid N to
 * host uid RBX_HOST_UID_BASE + N; an unprivileged runbox's own files are
 * the sandbox user's. Anything else shows as the overflow id. */
static int64_t sandbox_id(bool is_root, uid_t host)
{
    if (is_root)
        return host >= RBX_HOST_UID_BASE && host < RBX_HOST_UID_BASE + 65536
                   ? (int64_t)(host - RBX_HOST_UID_BASE)
                   : 65534;
    return host == geteuid() ? RBX_SANDBOX_UID : 65534;
}

/* The user.e2b.* attributes of an open file or directory. */
static void read_meta(int fd, rbx_file_entry *e)
{
    char names[8192];
    ssize_t n = flistxattr(fd, names, sizeof names);
    for (ssize_t at = 0; n > 0 && at < n && e->meta_count < RBX_FILE_META_MAX;) {
        const char *name = names + at;
        at += (ssize_t)strlen(name) + 1;
        size_t key_len = strlen(name) - (sizeof META_PREFIX - 1);
        if (strncmp(name, META_PREFIX, sizeof META_PREFIX - 1) || key_len == 0 ||
            key_len > RBX_FILE_META_KEY_MAX)
            continue;
        char value[RBX_FILE_META_VALUE_MAX + 1];
        ssize_t v = fgetxattr(fd, name, value, sizeof value - 1);
        if (v < 0)
            continue; /* gone meanwhile, or larger than we show */
        value[v] = 0;
        char *key = strdup(name + sizeof META_PREFIX - 1), *copy = strdup(value);
        if (!key || !copy) {
            free(key);
            free(copy);
            return;
        }
        e->meta_keys[e->meta_count] = key;
        e->meta_values[e->meta_count++] = copy;
    }
}

int rbx_files_fill_entry(bool is_root, int dir, const char *name, const char *rel,
                         rbx_file_entry *e)
{
    memset(e, 0, sizeof *e);
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0)
        return -1;
    snprintf(e->path, sizeof e->path, "%s", rel);
    e->type = S_ISREG(st.st_mode)   ? 'f'
              : S_ISDIR(st.st_mode) ? 'd'
              : S_ISLNK(st.st_mode) ? 'l'
                                    : 'o';
    e->size = S_ISDIR(st.st_mode) ? 0 : (uint64_t)st.st_size;
    e->mode = st.st_mode;
    e->uid = sandbox_id(is_root, st.st_uid);
    e->gid = sandbox_id(is_root, st.st_gid);
    e->modified_s = st.st_mtim.tv_sec;
    e->modified_ns = st.st_mtim.tv_nsec;
    if (e->type == 'l') {
        char target[4097];
        ssize_t n = readlinkat(dir, name, target, sizeof target - 1);
        if (n >= 0) {
            target[n] = 0;
            e->link_target = strdup(target);
        }
    } else if (e->type == 'f' || e->type == 'd') {
        /* O_NONBLOCK | O_NOFOLLOW: what was swapped in meanwhile (a FIFO,
         * a link) neither blocks us nor leads anywhere. */
        int fd = openat(dir, name[0] ? name : ".",
                        O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd >= 0) {
            read_meta(fd, e);
            close(fd);
        }
    }
    return 0;
}

/* The directory holding path, or the session directory for "" (*name is
 * "" then, which rbx_files_fill_entry reads as the directory itself). */
static rbx_status open_holder(rbx_engine *engine, const char *session_id, const char *path,
                              int *dir, const char **name, rbx_error *err)
{
    if (path[0])
        return rbx_files_open_holder(engine, session_id, path, false, dir, name, err);
    *name = "";
    return rbx_session_work_fd(engine, session_id, dir, err);
}

rbx_status rbx_file_stat(rbx_engine *engine, const char *session_id, const char *path,
                         rbx_file_entry *entry, rbx_error *err)
{
    memset(entry, 0, sizeof *entry);
    int dir;
    const char *name;
    rbx_status status = open_holder(engine, session_id, path, &dir, &name, err);
    if (status != RBX_OK)
        return status;
    if (rbx_files_fill_entry(engine->is_root, dir, name, path, entry) != 0)
        status = rbx_files_refused(path, err);
    close(dir);
    return status;
}

typedef struct listing {
    const rbx_engine *engine;
    rbx_file_entry *entries;
    size_t count, cap;
    bool full;
} listing;

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir (an fd we keep), sorted: listings read as ls shows them. */
static char **names_of(int dir, size_t *count)
{
    *count = 0;
    int fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    char **names = NULL;
    size_t cap = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) && *count <= LIST_MAX) {
        if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, ".."))
            continue;
        if (*count == cap) {
            cap = cap ? cap * 2 : 32;
            char **grown = realloc(names, cap * sizeof *grown);
            if (!grown)
                break;
            names = grown;
        }
        if (!(names[*count] = strdup(ent->d_name)))
            break;
        (*count)++;
    }
    closedir(d);
    if (names)
        qsort(names, *count, sizeof *names, by_name);
    return names;
}

static void list_walk(listing *out, int dir, const char *prefix, unsigned depth)
{
    size_t count;
    char **names = names_of(dir, &count);
    for (size_t i = 0; i < count && !out->full; i++) {
        if (out->count == LIST_MAX) {
            out->full = true;
            break;
        }
        if (out->count == out->cap) {
            size_t cap = out->cap ? out->cap * 2 : 64;
            rbx_file_entry *grown = realloc(out->entries, cap * sizeof *grown);
            if (!grown) {
                out->full = true;
                break;
            }
            out->entries = grown;
            out->cap = cap;
        }
        char rel[sizeof out->entries->path];
        if ((size_t)snprintf(rel, sizeof rel, "%s%s%s", prefix, prefix[0] ? "/" : "", names[i]) >=
            sizeof rel)
            continue;
        rbx_file_entry *e = &out->entries[out->count];
        if (rbx_files_fill_entry(out->engine->is_root, dir, names[i], rel, e) != 0)
            continue; /* gone meanwhile */
        out->count++;
        if (e->type == 'd' && depth > 1) {
            int sub = openat(dir, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                list_walk(out, sub, rel, depth - 1);
                close(sub);
            }
        }
    }
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
}

/* The directory at path itself, opened for reading (never through a link). */
static rbx_status open_dir(rbx_engine *engine, const char *session_id, const char *path, int *fd,
                           rbx_error *err)
{
    *fd = -1;
    rbx_status status = path[0] ? rbx_file_path_check(path, err) : RBX_OK;
    int work = -1;
    if (status != RBX_OK || (status = rbx_session_work_fd(engine, session_id, &work, err)))
        return status;
    *fd = rbx_open_beneath(work, path[0] ? path : ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    close(work);
    if (*fd >= 0)
        return RBX_OK;
    if (errno == ENOTDIR)
        return rbx_fail(err, RBX_EINVAL, "%.200s is not a directory", path);
    return rbx_files_refused(path, err);
}

rbx_status rbx_file_list_depth(rbx_engine *engine, const char *session_id, const char *path,
                               unsigned depth, rbx_file_entry **entries, size_t *count,
                               rbx_error *err)
{
    *entries = NULL;
    *count = 0;
    int dir;
    rbx_status status = open_dir(engine, session_id, path, &dir, err);
    if (status != RBX_OK)
        return status;
    listing out = {.engine = engine};
    list_walk(&out, dir, path, depth > DEPTH_MAX ? DEPTH_MAX : depth);
    close(dir);
    if (out.full) {
        rbx_file_entries_free(out.entries, out.count);
        return rbx_fail(err, RBX_EINVAL,
                        "%.200s holds more than %d entries to that depth: list less deep",
                        path[0] ? path : "the session directory", LIST_MAX);
    }
    *entries = out.entries;
    *count = out.count;
    return RBX_OK;
}

rbx_status rbx_file_mkdir(rbx_engine *engine, const char *session_id, const char *path,
                          bool *made, rbx_error *err)
{
    *made = false;
    int dir;
    const char *name;
    rbx_status status = rbx_files_open_holder(engine, session_id, path, true, &dir, &name, err);
    if (status != RBX_OK)
        return status;
    struct stat st;
    if (mkdirat(dir, name, 0755) == 0) {
        *made = true;
        if (engine->is_root)
            (void)fchownat(dir, name, RBX_HOST_UID_BASE + RBX_SANDBOX_UID,
                           RBX_HOST_UID_BASE + RBX_SANDBOX_UID, AT_SYMLINK_NOFOLLOW);
    } else if (errno != EEXIST) {
        status = rbx_files_refused(path, err);
    } else if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) {
        status = rbx_fail(err, RBX_EINVAL, "%.200s exists and is not a directory", path);
    }
    close(dir);
    return status;
}

rbx_status rbx_file_move(rbx_engine *engine, const char *session_id, const char *from,
                         const char *to, rbx_error *err)
{
    rbx_status status = rbx_file_path_check(from, err);
    if (status == RBX_OK)
        status = rbx_file_path_check(to, err);
    int work = -1;
    if (status != RBX_OK || (status = rbx_session_work_fd(engine, session_id, &work, err)))
        return status;
    const char *from_name, *to_name;
    struct stat st;
    int from_dir = rbx_files_open_parent(engine, work, from, false, &from_name);
    if (from_dir < 0 || fstatat(from_dir, from_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        status = rbx_files_refused(from, err);
        if (from_dir >= 0)
            close(from_dir);
        close(work);
        return status;
    }
    int to_dir = rbx_files_open_parent(engine, work, to, true, &to_name);
    close(work);
    if (to_dir < 0)
        status = rbx_files_refused(to, err);
    else if (renameat(from_dir, from_name, to_dir, to_name) != 0)
        status = errno == EINVAL || errno == ENOTEMPTY || errno == EEXIST || errno == EISDIR
                     ? rbx_fail(err, RBX_EINVAL, "cannot move %.200s to %.200s: %s", from, to,
                                strerror(errno))
                     : rbx_files_refused(to, err);
    close(from_dir);
    if (to_dir >= 0)
        close(to_dir);
    return status;
}
