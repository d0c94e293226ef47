/* Session files for front ends that move files in and out (HTTP uploads
 * and downloads). Every path is resolved by the kernel beneath the
 * session's directory with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS):
 * "..", absolute paths and links planted by sandboxed code cannot lead a
 * host-side operation out of the session, even if the code swaps a
 * directory for a link while we walk. */
#include "sessions/files.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "engine/engine.h"
#include "kernels/wire.h"
#include "runbox.h"
#include "sandbox/uids.h"
#include "sessions/session.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define PATH_MAX_LEN 1024
#define PATH_MAX_DEPTH 32
#define LIST_MAX 10000

/* A session file path: relative, components of [^/\0], no "." or "..", no
 * empty components, bounded length and depth. */
rbx_status rbx_file_path_check(const char *path, rbx_error *err)
{
    size_t len = path ? strlen(path) : 0;
    if (len == 0 || len > PATH_MAX_LEN)
        return rbx_fail(err, RBX_EINVAL, "file path must be 1 to %d bytes", PATH_MAX_LEN);
    if (path[0] == '/')
        return rbx_fail(err, RBX_EINVAL, "file path must be relative to the session directory");
    int depth = 0;
    for (const char *p = path; *p;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return rbx_fail(err, RBX_EINVAL,
                            "file path has an empty, '.' or '..' component: paths are relative "
                            "to the session directory and stay inside it");
        if (n > 255)
            return rbx_fail(err, RBX_EINVAL, "a file path component is longer than 255 bytes");
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)p[i] < 0x20)
                return rbx_fail(err, RBX_EINVAL, "file path contains a control character");
        if (++depth > PATH_MAX_DEPTH)
            return rbx_fail(err, RBX_EINVAL, "file path is deeper than %d levels", PATH_MAX_DEPTH);
        p += n + (slash ? 1 : 0);
        if (slash && !*p)
            return rbx_fail(err, RBX_EINVAL, "file path must not end with '/'");
    }
    return RBX_OK;
}

rbx_status rbx_files_refused(const char *path, rbx_error *err)
{
    if (errno == ENOENT)
        return rbx_fail(err, RBX_ENOENT, "no file %.200s in the session", path);
    if (errno == ELOOP || errno == EXDEV)
        return rbx_fail(err, RBX_EINVAL,
                        "%.200s goes through a symbolic link or out of the session: refused", path);
    if (errno == ENXIO || errno == ENODEV) /* a socket, or a device without a driver */
        return rbx_fail(err, RBX_EINVAL, "%.200s is a socket or device, not a regular file", path);
    if (errno == EISDIR || errno == ENOTDIR)
        return rbx_fail(err, RBX_EINVAL, "%.200s is not a regular file", path);
    if (errno == ENOSPC || errno == EDQUOT)
        return rbx_fail(err, RBX_ENOSPC, "the session's disk is full: remove files from it");
    return rbx_fail(err, RBX_ESYSTEM, "cannot access %.200s: %s", path, strerror(errno));
}

rbx_status rbx_session_work_fd(rbx_engine *engine, const char *id, int *fd, rbx_error *err);

static rbx_status not_a_file(const char *path, const char *what, rbx_error *err)
{
    return rbx_fail(err, RBX_EINVAL,
                    "%.200s is %s, not a regular file: only regular files can be downloaded", path,
                    what);
}

int rbx_files_open_parent(rbx_engine *engine, int work, const char *path, bool create,
                          const char **name)
{
    const char *slash = strrchr(path, '/');
    *name = slash ? slash + 1 : path;
    if (!slash)
        return fcntl(work, F_DUPFD_CLOEXEC, 0);
    char dir[PATH_MAX_LEN + 1];
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = 0;
    if (create) {
        for (char *p = dir;; p++) {
            if (*p != '/' && *p)
                continue;
            char saved = *p;
            *p = 0;
            int parent = -1;
            const char *leaf = strrchr(dir, '/');
            if (leaf) {
                char up[PATH_MAX_LEN + 1];
                memcpy(up, dir, (size_t)(leaf - dir));
                up[leaf - dir] = 0;
                parent = rbx_open_beneath(work, up, O_PATH | O_DIRECTORY, 0);
                leaf++;
            } else {
                parent = fcntl(work, F_DUPFD_CLOEXEC, 0);
                leaf = dir;
            }
            if (parent < 0)
                return -1;
            if (mkdirat(parent, leaf, 0755) == 0 && engine->is_root)
                (void)fchownat(parent, leaf, RBX_HOST_UID_BASE + RBX_SANDBOX_UID,
                               RBX_HOST_UID_BASE + RBX_SANDBOX_UID, AT_SYMLINK_NOFOLLOW);
            int saved_errno = errno;
            close(parent);
            errno = saved_errno;
            *p = saved;
            if (!saved)
                break;
        }
    }
    return rbx_open_beneath(work, dir, O_RDONLY | O_DIRECTORY, 0);
}

