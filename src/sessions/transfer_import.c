/* Import: a new session made from a tar archive (transfer.c exports one).
 *
 * The archive is read twice. The first pass reads its headers alone and
 * checks everything a header tells: names, kinds, the member count and
 * the bytes of data and names against the session's disk cap, so that an
 * archive past a limit is refused at the first member past it, before a
 * file is made (300,000 empty members: refused after reading 100,001
 * headers, not after making 100,000 files and removing them). The second pass makes the
 * session from the same bytes: kept in memory, re-read from a regular
 * file, or spooled to an unnamed file while the first pass reads a pipe.
 *
 * Nothing in the archive is trusted. Members are placed beneath the new
 * session one directory at a time, never through a link (openat2 with
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, O_NOFOLLOW): a link is made as a
 * link, its target is data that no host-side walk follows, so a link to /
 * or .. is as good as any. A hard link must name a regular file placed
 * before it, resolved the same way. Names are bytes; absolute names and
 * "." or ".." components are refused (in a hard link's target too), and
 * so are devices, FIFOs and sockets (export writes none). Set-id bits are
 * dropped. Any refusal removes the new session whole.
 *
 * Members marked as a hibernated kernel's part (transfer.h) go beside the
 * files, in the shape export writes and no other, and the layer above is
 * handed each language's before the session is let go. */
#include "base/archive_lib.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "engine/engine.h"
#include "kernels/wire.h"
#include "runbox.h"
#include "sandbox/uids.h"
#include "languages/runtime.h"
#include "sessions/session.h"
#include "sessions/storage.h"
#include "sessions/transfer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SESSION_WAIT_S 30.0
#define READ_BLOCK 65536

/* Where the archive's bytes come from, in either pass. */
typedef struct source {
    const rbx_archive_source *from;
    off_t start;         /* a regular file: where the archive starts in it */
    int spool;           /* a pipe: the unnamed file its bytes go to, or -1 */
    bool spooled;        /* the second pass reads the spool */
    char buf[READ_BLOCK];
} source;

/* A directory whose mode leaves its owner unable to add to it: given the
 * mode once its members are in. */
typedef struct late_mode {
    char *path;
    mode_t mode;
} late_mode;

/* The most languages a move carries checkpoints of. */
#define CARRIED_MAX 8

typedef struct importer {
    rbx_engine *engine;
    struct archive *in;
    int work;           /* the new session's files; -1 in the checking pass */
    int session;        /* the new session's directory (parts go there); -1 likewise */
    int root;           /* where the member being placed goes: work or session */
    bool own_member;    /* it is the session's user's (files, a kernel's /tmp) */
    char *dir_path;     /* the directory the last member went in, below dir_root, */
    size_t dir_len;
    int dir_root;
    int dir_fd;         /* kept open: a directory's members come together */
    char carried[CARRIED_MAX][32]; /* the languages whose checkpoints were placed, */
    bool carried_tmp[CARRIED_MAX]; /* ... and whether their /tmp has a place */
    size_t carried_count;
    late_mode *late;
    size_t late_count, late_cap;
    uint64_t bytes, names, cap; /* data, names and link targets: within cap together */
    size_t members, files;
    rbx_error *err;
} importer;

/* ---- names ----------------------------------------------------------- */

/* A member's name as a session path: "./" prefixes and a directory's
 * trailing slashes are taken off; what is left must be relative, with no
 * empty, "." or ".." component and none longer than a file name can be.
 * Every other byte is the name's own. "" is the session's directory. */
static rbx_status member_path(const char *raw, const char **path, size_t *len, rbx_error *err)
{
    if (!raw)
        return rbx_fail(err, RBX_EINVAL, "the archive has a member without a usable name");
    const char *p = raw;
    while (p[0] == '.' && p[1] == '/')
        for (p += 2; *p == '/';)
            p++;
    size_t n = strlen(p);
    while (n > 0 && p[n - 1] == '/')
        n--;
    if (n == 1 && p[0] == '.')
        n = 0;
    *path = p;
    *len = n;
    if (n > 0 && p[0] == '/')
        return rbx_fail(err, RBX_EINVAL,
                        "the archive's member '%.200s' has an absolute name: names are relative "
                        "to the session",
                        raw);
    for (size_t at = 0; at < n;) {
        size_t part = strcspn(p + at, "/");
        if (at + part > n)
            part = n - at;
        if (part == 0 || (part == 1 && p[at] == '.') ||
            (part == 2 && p[at] == '.' && p[at + 1] == '.'))
            return rbx_fail(err, RBX_EINVAL,
                            "the archive's member '%.200s' has an empty, '.' or '..' component: "
                            "names stay inside the session",
                            raw);
        if (part > NAME_MAX)
            return rbx_fail(err, RBX_EINVAL,
                            "the archive's member '%.200s' has a name longer than %d bytes", raw,
                            NAME_MAX);
        at += part + 1;
    }
    return RBX_OK;
}

