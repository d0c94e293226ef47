/* Moving a session between nodes: its files as a tar archive (export), and
 * a new session made from one (import). An operator drains a node, exports
 * its sessions and imports them through the load balancer, which puts each
 * on the node that owns its id now.
 *
 * Both sides hold the session's lock, so no execution writes while the
 * files are read, and none sees a half-imported session. Export reads
 * beneath the session's directory without following links (links are
 * archived as links); import trusts nothing in the archive: each path is
 * checked like an upload's, only directories, regular files and links that
 * stay inside the session are accepted, set-id bits are dropped, sizes are
 * checked against the session's disk cap before anything is written, and
 * any refusal removes the new session whole. */
#include "internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXPORT_DEPTH_MAX 64
#define IMPORT_ENTRIES_MAX 100000
#define SESSION_WAIT_S 30.0

/* ---- export ---------------------------------------------------------- */

typedef struct exporter {
    struct archive *out;
    rbx_error *err;
    rbx_status status;
} exporter;

static bool export_failed(exporter *x, const char *what)
{
    if (x->status == RBX_OK)
        x->status = rbx_fail(x->err, RBX_ESYSTEM, "cannot export the session: %s", what);
    return false;
}

static bool write_header(exporter *x, const char *path, const struct stat *st, const char *link)
{
    struct archive_entry *entry = archive_entry_new();
    if (!entry)
        return export_failed(x, "out of memory");
    archive_entry_set_pathname(entry, path);
    archive_entry_set_mode(entry, st->st_mode & (S_IFMT | 0777));
    archive_entry_set_size(entry, S_ISREG(st->st_mode) ? st->st_size : 0);
    archive_entry_set_mtime(entry, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
    if (link)
        archive_entry_set_symlink(entry, link);
    bool ok = archive_write_header(x->out, entry) == ARCHIVE_OK;
    archive_entry_free(entry);
    return ok || export_failed(x, archive_error_string(x->out));
}

static bool export_file(exporter *x, int dir, const char *name, const char *path)
{
    /* O_NONBLOCK: a FIFO swapped in for the file opens at once and is
     * refused below instead of blocking the export forever. */
    int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return true; /* gone or changed kind since it was listed: not part of it */
    }
    bool ok = write_header(x, path, &st, NULL);
    char buf[65536];
    off_t left = st.st_size;
    while (ok && left > 0) {
        ssize_t n = read(fd, buf, left < (off_t)sizeof buf ? (size_t)left : sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* truncated meanwhile: libarchive pads the rest */
        ok = archive_write_data(x->out, buf, (size_t)n) == n ||
             export_failed(x, archive_error_string(x->out));
        left -= n;
    }
    close(fd);
    return ok;
}

static bool export_dir(exporter *x, int dir, const char *prefix, int depth)
{
    if (depth > EXPORT_DEPTH_MAX)
        return true; /* deeper than any upload can make: left out */
    int fd = fcntl(dir, F_DUPFD_CLOEXEC, 0);
    DIR *listing = fd >= 0 ? fdopendir(fd) : NULL;
    if (!listing) {
        if (fd >= 0)
            close(fd);
        return export_failed(x, strerror(errno));
    }
    bool ok = true;
    struct dirent *d;
    while (ok && (d = readdir(listing))) {
        if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
            continue;
        char path[4096];
        if (snprintf(path, sizeof path, "%s%s", prefix, d->d_name) >= (int)sizeof path)
            continue;
        struct stat st;
        if (fstatat(dir, d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISREG(st.st_mode)) {
            ok = export_file(x, dir, d->d_name, path);
        } else if (S_ISLNK(st.st_mode)) {
            char target[4096];
            ssize_t n = readlinkat(dir, d->d_name, target, sizeof target - 1);
            if (n > 0) {
                target[n] = 0;
                ok = write_header(x, path, &st, target);
            }
        } else if (S_ISDIR(st.st_mode)) {
            int sub = openat(dir, d->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0)
                continue;
            char sub_prefix[sizeof path + 1];
            snprintf(sub_prefix, sizeof sub_prefix, "%s/", path);
            ok = write_header(x, path, &st, NULL) && export_dir(x, sub, sub_prefix, depth + 1);
            close(sub);
        }
        /* FIFOs, sockets and devices mean nothing on another node: left out. */
    }
    closedir(listing);
    return ok;
}

static int open_work(const rbx_session *session, rbx_error *err)
{
    int work = open(session->work_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (work < 0)
        rbx_fail(err, RBX_ESYSTEM, "cannot open session %s's files: %s", session->id,
                 strerror(errno));
    return work;
}

rbx_status rbx_session_export(rbx_engine *engine, const char *id, int out_fd, rbx_error *err)
{
    if (!rbx_session_id_valid(id))
        return rbx_fail(err, RBX_EINVAL,
                        "invalid session id: it must match " RBX_SESSION_ID_PATTERN);
    if (!rbx_session_exists(engine, id))
        return rbx_fail(err, RBX_ENOENT, "no session %s", id);
    rbx_session session;
    rbx_status status = rbx_session_acquire(engine, id, SESSION_WAIT_S, -1, &session, err);
    if (status != RBX_OK)
        return status;
    int work = open_work(&session, err);
    exporter x = {.out = archive_write_new(), .err = err, .status = RBX_OK};
    if (work < 0) {
        x.status = err->status;
    } else if (!x.out || archive_write_set_format_pax_restricted(x.out) != ARCHIVE_OK ||
               /* Names are bytes: stored as they are, whatever the locale
                * (runbox runs in "C", where libarchive could not convert a
                * name like données.csv to the UTF-8 pax wants). */
               archive_write_set_format_option(x.out, "pax", "hdrcharset", "BINARY") !=
                   ARCHIVE_OK ||
               archive_write_open_fd(x.out, out_fd) != ARCHIVE_OK) {
        export_failed(&x, x.out ? archive_error_string(x.out) : "out of memory");
    } else if (export_dir(&x, work, "", 0) && archive_write_close(x.out) != ARCHIVE_OK) {
        export_failed(&x, archive_error_string(x.out));
    }
    if (x.out)
        archive_write_free(x.out);
    if (work >= 0)
        close(work);
    rbx_session_release(engine, &session);
    return x.status;
}

/* ---- import ---------------------------------------------------------- */

typedef struct importer {
    rbx_engine *engine;
    struct archive *in;
    int work;
    uint64_t bytes, cap;
    size_t files;
    rbx_error *err;
} importer;

/* An archive's path as a session file path: "./" prefixes and a directory's
 * trailing slash are taken off; what is left must pass the upload check. */
static rbx_status entry_path(const char *raw, char *path, size_t size, rbx_error *err)
{
    if (!raw)
        return rbx_fail(err, RBX_EINVAL, "the archive has an entry without a usable name");
    while (raw[0] == '.' && raw[1] == '/')
        raw += 2;
    snprintf(path, size, "%s", raw);
    size_t len = strlen(path);
    while (len > 0 && path[len - 1] == '/')
        path[--len] = 0;
    if (strlen(raw) >= size)
        return rbx_fail(err, RBX_EINVAL, "the archive has a path longer than %zu bytes", size - 1);
    rbx_error why = {0};
    if (rbx_file_path_check(path, &why) != RBX_OK)
        return rbx_fail(err, RBX_EINVAL, "the archive's entry '%.200s' is refused: %s", raw,
                        why.message);
    return RBX_OK;
}

static rbx_status import_file(importer *m, struct archive_entry *entry, const char *path)
{
    const char *name;
    int dir = rbx_files_open_parent(m->engine, m->work, path, true, &name);
    if (dir < 0)
        return rbx_fail(m->err, RBX_EINVAL, "cannot place '%.200s' in the session: %s", path,
                        strerror(errno));
    mode_t mode = archive_entry_perm(entry) & 0777;
    int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    close(dir);
    if (fd < 0)
        return rbx_fail(m->err, RBX_EINVAL, "cannot create '%.200s' in the session: %s", path,
                        errno == EEXIST ? "the archive holds it twice" : strerror(errno));
    rbx_status status = RBX_OK;
    char buf[65536];
    for (;;) {
        la_ssize_t n = archive_read_data(m->in, buf, sizeof buf);
        if (n == 0)
            break;
        if (n < 0) {
            status = rbx_fail(m->err, RBX_EINVAL, "the archive is damaged at '%.200s': %s", path,
                              archive_error_string(m->in));
            break;
        }
        m->bytes += (uint64_t)n;
        if (m->bytes > m->cap) {
            status = rbx_fail(m->err, RBX_ENOSPC,
                              "the archive holds more than the session's disk cap of %llu bytes",
                              (unsigned long long)m->cap);
            break;
        }
        if (rbx_write_all(fd, buf, (size_t)n) != 0) {
            status = rbx_fail(m->err, errno == EDQUOT || errno == ENOSPC ? RBX_ENOSPC : RBX_ESYSTEM,
                              "cannot write '%.200s': %s", path, strerror(errno));
            break;
        }
    }
    if (m->engine->is_root)
        (void)fchown(fd, RBX_HOST_UID_BASE + RBX_SANDBOX_UID, RBX_HOST_UID_BASE + RBX_SANDBOX_UID);
    (void)fchmod(fd, mode); /* umask took bits from the open's mode */
    close(fd);
    m->files++;
    return status;
}

static rbx_status import_entry(importer *m, struct archive_entry *entry)
{
    char path[1100];
    /* Bytes as stored when the archive says so (pax's hdrcharset=BINARY,
     * as export writes), else its UTF-8 names as they are. */
    const char *stored = archive_entry_pathname(entry);
    if (!stored)
        stored = archive_entry_pathname_utf8(entry);
    /* The session's directory itself ("./" in tar's own archives) is there. */
    if (stored && archive_entry_filetype(entry) == AE_IFDIR && stored[strspn(stored, "./")] == 0)
        return RBX_OK;
    rbx_status status = entry_path(stored, path, sizeof path, m->err);
    if (status != RBX_OK)
        return status;
    if (archive_entry_hardlink(entry))
        return rbx_fail(m->err, RBX_EINVAL,
                        "the archive's entry '%.200s' is a hard link: only directories, regular "
                        "files and symbolic links inside the session are accepted",
                        path);
    mode_t type = archive_entry_filetype(entry);
    if (type == AE_IFREG) {
        /* The declared size first: a sparse 10 GiB member is refused
         * before a byte of it is written. */
        if (archive_entry_size_is_set(entry) &&
            (uint64_t)archive_entry_size(entry) > m->cap - m->bytes)
            return rbx_fail(m->err, RBX_ENOSPC,
                            "'%.200s' (%lld bytes) does not fit in the session's disk cap of "
                            "%llu bytes",
                            path, (long long)archive_entry_size(entry), (unsigned long long)m->cap);
        return import_file(m, entry, path);
    }
    const char *name;
    int dir = rbx_files_open_parent(m->engine, m->work, path, true, &name);
    if (dir < 0)
        return rbx_fail(m->err, RBX_EINVAL, "cannot place '%.200s' in the session: %s", path,
                        strerror(errno));
    int rc = 0;
    if (type == AE_IFDIR) {
        rc = mkdirat(dir, name, archive_entry_perm(entry) & 0777);
        if (rc != 0 && errno == EEXIST) /* made already as a file's parent */
            rc = 0;
    } else if (type == AE_IFLNK) {
        const char *target = archive_entry_symlink(entry);
        /* Relative only: an absolute target names the sandbox's root, not
         * the session's. */
        if (!target || target[0] == '/' || !rbx_link_stays_inside(path, target)) {
            close(dir);
            return rbx_fail(m->err, RBX_EINVAL,
                            "the archive's link '%.200s' points to '%.200s', outside the session: "
                            "links must be relative and stay inside it",
                            path, target ? target : "");
        }
        rc = symlinkat(target, dir, name);
    } else {
        close(dir);
        return rbx_fail(m->err, RBX_EINVAL,
                        "the archive's entry '%.200s' is a device, FIFO or socket: only "
                        "directories, regular files and symbolic links are accepted",
                        path);
    }
    struct stat st;
    /* The umask took bits from mkdirat's mode (never through a link: the
     * session holds nothing else while it is imported, but a link of the
     * archive's may stand where a later entry names a directory). */
    if (rc == 0 && type == AE_IFDIR && fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(st.st_mode))
        (void)fchmodat(dir, name, archive_entry_perm(entry) & 0777, 0);
    if (rc == 0 && m->engine->is_root)
        (void)fchownat(dir, name, RBX_HOST_UID_BASE + RBX_SANDBOX_UID,
                       RBX_HOST_UID_BASE + RBX_SANDBOX_UID, AT_SYMLINK_NOFOLLOW);
    int error = errno;
    close(dir);
    if (rc != 0)
        return rbx_fail(m->err, RBX_EINVAL, "cannot make '%.200s' in the session: %s", path,
                        strerror(error));
    return RBX_OK;
}

static rbx_status import_all(importer *m)
{
    struct archive_entry *entry;
    size_t entries = 0;
    for (;;) {
        int rc = archive_read_next_header(m->in, &entry);
        if (rc == ARCHIVE_EOF)
            return RBX_OK;
        if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
            return rbx_fail(m->err, RBX_EINVAL, "not a readable tar archive: %s",
                            archive_error_string(m->in));
        if (++entries > IMPORT_ENTRIES_MAX)
            return rbx_fail(m->err, RBX_EINVAL, "the archive has more than %d entries",
                            IMPORT_ENTRIES_MAX);
        rbx_status status = import_entry(m, entry);
        if (status != RBX_OK)
            return status;
    }
}

static bool is_empty(int dir)
{
    int fd = fcntl(dir, F_DUPFD_CLOEXEC, 0);
    DIR *listing = fd >= 0 ? fdopendir(fd) : NULL;
    if (!listing) {
        if (fd >= 0)
            close(fd);
        return false;
    }
    bool empty = true;
    struct dirent *d;
    while (empty && (d = readdir(listing)))
        empty = !strcmp(d->d_name, ".") || !strcmp(d->d_name, "..");
    closedir(listing);
    return empty;
}

rbx_status rbx_session_import(rbx_engine *engine, const char *id, const rbx_archive_source *from,
                              rbx_session_import_info *info, rbx_error *err)
{
    memset(info, 0, sizeof *info);
    if (!rbx_session_id_valid(id))
        return rbx_fail(err, RBX_EINVAL,
                        "invalid session id: it must match " RBX_SESSION_ID_PATTERN);
    if (rbx_session_exists(engine, id))
        return rbx_fail(err, RBX_EBUSY,
                        "session %s already exists here: remove it first, or import under "
                        "another id",
                        id);
    rbx_session session;
    rbx_status status = rbx_session_acquire(engine, id, SESSION_WAIT_S, -1, &session, err);
    if (status != RBX_OK)
        return status;
    importer m = {.engine = engine,
                  .in = archive_read_new(),
                  .work = open_work(&session, err),
                  .cap = engine->config.disk_cap_bytes ? engine->config.disk_cap_bytes : UINT64_MAX,
                  .err = err};
    bool ours = m.work >= 0 && is_empty(m.work);
    if (m.work < 0) {
        status = err->status;
    } else if (!ours) { /* another import (or an execution) made it meanwhile */
        status = rbx_fail(err, RBX_EBUSY,
                          "session %s already exists here: remove it first, or "
                          "import under another id",
                          id);
    } else if (!m.in || archive_read_support_format_tar(m.in) != ARCHIVE_OK ||
               archive_read_support_filter_gzip(m.in) != ARCHIVE_OK ||
               (from->data ? archive_read_open_memory(m.in, from->data, from->len)
                           : archive_read_open_fd(m.in, from->fd, 65536)) != ARCHIVE_OK) {
        status = rbx_fail(err, RBX_EINVAL, "not a readable tar archive: %s",
                          m.in ? archive_error_string(m.in) : "out of memory");
    } else {
        status = import_all(&m);
    }
    if (m.in)
        archive_read_free(m.in);
    if (m.work >= 0)
        close(m.work);
    info->files = m.files;
    info->bytes = m.bytes;
    rbx_session_release(engine, &session);
    if (status != RBX_OK && ours) {
        /* Nothing of a refused archive stays: the session goes whole. */
        rbx_error ignored = {0};
        (void)rbx_session_remove(engine, id, SESSION_WAIT_S, &ignored);
    }
    return status;
}
