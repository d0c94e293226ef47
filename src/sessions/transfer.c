/* Moving a session between nodes: its files as a tar archive (export, here),
 * and a new session made from one (import, transfer_import.c). An operator
 * drains a node, exports its sessions and imports them through the load
 * balancer, which puts each on the node that owns its id now.
 *
 * Both sides hold the session's lock, so no execution writes while the
 * files are read, and none sees a half-imported session. Export reads
 * beneath the session's directory without following links (links are
 * archived as links, whatever they point to) and carries everything an
 * import takes (transfer.h): names as bytes, any depth, holes as holes,
 * a file's other names as hard links to its first.
 * Sandboxed code chose all of it, so a session must not be able to make
 * its export fail where its import would not: that would pin it to its
 * node. Where a session holds more than a move carries, export refuses
 * before writing it all, with the reason import would give. */
#include "sessions/transfer.h"
#include "base/archive_lib.h"
#include "base/error.h"
#include "engine/engine.h"
#include "runbox.h"
#include "sessions/session.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SESSION_WAIT_S 30.0
/* A file with more holes than this goes whole: its sparse map would be
 * larger than is worth it (and than readers like to parse). */
#define SPARSE_REGIONS_MAX 4096

/* ---- what both sides hold ------------------------------------------- */

uint64_t rbx_transfer_cap(const rbx_engine *engine)
{
    return engine->config.disk_cap_bytes ? engine->config.disk_cap_bytes : UINT64_MAX;
}

rbx_status rbx_transfer_too_many(rbx_error *err, const char *what)
{
    return rbx_fail(err, RBX_EINVAL,
                    "%s holds more than %d files, directories and links, the most a session "
                    "move carries: pack some into one archive inside the session, or remove them",
                    what, RBX_TRANSFER_MEMBERS_MAX);
}

rbx_status rbx_transfer_too_big(rbx_error *err, const char *what, uint64_t cap)
{
    return rbx_fail(err, RBX_ENOSPC,
                    "%s holds more than the disk cap of %llu bytes of data and names "
                    "(copies that share their blocks count whole in an archive): remove files",
                    what, (unsigned long long)cap);
}

rbx_status rbx_transfer_file_too_big(rbx_error *err, const char *path, uint64_t size,
                                     uint64_t cap)
{
    return rbx_fail(err, RBX_ENOSPC,
                    "'%.200s' (%llu bytes) does not fit in the session's disk cap of %llu bytes",
                    path, (unsigned long long)size, (unsigned long long)cap);
}

/* ---- export ---------------------------------------------------------- */

/* One directory on the way down. Its names are read whole when it is
 * entered, so only the directory being listed is open, however deep the
 * tree: the walk climbs back with "..", checked to be the directory it
 * came from. */
typedef struct level {
    char *names; /* NUL-separated */
    size_t size, next;
    dev_t dev;
    ino_t ino;
    size_t prefix; /* bytes of the path before this directory's members */
} level;

typedef struct exporter {
    struct archive *out;
    /* Files with more than one name: the first goes whole, the others as
     * hard links to it, so that a file linked a thousand times costs the
     * archive (and the import's cap) its data once, as it costs the disk. */
    struct archive_entry_linkresolver *links;
    char *path; /* the member being written, relative to the session */
    size_t path_cap;
    size_t members;
    uint64_t bytes, names, cap; /* data, names and link targets: within cap together */
    const char *part; /* members written now are of this part (NULL: the session's files) */
    rbx_error *err;
    rbx_status status;
} exporter;

/* rbx_transfer_out, as the layers that carry parts see it. */
struct rbx_transfer_out {
    exporter x;
};

static bool export_failed(exporter *x, const char *what)
{
    if (x->status == RBX_OK)
        x->status = rbx_fail(x->err, RBX_ESYSTEM, "cannot export the session: %s", what);
    return false;
}

static bool refuse(exporter *x, rbx_status status)
{
    if (x->status == RBX_OK)
        x->status = status;
    return false;
}

/* What the cap has left for the rest of the session. */
static uint64_t room(const exporter *x)
{
    return x->cap - x->bytes - x->names;
}