/* ---- placing members ------------------------------------------------- */

static void own(importer *m, int dir, const char *name)
{
    if (m->engine->is_root && m->own_member)
        (void)fchownat(dir, name, RBX_HOST_UID_BASE + RBX_SANDBOX_UID,
                       RBX_HOST_UID_BASE + RBX_SANDBOX_UID, AT_SYMLINK_NOFOLLOW);
}

/* Makes the directories of path (a piece, written on) below at that are
 * missing, one level at a time, each opened without following a link;
 * returns the last, open. They are not the archive's: 0755, like mkdir's. */
static int make_dirs(importer *m, int at, char *path)
{
    int cur = at;
    for (char *part = path;;) {
        char *slash = strchr(part, '/');
        if (slash)
            *slash = 0;
        if (mkdirat(cur, part, 0755) == 0)
            own(m, cur, part);
        int sub = openat(cur, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int saved = errno;
        if (cur != at)
            close(cur);
        errno = saved;
        if (sub < 0 || !slash)
            return sub;
        cur = sub;
        part = slash + 1;
    }
}

/* Opens, below at, the directory path[0..len) names, one piece of at most
 * PATH_MAX bytes at a time (a session may be deeper than one system call
 * can name), through no link. With create, missing directories are made
 * (an archive by tar may name a file before its directory). */
static int open_dir_below(importer *m, int at, const char *path, size_t len, bool create)
{
    char piece[PATH_MAX];
    int cur = at;
    for (size_t done = 0; done < len;) {
        size_t take = len - done;
        if (take >= sizeof piece) { /* cut at the last '/' that fits */
            take = sizeof piece - 1;
            while (take > 0 && path[done + take] != '/')
                take--;
        }
        memcpy(piece, path + done, take);
        piece[take] = 0;
        int next = rbx_open_beneath(cur, piece, O_RDONLY | O_DIRECTORY, 0);
        if (next < 0 && errno == ENOENT && create)
            next = make_dirs(m, cur, piece);
        int saved = errno;
        if (cur != at)
            close(cur);
        errno = saved;
        if (next < 0)
            return -1;
        cur = next;
        done += take + (done + take < len);
    }
    return cur == at ? openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : cur;
}

/* The directory a member goes in (borrowed: the importer keeps it). */
static int parent_of(importer *m, const char *path, size_t len, const char **name)
{
    size_t dir_len = len;
    while (dir_len > 0 && path[dir_len - 1] != '/')
        dir_len--;
    *name = path + dir_len;
    if (dir_len == 0)
        return m->root;
    dir_len--; /* without its '/' */
    bool same_root = m->dir_fd >= 0 && m->dir_root == m->root;
    if (same_root && m->dir_len == dir_len && !memcmp(m->dir_path, path, dir_len))
        return m->dir_fd;
    /* Below the last one (a tree is archived depth first): from there. */
    bool below = same_root && m->dir_len < dir_len && path[m->dir_len] == '/' &&
                 !memcmp(m->dir_path, path, m->dir_len);
    char *copy = malloc(dir_len + 1);
    int fd = !copy ? -1
             : below
                 ? open_dir_below(m, m->dir_fd, path + m->dir_len + 1, dir_len - m->dir_len - 1,
                                  true)
                 : open_dir_below(m, m->root, path, dir_len, true);
    if (fd < 0) {
        free(copy);
        return -1;
    }
    memcpy(copy, path, dir_len);
    copy[dir_len] = 0;
    if (m->dir_fd >= 0)
        close(m->dir_fd);
    free(m->dir_path);
    m->dir_path = copy;
    m->dir_len = dir_len;
    m->dir_root = m->root;
    m->dir_fd = fd;
    return fd;
}

/* Data as the archive gives it, block by block: a sparse member's holes
 * are skipped over and stay holes. */
static rbx_status write_data(importer *m, int fd, const char *path, off_t size)
{
    for (;;) {
        const void *block;
        size_t n;
        la_int64_t offset;
        int rc = rbx_ar->archive_read_data_block(m->in, &block, &n, &offset);
        if (rc == ARCHIVE_EOF)
            break;
        if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
            return rbx_fail(m->err, RBX_EINVAL, "the archive is damaged at '%.200s': %s", path,
                            rbx_ar->archive_error_string(m->in));
        m->bytes += n;
        if (m->bytes > m->cap - m->names)
            return rbx_transfer_too_big(m->err, "the archive", m->cap);
        if (offset < 0 || offset > size || (uint64_t)(size - offset) < n)
            return rbx_fail(m->err, RBX_EINVAL, "the archive is damaged at '%.200s'", path);
        for (const char *p = block; n > 0;) {
            ssize_t w = pwrite(fd, p, n, offset);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return rbx_fail(m->err,
                                errno == EDQUOT || errno == ENOSPC ? RBX_ENOSPC : RBX_ESYSTEM,
                                "cannot write '%.200s': %s", path, strerror(errno));
            p += w;
            n -= (size_t)w;
            offset += w;
        }
    }
    if (ftruncate(fd, size) != 0) /* a hole at the end */
        return rbx_fail(m->err, errno == EDQUOT || errno == ENOSPC ? RBX_ENOSPC : RBX_ESYSTEM,
                        "cannot write '%.200s': %s", path, strerror(errno));
    return RBX_OK;
}

static rbx_status place_file(importer *m, struct archive_entry *entry, int dir, const char *name,
                             const char *path)
{
    mode_t mode = rbx_ar->archive_entry_perm(entry) & 0777;
    int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return rbx_fail(m->err, RBX_EINVAL, "cannot create '%.200s' in the session: %s", path,
                        errno == EEXIST ? "the archive holds it twice" : strerror(errno));
    rbx_status status = write_data(m, fd, path, rbx_ar->archive_entry_size(entry));
    if (m->engine->is_root && m->own_member)
        (void)fchown(fd, RBX_HOST_UID_BASE + RBX_SANDBOX_UID, RBX_HOST_UID_BASE + RBX_SANDBOX_UID);
    (void)fchmod(fd, mode);
    close(fd);
    m->files += m->root == m->work;
    return status;
}

static rbx_status place_dir(importer *m, struct archive_entry *entry, int dir, const char *name,
                            const char *path)
{
    mode_t mode = rbx_ar->archive_entry_perm(entry) & (0777 | S_ISVTX); /* set-id bits dropped */
    struct stat st;
    if (mkdirat(dir, name, 0700) != 0 &&
        (errno != EEXIST || fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
         !S_ISDIR(st.st_mode))) /* made already as a member's parent, or not */
        return rbx_fail(m->err, RBX_EINVAL, "cannot make '%.200s' in the session: %s", path,
                        errno == EEXIST || errno == 0 ? "the archive holds it twice"
                                                      : strerror(errno));
    own(m, dir, name);
    /* Its owner must be able to add its members first: a mode without
     * u+wx waits until they are in. */
    if (m->root != m->work)
        mode |= 0700; /* a part's directory (a kernel's /tmp): runbox's own walk needs it */
    if ((mode & 0300) != 0300) {
        if (m->late_count == m->late_cap) {
            size_t cap = m->late_cap ? m->late_cap * 2 : 16;
            late_mode *grown = realloc(m->late, cap * sizeof *grown);
            if (!grown)
                return rbx_fail(m->err, RBX_ESYSTEM, "out of memory");
            m->late = grown;
            m->late_cap = cap;
        }
        char *copy = strdup(path);
        if (!copy)
            return rbx_fail(m->err, RBX_ESYSTEM, "out of memory");
        m->late[m->late_count++] = (late_mode){.path = copy, .mode = mode};
        mode |= 0700;
    }
    int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        (void)fchmod(fd, mode);
        close(fd);
    }
    return RBX_OK;
}