rbx_status rbx_files_open_holder(rbx_engine *engine, const char *session_id, const char *path,
                                 bool create, int *dir, const char **name, rbx_error *err)
{
    *dir = -1;
    rbx_status status = rbx_file_path_check(path, err);
    int work = -1;
    if (status != RBX_OK || (status = rbx_session_work_fd(engine, session_id, &work, err)))
        return status;
    *dir = rbx_files_open_parent(engine, work, path, create, name);
    close(work);
    return *dir < 0 ? rbx_files_refused(path, err) : RBX_OK;
}

/* E2B's metadata, kept as its envd keeps it: user.e2b.<key>. */
static rbx_status meta_check(const char *const *keys, const char *const *values, size_t count,
                             rbx_error *err)
{
    if (count > RBX_FILE_META_MAX)
        return rbx_fail(err, RBX_EINVAL, "at most %d metadata pairs per file", RBX_FILE_META_MAX);
    for (size_t i = 0; i < count; i++) {
        size_t n = strlen(keys[i]);
        if (n == 0 || n > RBX_FILE_META_KEY_MAX ||
            strspn(keys[i], "abcdefghijklmnopqrstuvwxyz0123456789!#$%&'*+-.^_`|~") != n)
            return rbx_fail(err, RBX_EINVAL,
                            "metadata key '%.140s' must be 1 to %d lowercase token characters",
                            keys[i], RBX_FILE_META_KEY_MAX);
        size_t v = strlen(values[i]);
        if (v > RBX_FILE_META_VALUE_MAX)
            return rbx_fail(err, RBX_EINVAL, "metadata value of '%s' is longer than %d bytes",
                            keys[i], RBX_FILE_META_VALUE_MAX);
        for (size_t j = 0; j < v; j++)
            if ((unsigned char)values[i][j] < 0x20 || (unsigned char)values[i][j] > 0x7e)
                return rbx_fail(err, RBX_EINVAL,
                                "metadata value of '%s' must be printable ASCII", keys[i]);
    }
    return RBX_OK;
}

static int meta_set(int fd, const char *const *keys, const char *const *values, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        char name[RBX_FILE_META_KEY_MAX + 16];
        snprintf(name, sizeof name, "user.e2b.%s", keys[i]);
        if (fsetxattr(fd, name, values[i], strlen(values[i]), 0) != 0)
            return -1;
    }
    return 0;
}

rbx_status rbx_file_put(rbx_engine *engine, const char *session_id, const char *path,
                        const void *data, size_t len, rbx_error *err)
{
    return rbx_file_put_meta(engine, session_id, path, data, len, NULL, NULL, 0, err);
}

rbx_status rbx_file_put_meta(rbx_engine *engine, const char *session_id, const char *path,
                             const void *data, size_t len, const char *const *keys,
                             const char *const *values, size_t meta_count, rbx_error *err)
{
    int dir;
    const char *name;
    rbx_status status = meta_check(keys, values, meta_count, err);
    if (status != RBX_OK ||
        (status = rbx_files_open_holder(engine, session_id, path, true, &dir, &name, err)))
        return status;
    /* Written beside the target and renamed over it: a reader never sees
     * half a file, and a link at the target is replaced, not followed. */
    char temp[64];
    unsigned char rnd[8];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        memset(rnd, 0x5a, sizeof rnd);
    snprintf(temp, sizeof temp, RBX_FILES_UPLOAD_PREFIX "%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0],
             rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
    int fd = openat(dir, temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        status = rbx_files_refused(path, err);
        close(dir);
        return status;
    }
    const char *p = data;
    size_t left = len;
    while (left) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        p += n;
        left -= (size_t)n;
    }
    if (left == 0 && engine->is_root)
        (void)fchown(fd, RBX_HOST_UID_BASE + RBX_SANDBOX_UID, RBX_HOST_UID_BASE + RBX_SANDBOX_UID);
    if (left == 0 && meta_set(fd, keys, values, meta_count) != 0) {
        status = rbx_fail(err, RBX_ESYSTEM, "cannot keep the metadata of %.200s: %s", path,
                          strerror(errno));
        close(fd);
        unlinkat(dir, temp, 0);
        close(dir);
        return status;
    }
    bool ok = left == 0 && close(fd) == 0;
    if (!ok || renameat(dir, temp, dir, name) != 0) {
        status = rbx_files_refused(path, err);
        unlinkat(dir, temp, 0);
    }
    close(dir);
    return status;
}