static bool write_header(exporter *x, struct archive_entry *entry)
{
    /* Names count like data: a tree 20,000 levels deep holds 400 MB of
     * them in an archive, though hardly any on the session's disk. */
    const char *link = rbx_ar->archive_entry_symlink(entry);
    if (!link)
        link = rbx_ar->archive_entry_hardlink(entry);
    uint64_t names = strlen(rbx_ar->archive_entry_pathname(entry)) + (link ? strlen(link) : 0);
    if (names > room(x))
        return refuse(x, rbx_transfer_too_big(x->err, "the session", x->cap));
    x->names += names;
    if (rbx_ar->archive_write_header(x->out, entry) != ARCHIVE_OK)
        return export_failed(x, rbx_ar->archive_error_string(x->out));
    return true;
}

static struct archive_entry *new_entry(exporter *x, const struct stat *st)
{
    struct archive_entry *entry = rbx_ar->archive_entry_new();
    if (!entry) {
        export_failed(x, "out of memory");
        return NULL;
    }
    rbx_ar->archive_entry_set_pathname(entry, x->path);
    /* Set-id bits stay behind; a directory's sticky bit, no privilege, goes. */
    mode_t keep = S_IFMT | 0777 | (S_ISDIR(st->st_mode) ? S_ISVTX : 0);
    rbx_ar->archive_entry_set_mode(entry, st->st_mode & keep);
    rbx_ar->archive_entry_set_size(entry, S_ISREG(st->st_mode) ? st->st_size : 0);
    rbx_ar->archive_entry_set_mtime(entry, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
    if (x->part)
        rbx_ar->archive_entry_xattr_add_entry(entry, RBX_TRANSFER_PART_XATTR, x->part,
                                              strlen(x->part));
    return entry;
}

/* A file with holes goes as a sparse member whose map its data regions
 * (SEEK_DATA, SEEK_HOLE) make: the archive holds only the data, and an
 * import counts only that against its cap, as the session's disk did.
 * Returns the bytes of data the member carries. */
static uint64_t map_data(int fd, off_t size, struct archive_entry *entry)
{
    uint64_t data = 0;
    size_t regions = 0;
    bool whole = false;
    for (off_t at = 0; at < size && !whole;) {
        off_t start = lseek(fd, at, SEEK_DATA);
        if (start < 0 || start >= size) {
            whole = start < 0 && errno != ENXIO; /* ENXIO: a hole to the end */
            break;
        }
        off_t end = lseek(fd, start, SEEK_HOLE);
        if (end < 0 || end > size)
            end = size;
        whole = ++regions > SPARSE_REGIONS_MAX;
        rbx_ar->archive_entry_sparse_add_entry(entry, start, end - start);
        data += (uint64_t)(end - start);
        at = end;
    }
    if (whole || data == (uint64_t)size) {
        rbx_ar->archive_entry_sparse_clear(entry);
        return (uint64_t)size;
    }
    if (regions == 0) /* holes only: an empty region at the end says so */
        rbx_ar->archive_entry_sparse_add_entry(entry, size, 0);
    return data;
}

static bool write_zeros(exporter *x, uint64_t len)
{
    static const char zeros[65536];
    while (len > 0) {
        size_t n = len < sizeof zeros ? (size_t)len : sizeof zeros;
        if (rbx_ar->archive_write_data(x->out, zeros, n) != (la_ssize_t)n)
            return export_failed(x, rbx_ar->archive_error_string(x->out));
        len -= n;
    }
    return true;
}

/* len bytes of the file from offset on; what it no longer holds (it was
 * truncated meanwhile) goes as zeros, so the member keeps its size. */
static bool write_region(exporter *x, int fd, off_t offset, uint64_t len)
{
    char buf[65536];
    while (len > 0) {
        ssize_t n = pread(fd, buf, len < sizeof buf ? (size_t)len : sizeof buf, offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return write_zeros(x, len);
        if (rbx_ar->archive_write_data(x->out, buf, (size_t)n) != n)
            return export_failed(x, rbx_ar->archive_error_string(x->out));
        offset += n;
        len -= (uint64_t)n;
    }
    return true;
}

/* The member's data as a stream that libarchive cuts the holes out of. */
static bool write_file_data(exporter *x, int fd, struct archive_entry *entry, off_t size)
{
    if (rbx_ar->archive_entry_sparse_reset(entry) == 0)
        return write_region(x, fd, 0, (uint64_t)size);
    off_t at = 0;
    la_int64_t offset, length;
    while (rbx_ar->archive_entry_sparse_next(entry, &offset, &length) == ARCHIVE_OK) {
        if (!write_zeros(x, (uint64_t)(offset - at)) ||
            !write_region(x, fd, offset, (uint64_t)length))
            return false;
        at = offset + length;
    }
    return write_zeros(x, (uint64_t)(size - at));
}

static bool export_file(exporter *x, int dir, const char *name)
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
    if ((uint64_t)st.st_size > x->cap) {
        close(fd);
        return refuse(x, rbx_transfer_file_too_big(x->err, x->path, (uint64_t)st.st_size, x->cap));
    }
    struct archive_entry *entry = new_entry(x, &st);
    bool ok = entry != NULL;
    /* A part's files go whole: its members are placed one by one, never
     * as links to each other. */
    if (ok && st.st_nlink > 1 && !x->part) {
        rbx_ar->archive_entry_set_dev(entry, st.st_dev);
        rbx_ar->archive_entry_set_ino64(entry, (la_int64_t)st.st_ino);
        rbx_ar->archive_entry_set_nlink(entry, (unsigned)st.st_nlink);
        struct archive_entry *unused = NULL; /* tar's way never holds one back */
        rbx_ar->archive_entry_linkify(x->links, &entry, &unused);
    }
    bool linked = ok && rbx_ar->archive_entry_hardlink(entry) != NULL;
    uint64_t data = ok && !linked ? map_data(fd, st.st_size, entry) : 0;
    if (ok && data > room(x))
        ok = refuse(x, rbx_transfer_too_big(x->err, "the session", x->cap));
    x->bytes += data;
    ok = ok && write_header(x, entry) && (linked || write_file_data(x, fd, entry, st.st_size));
    if (entry)
        rbx_ar->archive_entry_free(entry);
    close(fd);
    return ok;
}

static bool export_link(exporter *x, int dir, const char *name, const struct stat *st)
{
    char target[4096]; /* PATH_MAX: no link's target is longer */
    ssize_t n = readlinkat(dir, name, target, sizeof target - 1);
    if (n <= 0)
        return true; /* gone meanwhile */
    target[n] = 0;
    struct archive_entry *entry = new_entry(x, st);
    if (!entry)
        return false;
    rbx_ar->archive_entry_set_symlink(entry, target);
    bool ok = write_header(x, entry);
    rbx_ar->archive_entry_free(entry);
    return ok;
}

/* The names in dir, read whole (the member count bounds them). */
static bool read_names(exporter *x, int dir, level *into)
{
    int fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *listing = fd >= 0 ? fdopendir(fd) : NULL;
    if (!listing) {
        if (fd >= 0)
            close(fd);
        return export_failed(x, strerror(errno));
    }
    size_t cap = 0;
    bool ok = true;
    struct dirent *d;
    while (ok && (errno = 0, d = readdir(listing))) {
        if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
            continue;
        size_t len = strlen(d->d_name) + 1;
        if (into->size + len > cap) {
            cap = (into->size + len) * 2;
            char *grown = realloc(into->names, cap);
            if (!grown) {
                ok = export_failed(x, "out of memory");
                break;
            }
            into->names = grown;
        }
        memcpy(into->names + into->size, d->d_name, len);
        into->size += len;
    }
    if (ok && errno)
        ok = export_failed(x, strerror(errno));
    closedir(listing);
    return ok;
}

/* The member's path: the directory's prefix, then name. */
static bool set_path(exporter *x, size_t prefix, const char *name)
{
    size_t len = strlen(name);
    if (prefix + len + 2 > x->path_cap) {
        size_t cap = (prefix + len + 2) * 2;
        char *grown = realloc(x->path, cap);
        if (!grown)
            return export_failed(x, "out of memory");
        x->path = grown;
        x->path_cap = cap;
    }
    memcpy(x->path + prefix, name, len + 1);
    return true;
}

/* Climbs from the directory just finished to its parent, which must be
 * the one the walk came down from: sandboxed code that moves a directory
 * meanwhile makes the export fail, never wander. */
static int climb(exporter *x, int cur, const level *parent)
{
    int up = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (up >= 0 && fstat(up, &st) == 0 && st.st_dev == parent->dev && st.st_ino == parent->ino)
        return up;
    if (up >= 0)
        close(up);
    export_failed(x, "a directory moved while it was exported: export it again");
    return -1;
}

static bool push(exporter *x, level **levels, size_t *depth, size_t *cap, int dir,
                 const struct stat *st, size_t prefix)
{
    if (*depth == *cap) {
        size_t grown_cap = *cap ? *cap * 2 : 16;
        level *grown = realloc(*levels, grown_cap * sizeof *grown);
        if (!grown)
            return export_failed(x, "out of memory");
        *levels = grown;
        *cap = grown_cap;
    }
    level *top = &(*levels)[(*depth)++];
    *top = (level){.dev = st->st_dev, .ino = st->st_ino, .prefix = prefix};
    return read_names(x, dir, top);
}

/* Depth first, with one directory open at a time, so that no depth a
 * session can make is too deep for it. */
static bool export_tree(exporter *x, int work, const char *base)
{
    level *levels = NULL;
    size_t depth = 0, cap = 0;
    struct stat st;
    int cur = openat(work, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    size_t start = strlen(base);
    bool ok = cur >= 0 && fstat(cur, &st) == 0 && set_path(x, 0, base)
                  ? push(x, &levels, &depth, &cap, cur, &st, start)
                  : export_failed(x, strerror(errno));
    while (ok && depth > 0) {
        level *top = &levels[depth - 1];
        if (top->next >= top->size) {
            free(top->names);
            if (--depth == 0)
                break;
            int up = climb(x, cur, &levels[depth - 1]);
            close(cur);
            cur = up;
            ok = cur >= 0;
            continue;
        }
        const char *name = top->names + top->next;
        top->next += strlen(name) + 1;
        if (fstatat(cur, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue; /* gone meanwhile */
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
            continue; /* FIFOs, sockets and devices mean nothing on another node */
        if (++x->members > RBX_TRANSFER_MEMBERS_MAX) {
            ok = refuse(x, rbx_transfer_too_many(x->err, "the session"));
            break;
        }
        if (!set_path(x, top->prefix, name)) {
            ok = false;
        } else if (S_ISREG(st.st_mode)) {
            ok = export_file(x, cur, name);
        } else if (S_ISLNK(st.st_mode)) {
            ok = export_link(x, cur, name, &st);
        } else {
            int sub = openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            struct archive_entry *entry = sub >= 0 ? new_entry(x, &st) : NULL;
            size_t prefix = strlen(x->path);
            ok = sub < 0 || (entry && write_header(x, entry));
            if (entry)
                rbx_ar->archive_entry_free(entry);
            if (ok && sub >= 0 && fstat(sub, &st) == 0) {
                x->path[prefix] = '/';
                x->path[prefix + 1] = 0;
                ok = push(x, &levels, &depth, &cap, sub, &st, prefix + 1);
                close(cur);
                cur = sub;
            } else if (sub >= 0) {
                close(sub);
            }
        }
    }
    while (depth > 0)
        free(levels[--depth].names);
    free(levels);
    if (cur >= 0)
        close(cur);
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

rbx_status rbx_transfer_add_tree(rbx_transfer_out *out, int dir, const char *prefix,
                                 const char *part)
{
    exporter *x = &out->x;
    x->part = part;
    (void)export_tree(x, dir, prefix);
    x->part = NULL;
    return x->status;
}

rbx_status rbx_transfer_add_file(rbx_transfer_out *out, int dir, const char *name,
                                 const char *path, const char *part)
{
    exporter *x = &out->x;
    if (x->status != RBX_OK)
        return x->status;
    if (++x->members > RBX_TRANSFER_MEMBERS_MAX)
        return refuse(x, rbx_transfer_too_many(x->err, "the session")), x->status;
    x->part = part;
    (void)(set_path(x, 0, path) && export_file(x, dir, name));
    x->part = NULL;
    return x->status;
}

rbx_status rbx_transfer_add_bytes(rbx_transfer_out *out, const char *path, const char *part,
                                  const void *data, size_t len)
{
    exporter *x = &out->x;
    if (x->status != RBX_OK)
        return x->status;
    if (++x->members > RBX_TRANSFER_MEMBERS_MAX)
        return refuse(x, rbx_transfer_too_many(x->err, "the session")), x->status;
    if (len > room(x))
        return refuse(x, rbx_transfer_too_big(x->err, "the session", x->cap)), x->status;
    x->bytes += len;
    struct stat st = {.st_mode = S_IFREG | 0600, .st_size = (off_t)len};
    clock_gettime(CLOCK_REALTIME, &st.st_mtim);
    x->part = part;
    struct archive_entry *entry = set_path(x, 0, path) ? new_entry(x, &st) : NULL;
    x->part = NULL;
    if (entry && write_header(x, entry) &&
        rbx_ar->archive_write_data(x->out, data, len) != (la_ssize_t)len)
        export_failed(x, rbx_ar->archive_error_string(x->out));
    if (entry)
        rbx_ar->archive_entry_free(entry);
    return x->status;
}

rbx_status rbx_transfer_export(rbx_engine *engine, const char *id, int out_fd,
                               rbx_transfer_more_fn more, void *user, rbx_error *err)
{
    if (!rbx_session_id_valid(id))
        return rbx_fail(err, RBX_EINVAL,
                        "invalid session id: it must match " RBX_SESSION_ID_PATTERN);
    if (!rbx_session_exists(engine, id))
        return rbx_fail(err, RBX_ENOENT, "no session %s", id);
    rbx_status status = rbx_archive_load(err);
    if (status != RBX_OK)
        return status;
    rbx_session session;
    status = rbx_session_acquire(engine, id, SESSION_WAIT_S, -1, &session, err);
    if (status != RBX_OK)
        return status;
    int work = open_work(&session, err);
    rbx_transfer_out out = {.x = {.out = rbx_ar->archive_write_new(),
                  .links = rbx_ar->archive_entry_linkresolver_new(),
                  .cap = rbx_transfer_cap(engine),
                  .err = err,
                  .status = RBX_OK}};
    exporter *x = &out.x;
    if (x->links)
        rbx_ar->archive_entry_linkresolver_set_strategy(x->links, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
    if (work < 0) {
        x->status = err->status;
    } else if (!x->out || !x->links ||
               rbx_ar->archive_write_set_format_pax_restricted(x->out) != ARCHIVE_OK ||
               /* Names are bytes: stored as they are, whatever the locale
                * (runbox runs in "C", where libarchive could not convert a
                * name like données.csv to the UTF-8 pax wants). */
               rbx_ar->archive_write_set_format_option(x->out, "pax", "hdrcharset", "BINARY") !=
                   ARCHIVE_OK ||
               rbx_ar->archive_write_open_fd(x->out, out_fd) != ARCHIVE_OK) {
        export_failed(x, x->out ? rbx_ar->archive_error_string(x->out) : "out of memory");
    } else if (export_tree(x, work, "")) {
        /* What the layers above carry besides the files (checkpoints). */
        rbx_status carried = more ? more(user, session.dir_fd, &out, err) : RBX_OK;
        if (carried != RBX_OK)
            refuse(x, carried);
        else if (rbx_ar->archive_write_close(x->out) != ARCHIVE_OK)
            export_failed(x, rbx_ar->archive_error_string(x->out));
    }
    if (x->out)
        rbx_ar->archive_write_free(x->out);
    if (x->links)
        rbx_ar->archive_entry_linkresolver_free(x->links);
    free(x->path);
    if (work >= 0)
        close(work);
    rbx_session_release(engine, &session);
    return x->status;
}