/* A hard link names a file the archive placed before it: resolved
 * beneath the session like any member, so it cannot reach outside, and it
 * must be a regular file (not a link, which linkat would not follow, nor a
 * directory). */
static rbx_status place_hard_link(importer *m, struct archive_entry *entry, int dir,
                                  const char *name, const char *path)
{
    const char *target;
    size_t len;
    if (member_path(rbx_ar->archive_entry_hardlink(entry), &target, &len, m->err) != RBX_OK ||
        len == 0)
        return rbx_fail(m->err, RBX_EINVAL, "the archive's hard link '%.200s' names no file",
                        path);
    size_t dir_len = len;
    while (dir_len > 0 && target[dir_len - 1] != '/')
        dir_len--;
    char *leaf = strndup(target + dir_len, len - dir_len);
    int from = leaf ? open_dir_below(m, m->work, target, dir_len ? dir_len - 1 : 0, false) : -1;
    struct stat st;
    rbx_status status = RBX_OK;
    if (from < 0 || fstatat(from, leaf, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        status = rbx_fail(m->err, RBX_EINVAL,
                          "the archive's hard link '%.200s' does not name a regular file it "
                          "holds before it",
                          path);
    else if (linkat(from, leaf, dir, name, 0) != 0)
        status = rbx_fail(m->err, RBX_EINVAL, "cannot make '%.200s' in the session: %s", path,
                          errno == EEXIST ? "the archive holds it twice" : strerror(errno));
    else
        m->files++;
    if (from >= 0)
        close(from);
    free(leaf);
    return status;
}

static rbx_status place_link(importer *m, struct archive_entry *entry, int dir, const char *name,
                             const char *path)
{
    if (symlinkat(rbx_ar->archive_entry_symlink(entry), dir, name) != 0)
        return rbx_fail(m->err, RBX_EINVAL, "cannot make '%.200s' in the session: %s", path,
                        errno == EEXIST ? "the archive holds it twice" : strerror(errno));
    own(m, dir, name);
    return RBX_OK;
}

/* The modes that had to wait, deepest first (a directory's own mode may
 * keep its owner out of it). */
static void apply_late_modes(importer *m)
{
    for (size_t i = m->late_count; i-- > 0;) {
        int fd = open_dir_below(m, m->work, m->late[i].path, strlen(m->late[i].path), false);
        if (fd >= 0) {
            (void)fchmod(fd, m->late[i].mode);
            close(fd);
        }
    }
}

/* ---- checking and placing, member by member -------------------------- */

/* What a member's header tells, checked alike in both passes. */
static rbx_status check_member(importer *m, struct archive_entry *entry, const char *raw,
                               const char *path)
{
    if (rbx_ar->archive_entry_hardlink(entry)) { /* another name of a file inside the session */
        const char *target;
        size_t len;
        if (member_path(rbx_ar->archive_entry_hardlink(entry), &target, &len, m->err) != RBX_OK)
            return RBX_EINVAL;
        if (len == 0)
            return rbx_fail(m->err, RBX_EINVAL, "the archive's hard link '%.200s' names no file",
                            raw);
        return RBX_OK;
    }
    mode_t type = rbx_ar->archive_entry_filetype(entry);
    if (type == AE_IFLNK) {
        const char *target = rbx_ar->archive_entry_symlink(entry);
        /* Any target is data, but one a link can hold. */
        if (!target || !target[0] || strlen(target) >= PATH_MAX)
            return rbx_fail(m->err, RBX_EINVAL,
                            "the archive's link '%.200s' has an empty target or one longer "
                            "than %d bytes",
                            raw, PATH_MAX - 1);
        return RBX_OK;
    }
    if (type == AE_IFDIR)
        return RBX_OK;
    if (type != AE_IFREG)
        return rbx_fail(m->err, RBX_EINVAL,
                        "the archive's member '%.200s' is a device, FIFO or socket: only "
                        "directories, regular files and symbolic links are accepted",
                        raw);
    /* Declared sizes first: a 10 GiB member (or a sparse one that claims
     * more than it holds) is refused before a byte of it is read. */
    la_int64_t size =
        rbx_ar->archive_entry_size_is_set(entry) ? rbx_ar->archive_entry_size(entry) : 0;
    if (size < 0)
        return rbx_fail(m->err, RBX_EINVAL, "the archive's member '%.200s' has a negative size",
                        raw);
    if ((uint64_t)size > m->cap)
        return rbx_transfer_file_too_big(m->err, path, (uint64_t)size, m->cap);
    uint64_t data = (uint64_t)size;
    if (rbx_ar->archive_entry_sparse_reset(entry) > 0) {
        la_int64_t offset, length;
        data = 0;
        while (rbx_ar->archive_entry_sparse_next(entry, &offset, &length) == ARCHIVE_OK)
            data += (uint64_t)length;
    }
    if (data > m->cap - m->bytes - m->names)
        return rbx_transfer_too_big(m->err, "the archive", m->cap);
    if (m->work < 0)
        m->bytes += data; /* the checking pass; placing counts what it writes */
    return RBX_OK;
}

/* Whether the member is marked as a part (transfer.h): 1 a checkpoint's,
 * 0 not marked, -1 marked as something else (refused, err set). Other
 * attributes mean nothing here, as before. */
static int member_part(importer *m, struct archive_entry *entry, const char *raw)
{
    const char *name;
    const void *value;
    size_t size;
    int part = 0;
    rbx_ar->archive_entry_xattr_reset(entry);
    while (part >= 0 && rbx_ar->archive_entry_xattr_next(entry, &name, &value, &size) == ARCHIVE_OK) {
        if (strcmp(name, RBX_TRANSFER_PART_XATTR))
            continue;
        if (size == strlen(RBX_TRANSFER_PART_CHECKPOINT) &&
            !memcmp(value, RBX_TRANSFER_PART_CHECKPOINT, size))
            part = 1;
        else
            part = -1;
    }
    if (part < 0)
        rbx_fail(m->err, RBX_EINVAL,
                 "the archive's member '%.200s' is marked as a part runbox does not carry (only "
                 "'" RBX_TRANSFER_PART_CHECKPOINT "')",
                 raw);
    return part;
}

/* Where a checkpoint's member goes, below the session's directory, in
 * placed (NULL: nothing to place, its directory is made with the part),
 * and whether it is the session user's; its language in language. Only
 * the shape export writes is accepted. */
static rbx_status part_path(importer *m, struct archive_entry *entry, const char *raw,
                            const char *path, char **placed, bool *users, char language[32])
{
    static const char shape[] =
        "is not one a checkpoint holds (" RBX_TRANSFER_PART_PREFIX
        "<language>/ and checkpoint.json, signature, images/<file> or tmp/...)";
    *placed = NULL;
    *users = false;
    size_t prefix = strlen(RBX_TRANSFER_PART_PREFIX);
    const char *lang = path + prefix;
    size_t lang_len = strncmp(path, RBX_TRANSFER_PART_PREFIX, prefix) ? 0 : strcspn(lang, "/");
    if (lang_len == 0 || lang_len >= 32)
        return rbx_fail(m->err, RBX_EINVAL, "the archive's checkpoint member '%.200s' %s", raw,
                        shape);
    memcpy(language, lang, lang_len);
    language[lang_len] = 0;
    const rbx_runtime *runtime = rbx_runtime_find(language);
    if (!runtime || strcmp(runtime->name, language)) /* by its own name, not an alias */
        return rbx_fail(m->err, RBX_EINVAL,
                        "the archive carries a checkpoint of '%.40s', a language runbox does "
                        "not know",
                        language);
    mode_t type = rbx_ar->archive_entry_filetype(entry);
    bool hard = rbx_ar->archive_entry_hardlink(entry) != NULL;
    const char *rest = lang[lang_len] ? lang + lang_len + 1 : "";
    const char *under = NULL, *placed_under = NULL;
    if (!strcmp(rest, "") || !strcmp(rest, "images") || !strcmp(rest, "tmp")) {
        if (type == AE_IFDIR && !hard)
            return RBX_OK; /* made with the part */
    } else if (!strcmp(rest, "checkpoint.json") || !strcmp(rest, "signature")) {
        if (type == AE_IFREG && !hard && rbx_ar->archive_entry_size(entry) <= RBX_TRANSFER_PART_SMALL_MAX)
            under = rest, placed_under = "";
    } else if (!strncmp(rest, "images/", 7)) {
        if (type == AE_IFREG && !hard && !strchr(rest + 7, '/'))
            under = rest, placed_under = "";
    } else if (!strncmp(rest, "tmp/", 4)) {
        if (!hard)
            under = rest, placed_under = "scratch/", *users = true;
    }
    if (!under)
        return rbx_fail(m->err, RBX_EINVAL, "the archive's checkpoint member '%.200s' %s", raw,
                        shape);
    size_t size = strlen("hibernated-") + lang_len + 1 + strlen(placed_under) + strlen(under) + 1;
    if (!(*placed = malloc(size)))
        return rbx_fail(m->err, RBX_ESYSTEM, "out of memory");
    snprintf(*placed, size, "hibernated-%s/%s%s", language, placed_under, under);
    return RBX_OK;
}

/* The slot of language's checkpoint, its directory made on its first
 * member: images/ capped and compressed as a hibernating kernel's, and a scratch space
 * for its /tmp where this storage has them. -1: refused (err set). */
static int part_slot(importer *m, const char *language)
{
    for (size_t i = 0; i < m->carried_count; i++)
        if (!strcmp(m->carried[i], language))
            return (int)i;
    if (m->carried_count == CARRIED_MAX) {
        rbx_fail(m->err, RBX_EINVAL, "the archive carries too many checkpoints");
        return -1;
    }
    char name[64];
    snprintf(name, sizeof name, "hibernated-%s", language);
    int dir = -1;
    if (mkdirat(m->session, name, 0700) != 0 ||
        (dir = openat(m->session, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
        rbx_storage_make_capped(m->engine, dir, "images", m->engine->config.disk_cap_bytes) != 0 ||
        rbx_storage_compress(m->engine, dir, "images") != 0 ||
        fchmodat(dir, "images", 0711, 0) != 0) {
        rbx_fail(m->err, RBX_ESYSTEM, "cannot place the %s kernel's checkpoint: %s", language,
                 strerror(errno));
        if (dir >= 0)
            close(dir);
        return -1;
    }
    size_t slot = m->carried_count++;
    snprintf(m->carried[slot], sizeof m->carried[slot], "%s", language);
    /* No scratch spaces here: its /tmp is dropped, and the kernel's wake
     * says that it is missing. */
    m->carried_tmp[slot] = rbx_scratch_stowed_make(m->engine, dir, "scratch") == 0;
    close(dir);
    return (int)slot;
}

static rbx_status import_member(importer *m, struct archive_entry *entry)
{
    /* Bytes as stored when the archive says so (pax's hdrcharset=BINARY,
     * as export writes), else its UTF-8 names as they are. */
    const char *raw = rbx_ar->archive_entry_pathname(entry);
    if (!raw)
        raw = rbx_ar->archive_entry_pathname_utf8(entry);
    const char *start = NULL;
    size_t len = 0;
    rbx_status status = member_path(raw, &start, &len, m->err);
    if (status != RBX_OK)
        return status;
    int part = member_part(m, entry, raw);
    if (part < 0)
        return m->err->status;
    if (len == 0 && !part) { /* the session's directory itself ("./" in tar's own archives) */
        if (rbx_ar->archive_entry_filetype(entry) == AE_IFDIR)
            return RBX_OK;
        return rbx_fail(m->err, RBX_EINVAL, "the archive has a member without a usable name");
    }
    if (++m->members > RBX_TRANSFER_MEMBERS_MAX)
        return rbx_transfer_too_many(m->err, "the archive");
    /* Names count like data (transfer.c says why), and bound the work of
     * placing members one directory at a time. */
    const char *link = rbx_ar->archive_entry_symlink(entry);
    if (!link)
        link = rbx_ar->archive_entry_hardlink(entry);
    uint64_t names = len + (link ? strlen(link) : 0);
    if (names > m->cap - m->bytes - m->names)
        return rbx_transfer_too_big(m->err, "the archive", m->cap);
    m->names += names;
    char *path = strndup(start, len);
    if (!path)
        return rbx_fail(m->err, RBX_ESYSTEM, "out of memory");
    char *placed = NULL, language[32] = "";
    bool users = true;
    status = check_member(m, entry, raw, path);
    if (status == RBX_OK && part)
        status = part_path(m, entry, raw, path, &placed, &users, language);
    if (status == RBX_OK && m->work >= 0 && (!part || placed)) {
        int slot = part ? part_slot(m, language) : 0;
        if (slot < 0)
            status = m->err->status;
        m->root = part ? m->session : m->work;
        m->own_member = users;
        bool drop = part && slot >= 0 && users && !m->carried_tmp[slot];
        const char *where = part ? placed : path;
        const char *name;
        int dir = status != RBX_OK || drop ? -1 : parent_of(m, where, strlen(where), &name);
        mode_t type = rbx_ar->archive_entry_filetype(entry);
        if (status != RBX_OK || drop)
            ; /* refused above, or read past */
        else if (dir < 0)
            status = rbx_fail(m->err, RBX_EINVAL, "cannot place '%.200s' in the session: %s",
                              path,
                              errno == ELOOP || errno == ENOTDIR || errno == EXDEV
                                  ? "a member before it made its directory a file or a link"
                                  : strerror(errno));
        else if (rbx_ar->archive_entry_hardlink(entry))
            status = place_hard_link(m, entry, dir, name, path);
        else if (type == AE_IFREG)
            status = place_file(m, entry, dir, name, path);
        else if (type == AE_IFDIR)
            status = place_dir(m, entry, dir, name, path);
        else
            status = place_link(m, entry, dir, name, path);
    }
    free(placed);
    free(path);
    return status;
}

static rbx_status import_all(importer *m)
{
    struct archive_entry *entry;
    for (;;) {
        int rc = rbx_ar->archive_read_next_header(m->in, &entry);
        if (rc == ARCHIVE_EOF)
            return RBX_OK;
        if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
            return rbx_fail(m->err, RBX_EINVAL, "not a readable tar archive: %s",
                            rbx_ar->archive_error_string(m->in));
        rbx_status status = import_member(m, entry);
        if (status != RBX_OK)
            return status;
    }
}

/* ---- reading the archive twice --------------------------------------- */

static la_ssize_t read_spooling(struct archive *a, void *user, const void **buf)
{
    source *s = user;
    for (;;) {
        ssize_t n = read(s->from->fd, s->buf, sizeof s->buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rbx_ar->archive_set_error(a, errno, "cannot read the archive: %s", strerror(errno));
            return -1;
        }
        if (n > 0 && rbx_write_all(s->spool, s->buf, (size_t)n) != 0) {
            rbx_ar->archive_set_error(a, errno, "cannot keep a copy of the archive: %s",
                                      strerror(errno));
            return -1;
        }
        *buf = s->buf;
        return n;
    }
}

/* Opens one pass's reader over the archive's bytes. */
static rbx_status open_pass(importer *m, source *s, bool first)
{
    const rbx_archive_source *from = s->from;
    if (!(m->in = rbx_ar->archive_read_new()) ||
        rbx_ar->archive_read_support_format_tar(m->in) != ARCHIVE_OK ||
        rbx_ar->archive_read_support_filter_gzip(m->in) != ARCHIVE_OK)
        return rbx_fail(m->err, RBX_ESYSTEM, "cannot read the archive: out of memory");
    int rc;
    if (from->data) {
        rc = rbx_ar->archive_read_open_memory(m->in, from->data, from->len);
    } else if (!first && s->spooled) {
        rc = lseek(s->spool, 0, SEEK_SET) == 0
                 ? rbx_ar->archive_read_open_fd(m->in, s->spool, READ_BLOCK)
                 : ARCHIVE_FATAL;
    } else if (!first) {
        rc = lseek(from->fd, s->start, SEEK_SET) == s->start
                 ? rbx_ar->archive_read_open_fd(m->in, from->fd, READ_BLOCK)
                 : ARCHIVE_FATAL;
    } else if (s->spooled) {
        rc = rbx_ar->archive_read_open(m->in, s, NULL, read_spooling, NULL);
    } else {
        rc = rbx_ar->archive_read_open_fd(m->in, from->fd, READ_BLOCK);
    }
    if (rc != ARCHIVE_OK)
        return rbx_fail(m->err, RBX_EINVAL, "not a readable tar archive: %s",
                        rbx_ar->archive_error_string(m->in) ? rbx_ar->archive_error_string(m->in)
                                                    : strerror(errno));
    return RBX_OK;
}

static void close_pass(importer *m)
{
    if (m->in)
        rbx_ar->archive_read_free(m->in);
    m->in = NULL;
}

/* A regular file is read again from where the archive starts in it; a
 * pipe's bytes go to an unnamed file in the state directory (or memory)
 * as the first pass reads them. */
static rbx_status prepare_source(rbx_engine *engine, source *s, rbx_error *err)
{
    s->spool = -1;
    if (s->from->data)
        return RBX_OK;
    struct stat st;
    if (fstat(s->from->fd, &st) == 0 && S_ISREG(st.st_mode) &&
        (s->start = lseek(s->from->fd, 0, SEEK_CUR)) >= 0)
        return RBX_OK;
    s->spool = open(engine->state_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (s->spool < 0)
        s->spool = memfd_create("runbox-import", MFD_CLOEXEC);
    if (s->spool < 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot keep a copy of the archive: %s",
                        strerror(errno));
    s->spooled = true;
    return RBX_OK;
}

/* The first pass: headers only, nothing made. */
static rbx_status check_archive(rbx_engine *engine, source *s, rbx_error *err)
{
    importer m = {.engine = engine, .work = -1, .session = -1, .dir_fd = -1,
                  .cap = rbx_transfer_cap(engine), .err = err};
    rbx_status status = open_pass(&m, s, true);
    if (status == RBX_OK)
        status = import_all(&m);
    close_pass(&m);
    return status;
}

static bool is_empty(int dir)
{
    int fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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

/* The second pass: the session made, member by member. */
static rbx_status place_archive(rbx_engine *engine, const char *id, source *s,
                                rbx_session_import_info *info, rbx_transfer_carried_fn carried,
                                void *user, rbx_error *err)
{
    rbx_session session;
    rbx_status status = rbx_session_acquire(engine, id, SESSION_WAIT_S, -1, &session, err);
    if (status != RBX_OK)
        return status;
    importer m = {.engine = engine, .dir_fd = -1, .cap = rbx_transfer_cap(engine), .err = err};
    m.session = session.dir_fd;
    m.work = open(session.work_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    bool ours = m.work >= 0 && is_empty(m.work);
    if (m.work < 0)
        status = rbx_fail(err, RBX_ESYSTEM, "cannot open session %s's files: %s", id,
                          strerror(errno));
    else if (!ours) /* another import (or an execution) made it meanwhile */
        status = rbx_fail(err, RBX_EBUSY,
                          "session %s already exists here: remove it first, or import under "
                          "another id",
                          id);
    else if ((status = open_pass(&m, s, false)) == RBX_OK &&
             (status = import_all(&m)) == RBX_OK)
        apply_late_modes(&m);
    close_pass(&m);
    for (size_t i = 0; status == RBX_OK && carried && i < m.carried_count; i++)
        status = carried(user, session.dir_fd, id, m.carried[i], err);
    for (size_t i = 0; i < m.late_count; i++)
        free(m.late[i].path);
    free(m.late);
    free(m.dir_path);
    if (m.dir_fd >= 0)
        close(m.dir_fd);
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

rbx_status rbx_transfer_import(rbx_engine *engine, const char *id, const rbx_archive_source *from,
                               rbx_session_import_info *info, rbx_transfer_carried_fn carried,
                               void *user, rbx_error *err)
{
    memset(info, 0, sizeof *info);
    rbx_status loaded = rbx_archive_load(err);
    if (loaded != RBX_OK)
        return loaded;
    if (!rbx_session_id_valid(id))
        return rbx_fail(err, RBX_EINVAL,
                        "invalid session id: it must match " RBX_SESSION_ID_PATTERN);
    if (rbx_session_exists(engine, id))
        return rbx_fail(err, RBX_EBUSY,
                        "session %s already exists here: remove it first, or import under "
                        "another id",
                        id);
    source *s = calloc(1, sizeof *s);
    if (!s)
        return rbx_fail(err, RBX_ESYSTEM, "cannot read the archive: out of memory");
    s->from = from;
    rbx_status status = prepare_source(engine, s, err);
    if (status == RBX_OK)
        status = check_archive(engine, s, err);
    if (status == RBX_OK)
        status = place_archive(engine, id, s, info, carried, user, err);
    if (s->spool >= 0)
        close(s->spool);
    free(s);
    return status;
}