rbx_status rbx_file_open_read(rbx_engine *engine, const char *session_id, const char *path,
                              uint64_t max, int *fd_out, uint64_t *size, rbx_error *err)
{
    *fd_out = -1;
    *size = 0;
    rbx_status status = rbx_file_path_check(path, err);
    int work = -1;
    if (status != RBX_OK || (status = rbx_session_work_fd(engine, session_id, &work, err)))
        return status;
    /* O_NONBLOCK: a FIFO the program made opens at once instead of
     * waiting for a writer forever (and is then refused as not a file). */
    int fd = rbx_open_beneath(work, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0);
    close(work);
    if (fd < 0)
        return rbx_files_refused(path, err);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return not_a_file(path, S_ISDIR(st.st_mode) ? "a directory" : "a FIFO, socket or device",
                          err);
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return rbx_fail(err, RBX_EINVAL, "%.200s is %lld bytes, more than the limit of %llu", path,
                        (long long)st.st_size, (unsigned long long)max);
    }
    *fd_out = fd;
    *size = (uint64_t)st.st_size;
    return RBX_OK;
}

rbx_status rbx_file_get(rbx_engine *engine, const char *session_id, const char *path, size_t max,
                        char **data, size_t *len, rbx_error *err)
{
    *data = NULL;
    *len = 0;
    int fd;
    uint64_t size;
    rbx_status status = rbx_file_open_read(engine, session_id, path, max, &fd, &size, err);
    if (status != RBX_OK)
        return status;
    char *buf = malloc((size_t)size + 1);
    size_t got = 0;
    while (buf && got < (size_t)size) {
        ssize_t n = read(fd, buf + got, (size_t)size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (!buf)
        return rbx_fail(err, RBX_ESYSTEM, "out of memory");
    buf[got] = 0;
    *data = buf;
    *len = got;
    return RBX_OK;
}

rbx_status rbx_file_delete(rbx_engine *engine, const char *session_id, const char *path,
                           rbx_error *err)
{
    int dir;
    const char *name;
    rbx_status status = rbx_files_open_holder(engine, session_id, path, false, &dir, &name, err);
    if (status != RBX_OK)
        return status;
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        status = rbx_files_refused(path, err);
    else if (rbx_remove_tree(dir, name) != 0)
        status = rbx_files_refused(path, err);
    close(dir);
    return status;
}

typedef struct lister {
    rbx_file_info *files;
    size_t count, cap;
} lister;

static int list_dir(int dirfd, const char *prefix, int depth, lister *out)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    struct dirent *entry;
    int rc = 0;
    while (rc == 0 && (entry = readdir(dir)) && out->count < LIST_MAX) {
        if (!strcmp(entry->d_name, ".") || !strcmp(entry->d_name, ".."))
            continue;
        struct stat st;
        if (fstatat(dirfd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (out->count == out->cap) {
            out->cap = out->cap ? out->cap * 2 : 64;
            rbx_file_info *grown = realloc(out->files, out->cap * sizeof *grown);
            if (!grown) {
                rc = -1;
                break;
            }
            out->files = grown;
        }
        rbx_file_info *info = &out->files[out->count++];
        snprintf(info->path, sizeof info->path, "%s%s", prefix, entry->d_name);
        info->size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
        info->modified_unix = st.st_mtim.tv_sec;
        info->type = S_ISDIR(st.st_mode)   ? "directory"
                     : S_ISLNK(st.st_mode) ? "link"
                     : S_ISREG(st.st_mode) ? "file"
                                           : "other";
        if (S_ISDIR(st.st_mode) && depth < PATH_MAX_DEPTH) {
            int sub = openat(dirfd, entry->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                char next[sizeof info->path + 2];
                snprintf(next, sizeof next, "%s/", info->path);
                rc = list_dir(sub, next, depth + 1, out);
                close(sub);
            }
        }
    }
    closedir(dir);
    return rc;
}

rbx_status rbx_file_list(rbx_engine *engine, const char *session_id, rbx_file_info **files,
                         size_t *count, rbx_error *err)
{
    *files = NULL;
    *count = 0;
    int work = -1;
    rbx_status status = rbx_session_work_fd(engine, session_id, &work, err);
    if (status != RBX_OK)
        return status;
    lister out = {0};
    int rc = list_dir(work, "", 0, &out);
    close(work);
    if (rc != 0) {
        free(out.files);
        return rbx_fail(err, RBX_ESYSTEM, "cannot list the session's files: %s", strerror(errno));
    }
    *files = out.files;
    *count = out.count;
    return RBX_OK;
}
