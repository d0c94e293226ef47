/* Unpacking images made elsewhere (image_unpack.h): a tar of a root
 * filesystem, an OCI image layout's layers, or a docker save archive's.
 *
 * This runs as root on the host, on archives anyone may have made, so
 * every member is untrusted:
 * - Its path is taken below the image's root ("/usr/x" is "usr/x", as tar
 *   does); a ".." component is refused. The directory that will hold it is
 *   opened beneath the root by the kernel with no link followed (openat2);
 *   when that fails, the path is walked one component at a time with
 *   O_NOFOLLOW, making missing directories, so a member that goes through a
 *   link an earlier member made is refused and the link named.
 * - Only directories, regular files, symbolic links whose target stays in
 *   the image when resolved by its text, and hard links to regular files
 *   already unpacked are accepted; set-id bits are refused (or dropped).
 * - Every limit is checked before a byte of the member is written: the
 *   member count, the declared size against what is left, sparse maps.
 * - What is replaced or whited out is removed with rbx_remove_tree, which
 *   never follows a link either.
 * A refusal leaves what was written so far inside the root, which the
 * caller removes whole; nothing is ever written outside it. */
#include "images/unpack.h"
#include "base/archive_lib.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/nettle_lib.h"
#include "kernels/wire.h"
#include "runbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MEMBER_PATH_MAX 4096
#define MEMBER_DEPTH_MAX 128 /* deeper than any image; bounds the pruning walk's fds */
#define JSON_MAX (4 << 20)   /* index.json, manifests, configs */
#define LAYERS_MAX 256
#define INDEX_DEPTH_MAX 4 /* indexes of indexes */
#define CANDIDATES_MAX 256
#define ARCHIVE_LINKS_MAX 1024 /* links among a docker save archive's own files */
#define COPY_BUFFER 65536

#if NETTLE_VERSION_MAJOR >= 4
#define SHA256_FINISH(ctx, out) rbx_nettle->sha256_digest(ctx, out)
#else
#define SHA256_FINISH(ctx, out) rbx_nettle->sha256_digest(ctx, SHA256_DIGEST_SIZE, out)
#endif

/* The platform a layout's manifest is chosen for: the one runbox runs on. */
#if defined(__x86_64__)
#define HOST_ARCH "amd64"
#elif defined(__aarch64__)
#define HOST_ARCH "arm64"
#elif defined(__riscv) && __riscv_xlen == 64
#define HOST_ARCH "riscv64"
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_ARCH "ppc64le"
#elif defined(__s390x__)
#define HOST_ARCH "s390x"
#else
#define HOST_ARCH "unknown"
#endif

/* ---- a set of paths ---------------------------------------------------- */

/* The paths a layer has made, and the directories above them: a whiteout
 * removes only what lower layers put there. Open addressing, FNV-1a. */
typedef struct pathset {
    char **slots;
    size_t size, used; /* size: 0 or a power of two */
} pathset;

static uint64_t path_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static char **pathset_slot(char **slots, size_t size, const char *s, size_t n)
{
    for (size_t i = path_hash(s, n) & (size - 1);; i = (i + 1) & (size - 1))
        if (!slots[i] || (strlen(slots[i]) == n && !memcmp(slots[i], s, n)))
            return &slots[i];
}

static bool pathset_has(const pathset *set, const char *s, size_t n)
{
    return set->size && *pathset_slot(set->slots, set->size, s, n);
}

static int pathset_add(pathset *set, const char *s, size_t n)
{
    if ((set->used + 1) * 2 > set->size) {
        size_t size = set->size ? set->size * 2 : 1024;
        char **slots = calloc(size, sizeof *slots);
        if (!slots)
            return -1;
        for (size_t i = 0; i < set->size; i++)
            if (set->slots[i])
                *pathset_slot(slots, size, set->slots[i], strlen(set->slots[i])) = set->slots[i];
        free(set->slots);
        set->slots = slots;
        set->size = size;
    }
    char **slot = pathset_slot(set->slots, set->size, s, n);
    if (*slot)
        return 0;
    if (!(*slot = strndup(s, n)))
        return -1;
    set->used++;
    return 0;
}

static void pathset_clear(pathset *set)
{
    for (size_t i = 0; i < set->size; i++)
        free(set->slots[i]);
    free(set->slots);
    *set = (pathset){0};
}

/* ---- the unpacker -------------------------------------------------------- */

typedef struct fixup {
    char *path;
    mode_t mode;
} fixup;

typedef struct unpacker {
    int root;
    const rbx_unpack_limits *limits;
    uint64_t bytes;   /* regular files' and blobs' bytes so far */
    uint64_t entries; /* members so far */
    bool is_root;
    bool layer;      /* applying an image layer: whiteouts mean something */
    char where[48];  /* "image archive", "image layer 2 of 5" */
    char shown[224]; /* the current member's name, printable, for messages */
    pathset touched; /* this layer's paths and their directories */
    /* Not as root: directories made writable while they are filled, and
     * given their own mode at the end. */
    fixup *fixups;
    size_t fixup_count, fixup_cap;
    rbx_error *err;
} unpacker;

static void show(unpacker *u, const char *raw)
{
    size_t i = 0;
    for (; raw && raw[i] && i < sizeof u->shown - 4; i++)
        u->shown[i] = (unsigned char)raw[i] < 0x20 || raw[i] == 0x7f ? '?' : raw[i];
    u->shown[i] = 0;
    if (raw && raw[i])
        strcat(u->shown, "...");
}

static rbx_status host_failed(unpacker *u, const char *what)
{
    int error = errno;
    return rbx_fail(u->err, error == ENOSPC || error == EDQUOT ? RBX_ENOSPC : RBX_ESYSTEM,
                    "cannot %s \"%s\" of the %s: %s", what, u->shown, u->where, strerror(error));
}

static rbx_status refuse(unpacker *u, const char *why)
{
    return rbx_fail(u->err, RBX_EINVAL, "%s member \"%s\" %s", u->where, u->shown, why);
}

/* Marks path and the directories above it as this layer's. */
static rbx_status touch(unpacker *u, const char *path)
{
    if (!u->layer)
        return RBX_OK;
    for (const char *p = path;; p++) {
        if ((*p == '/' || !*p) && pathset_add(&u->touched, path, (size_t)(p - path)) != 0)
            return rbx_fail(u->err, RBX_ESYSTEM, "out of memory");
        if (!*p)
            return RBX_OK;
    }
}

static bool touched(const unpacker *u, const char *path)
{
    return pathset_has(&u->touched, path, strlen(path));
}

/* ---- paths --------------------------------------------------------------- */

typedef enum path_verdict { PATH_OK, PATH_CLIMBS, PATH_TOO_LONG } path_verdict;

/* An archive's name as a path below the root: leading "/" and "./" go, as
 * do empty and "." components and a trailing "/"; ".." is not accepted.
 * Writes "a/b/c" ("" for the root itself) to out (MEMBER_PATH_MAX bytes). */
static path_verdict normalize(const char *raw, char *out)
{
    size_t o = 0;
    int depth = 0;
    for (const char *p = raw; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return PATH_CLIMBS;
        if (n > 0 && !(n == 1 && p[0] == '.')) {
            if (o + n + 2 > MEMBER_PATH_MAX || ++depth > MEMBER_DEPTH_MAX)
                return PATH_TOO_LONG;
            if (o)
                out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p += n + (p[n] == '/');
    }
    out[o] = 0;
    return PATH_OK;
}

/* normalize(), refusing the member when its path (what) is not accepted. */
static rbx_status member_path(unpacker *u, const char *raw, const char *what, char *out)
{
    if (!raw)
        return rbx_fail(u->err, RBX_EINVAL, "the %s has a member without a usable name", u->where);
    char why[200];
    switch (normalize(raw, out)) {
    case PATH_OK:
        return RBX_OK;
    case PATH_CLIMBS:
        snprintf(why, sizeof why,
                 "has %s with a \"..\" component: paths in an image stay inside it", what);
        return refuse(u, why);
    default:
        snprintf(why, sizeof why, "has %s longer than %d bytes or deeper than %d levels", what,
                 MEMBER_PATH_MAX - 1, MEMBER_DEPTH_MAX);
        return refuse(u, why);
    }
}

static const char *last_component(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

#define PARENT_MISSING (-2)

/* The directory holding path's last component, opened beneath the root
 * without following a link, and that component in *name. With create,
 * missing directories are made (0755, the archive may give their mode
 * later). Returns an fd, -1 with the error filled, or PARENT_MISSING
 * (without create) where there is no such directory. */
static int open_parent(unpacker *u, const char *path, bool create, const char **name)
{
    *name = last_component(path);
    if (*name == path)
        return fcntl(u->root, F_DUPFD_CLOEXEC, 0);
    char dir[MEMBER_PATH_MAX];
    size_t len = (size_t)(*name - 1 - path);
    memcpy(dir, path, len);
    dir[len] = 0;
    int fd = rbx_open_beneath(u->root, dir, O_RDONLY | O_DIRECTORY, 0);
    if (fd >= 0)
        return fd;
    /* Something is missing, or in the way: walk it to make or name it. */
    int cur = fcntl(u->root, F_DUPFD_CLOEXEC, 0);
    for (char *p = dir; cur >= 0;) {
        char *end = strchr(p, '/');
        if (end)
            *end = 0;
        int next = openat(cur, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 && errno == ENOENT && create) {
            if (mkdirat(cur, p, 0755) != 0 && errno != EEXIST) {
                host_failed(u, "make a directory for");
                close(cur);
                return -1;
            }
            next = openat(cur, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (next < 0) {
            int error = errno;
            struct stat st;
            char target[256] = "";
            bool there = fstatat(cur, p, &st, AT_SYMLINK_NOFOLLOW) == 0;
            if (there && S_ISLNK(st.st_mode)) {
                ssize_t n = readlinkat(cur, p, target, sizeof target - 1);
                target[n > 0 ? n : 0] = 0;
            }
            close(cur);
            char why[700];
            if (there && S_ISLNK(st.st_mode)) {
                snprintf(why, sizeof why,
                         "goes through the link \"%.200s\" (-> %.200s) an earlier member made: "
                         "members are written only below directories, never through links",
                         dir, target);
                refuse(u, why);
                return -1;
            }
            if (!create && (error == ENOENT || (there && !S_ISDIR(st.st_mode))))
                return PARENT_MISSING;
            if (there && !S_ISDIR(st.st_mode)) {
                snprintf(why, sizeof why, "is below \"%.200s\", which is not a directory", dir);
                refuse(u, why);
                return -1;
            }
            errno = error;
            host_failed(u, "open the directory of");
            return -1;
        }
        close(cur);
        cur = next;
        if (!end)
            break;
        *end = '/';
        p = end + 1;
    }
    if (cur < 0)
        host_failed(u, "open the image's root for");
    return cur;
}

/* ---- members --------------------------------------------------------------- */

/* Owner (as root), mode and modification time of what was just made: fd
 * is it when it can be opened (not a link), else it is name in dir. */
static rbx_status set_attributes(unpacker *u, struct archive_entry *entry, int fd, int dir,
                                 const char *name, mode_t mode)
{
    if (u->is_root) {
        uid_t uid = (uid_t)rbx_ar->archive_entry_uid(entry);
        gid_t gid = (gid_t)rbx_ar->archive_entry_gid(entry);
        int rc =
            fd >= 0 ? fchown(fd, uid, gid) : fchownat(dir, name, uid, gid, AT_SYMLINK_NOFOLLOW);
        if (rc != 0)
            return host_failed(u, "give its owner to");
    }
    if (fd >= 0 && fchmod(fd, mode) != 0) /* after fchown, which clears set-id bits */
        return host_failed(u, "set the mode of");
    if (rbx_ar->archive_entry_mtime_is_set(entry)) {
        struct timespec times[2] = {{.tv_nsec = UTIME_OMIT},
                                    {rbx_ar->archive_entry_mtime(entry),
                                      rbx_ar->archive_entry_mtime_nsec(entry)}};
        /* Cheap and not worth a refusal: a date out of range stays as it is. */
        (void)(fd >= 0 ? futimens(fd, times) : utimensat(dir, name, times, AT_SYMLINK_NOFOLLOW));
    }
    return RBX_OK;
}

/* The mode a member keeps: set-id bits refused, or dropped with
 * drop_setid; no sticky bit on files. A directory keeps set-gid (it only
 * passes the directory's group on to new files; Debian's /var/mail has
 * it) and its sticky bit (/tmp). */
static rbx_status member_mode(unpacker *u, struct archive_entry *entry, bool directory,
                              mode_t *mode)
{
    mode_t perm = rbx_ar->archive_entry_perm(entry) & 07777;
    if (directory) {
        *mode = perm & ~(mode_t)S_ISUID; /* means nothing on a directory */
        return RBX_OK;
    }
    if ((perm & (S_ISUID | S_ISGID)) && !u->limits->drop_setid) {
        char why[300];
        snprintf(why, sizeof why,
                 "is set-%s (mode %04o): images may not hold set-id programs; --drop-setid "
                 "imports it with the bit cleared",
                 perm & S_ISUID ? "uid" : "gid", (unsigned)perm);
        return refuse(u, why);
    }
    *mode = perm & ~(mode_t)(S_ISUID | S_ISGID | S_ISVTX);
    return RBX_OK;
}

/* Whatever the root's directory dir has at name goes (a link as a link). */
static rbx_status clear_place(unpacker *u, int dir, const char *name)
{
    return rbx_remove_tree(dir, name) == 0 ? RBX_OK : host_failed(u, "replace what was at");
}

/* The member's data into fd, counted against max_bytes as it comes. */
static rbx_status copy_data(unpacker *u, struct archive *in, int fd)
{
    char buf[COPY_BUFFER];
    for (;;) {
        la_ssize_t n = rbx_ar->archive_read_data(in, buf, sizeof buf);
        if (n == 0)
            return RBX_OK;
        if (n < 0)
            return rbx_fail(u->err, RBX_EINVAL, "the %s is damaged at member \"%s\": %s", u->where,
                            u->shown, rbx_ar->archive_error_string(in));
        if ((uint64_t)n > u->limits->max_bytes - u->bytes)
            return rbx_fail(u->err, RBX_ENOSPC,
                            "the %s holds more than the image's limit of %llu bytes (at member "
                            "\"%s\")",
                            u->where, (unsigned long long)u->limits->max_bytes, u->shown);
        u->bytes += (uint64_t)n;
        if (rbx_write_all(fd, buf, (size_t)n) != 0)
            return host_failed(u, "write");
    }
}

static rbx_status put_file(unpacker *u, struct archive *in, struct archive_entry *entry,
                           const char *path)
{
    mode_t mode;
    rbx_status status = member_mode(u, entry, false, &mode);
    if (status != RBX_OK)
        return status;
    const char *name;
    int dir = open_parent(u, path, true, &name);
    if (dir < 0)
        return u->err->status;
    int fd = -1;
    if ((status = clear_place(u, dir, name)) == RBX_OK &&
        (fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
        status = host_failed(u, "create");
    if (status == RBX_OK)
        status = copy_data(u, in, fd);
    if (status == RBX_OK)
        status = set_attributes(u, entry, fd, dir, name, mode);
    if (fd >= 0 && close(fd) != 0 && status == RBX_OK)
        status = host_failed(u, "write");
    close(dir);
    return status == RBX_OK ? touch(u, path) : status;
}

static rbx_status add_fixup(unpacker *u, const char *path, mode_t mode)
{
    if (u->fixup_count == u->fixup_cap) {
        size_t cap = u->fixup_cap ? u->fixup_cap * 2 : 16;
        fixup *grown = realloc(u->fixups, cap * sizeof *grown);
        if (!grown)
            return rbx_fail(u->err, RBX_ESYSTEM, "out of memory");
        u->fixups = grown;
        u->fixup_cap = cap;
    }
    if (!(u->fixups[u->fixup_count].path = strdup(path)))
        return rbx_fail(u->err, RBX_ESYSTEM, "out of memory");
    u->fixups[u->fixup_count++].mode = mode;
    return RBX_OK;
}

static rbx_status put_dir(unpacker *u, struct archive_entry *entry, const char *path)
{
    mode_t mode;
    rbx_status status = member_mode(u, entry, true, &mode);
    if (status != RBX_OK)
        return status;
    /* Not as root, a directory must stay writable while it is filled. */
    mode_t now = u->is_root ? mode : mode | S_IRWXU;
    if (now != mode && (status = add_fixup(u, path, mode)) != RBX_OK)
        return status;
    if (!path[0]) /* the root itself ("./") */
        return set_attributes(u, entry, u->root, -1, NULL, now);
    const char *name;
    int dir = open_parent(u, path, true, &name);
    if (dir < 0)
        return u->err->status;
    struct stat st;
    bool kept = fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    if (!kept && (status = clear_place(u, dir, name)) == RBX_OK && mkdirat(dir, name, 0700) != 0)
        status = host_failed(u, "make");
    int fd = -1;
    if (status == RBX_OK &&
        (fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        status = host_failed(u, "open");
    if (status == RBX_OK)
        status = set_attributes(u, entry, fd, dir, name, now);
    if (fd >= 0)
        close(fd);
    close(dir);
    return status == RBX_OK ? touch(u, path) : status;
}

static rbx_status put_symlink(unpacker *u, struct archive_entry *entry, const char *path)
{
    const char *target = rbx_ar->archive_entry_symlink(entry);
    if (!target)
        target = rbx_ar->archive_entry_symlink_utf8(entry);
    if (!target || !target[0] || strlen(target) >= MEMBER_PATH_MAX)
        return refuse(u, "is a link without a usable target");
    if (!rbx_link_stays_inside(path, target)) {
        char why[400];
        snprintf(why, sizeof why,
                 "is a link to \"%.200s\", which climbs out of the image: links may point "
                 "anywhere inside it (an absolute target is taken from the image's root)",
                 target);
        return refuse(u, why);
    }
    const char *name;
    int dir = open_parent(u, path, true, &name);
    if (dir < 0)
        return u->err->status;
    rbx_status status = clear_place(u, dir, name);
    if (status == RBX_OK && symlinkat(target, dir, name) != 0)
        status = host_failed(u, "make the link");
    if (status == RBX_OK)
        status = set_attributes(u, entry, -1, dir, name, 0);
    close(dir);
    return status == RBX_OK ? touch(u, path) : status;
}

static rbx_status put_hardlink(unpacker *u, struct archive_entry *entry, const char *path)
{
    const char *raw = rbx_ar->archive_entry_hardlink(entry);
    if (!raw)
        raw = rbx_ar->archive_entry_hardlink_utf8(entry);
    char target[MEMBER_PATH_MAX];
    rbx_status status = member_path(u, raw, "a hard link target", target);
    if (status != RBX_OK)
        return status;
    char why[400];
    snprintf(why, sizeof why,
             "is a hard link to \"%.200s\", which is not a regular file unpacked before it: hard "
             "links may only name those",
             target);
    if (!target[0] || !strcmp(target, path))
        return refuse(u, why);
    const char *target_name, *name;
    int target_dir = open_parent(u, target, false, &target_name);
    if (target_dir == PARENT_MISSING)
        return refuse(u, why);
    if (target_dir < 0)
        return u->err->status;
    struct stat st;
    if (fstatat(target_dir, target_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
        close(target_dir);
        return refuse(u, why);
    }
    int dir = open_parent(u, path, true, &name);
    if (dir < 0) {
        close(target_dir);
        return u->err->status;
    }
    status = clear_place(u, dir, name);
    /* No AT_SYMLINK_FOLLOW: the target is the file itself, never a link's. */
    if (status == RBX_OK && linkat(target_dir, target_name, dir, name, 0) != 0)
        status = host_failed(u, "make the hard link");
    close(dir);
    close(target_dir);
    return status == RBX_OK ? touch(u, path) : status;
}

/* ---- whiteouts --------------------------------------------------------------- */

/* Removes from the directory dir (the image's path) what lower layers put
 * there: entries this layer did not make, and below those it made or
 * passed through, theirs. Never follows a link. */
static rbx_status prune(unpacker *u, int dir, const char *path)
{
    int fd = fcntl(dir, F_DUPFD_CLOEXEC, 0);
    DIR *listing = fd >= 0 ? fdopendir(fd) : NULL;
    if (!listing) {
        if (fd >= 0)
            close(fd);
        return host_failed(u, "read the directory emptied by");
    }
    /* Names first, then changes: the listing is not read while it changes. */
    char **names = NULL;
    size_t count = 0, cap = 0;
    rbx_status status = RBX_OK;
    struct dirent *d;
    while (status == RBX_OK && (d = readdir(listing))) {
        if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
            continue;
        if (count == cap) {
            cap = cap ? cap * 2 : 64;
            char **grown = realloc(names, cap * sizeof *names);
            if (!grown) {
                status = rbx_fail(u->err, RBX_ESYSTEM, "out of memory");
                break;
            }
            names = grown;
        }
        if (!(names[count] = strdup(d->d_name)))
            status = rbx_fail(u->err, RBX_ESYSTEM, "out of memory");
        else
            count++;
    }
    closedir(listing);
    for (size_t i = 0; i < count && status == RBX_OK; i++) {
        char child[MEMBER_PATH_MAX];
        int n = snprintf(child, sizeof child, "%s%s%s", path, path[0] ? "/" : "", names[i]);
        if (n >= (int)sizeof child || !touched(u, child)) {
            status = clear_place(u, dir, names[i]);
            continue;
        }
        int sub = openat(dir, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0) { /* this layer's directory: lower layers' entries in it go */
            status = prune(u, sub, child);
            close(sub);
        }
    }
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
    return status;
}

/* `.wh.NAME` at path: NAME of the layers below goes. */
static rbx_status whiteout(unpacker *u, const char *path, const char *hidden)
{
    const char *name;
    int dir = open_parent(u, path, false, &name);
    if (dir == PARENT_MISSING)
        return RBX_OK; /* nothing below to hide */
    if (dir < 0)
        return u->err->status;
    char target[MEMBER_PATH_MAX];
    snprintf(target, sizeof target, "%.*s%s", (int)(name - path), path, hidden);
    rbx_status status = RBX_OK;
    if (!touched(u, target)) {
        status = clear_place(u, dir, hidden);
    } else {
        /* This layer made it already: only lower layers' entries below go. */
        int sub = openat(dir, hidden, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0) {
            status = prune(u, sub, target);
            close(sub);
        }
    }
    close(dir);
    return status;
}

/* `.wh..wh..opq` at path: its directory keeps only this layer's entries. */
static rbx_status opaque(unpacker *u, const char *path)
{
    const char *name;
    int dir = open_parent(u, path, false, &name);
    if (dir == PARENT_MISSING)
        return RBX_OK;
    if (dir < 0)
        return u->err->status;
    char parent[MEMBER_PATH_MAX];
    snprintf(parent, sizeof parent, "%.*s", name > path ? (int)(name - path - 1) : 0, path);
    rbx_status status = prune(u, dir, parent);
    close(dir);
    return status;
}

#define WHITEOUT ".wh."
#define WHITEOUT_META ".wh..wh." /* aufs' own files, which some layers carry */
#define WHITEOUT_OPAQUE ".wh..wh..opq"

/* A member named like a whiteout: applied in a layer, refused elsewhere.
 * Sets *skip when the member is nothing to unpack. */
static rbx_status whiteout_member(unpacker *u, const char *path, bool *skip)
{
    *skip = false;
    const char *last = last_component(path);
    bool inside = false; /* a whiteout's name as a directory above the member */
    for (const char *p = path; p < last; p += strcspn(p, "/") + 1)
        inside = inside || !strncmp(p, WHITEOUT, strlen(WHITEOUT));
    if (!inside && strncmp(last, WHITEOUT, strlen(WHITEOUT)))
        return RBX_OK;
    if (!u->layer)
        return refuse(u, "is a whiteout (named .wh.*): whiteouts belong in image layers, not in "
                         "a root filesystem archive");
    *skip = true;
    if (inside) {
        for (const char *p = path; p < last; p += strcspn(p, "/") + 1)
            if (!strncmp(p, WHITEOUT, strlen(WHITEOUT)) &&
                strncmp(p, WHITEOUT_META, strlen(WHITEOUT_META)))
                return refuse(u, "is below a whiteout: a whiteout hides an entry and holds none");
        return RBX_OK; /* below aufs' metadata: not part of the image */
    }
    if (!strcmp(last, WHITEOUT_OPAQUE))
        return opaque(u, path);
    if (!strncmp(last, WHITEOUT_META, strlen(WHITEOUT_META)))
        return RBX_OK;
    const char *hidden = last + strlen(WHITEOUT);
    if (!hidden[0] || !strcmp(hidden, ".") || !strcmp(hidden, ".."))
        return refuse(u, "is a whiteout of no entry: a whiteout .wh.NAME names an entry of its "
                         "own directory");
    return whiteout(u, path, hidden);
}

/* ---- archives ------------------------------------------------------------------ */

static const char *kind_name(mode_t type)
{
    switch (type) {
    case AE_IFCHR:
        return "a character device";
    case AE_IFBLK:
        return "a block device";
    case AE_IFIFO:
        return "a FIFO";
    case AE_IFSOCK:
        return "a socket";
    default:
        return "of an unknown kind";
    }
}

static rbx_status unpack_member(unpacker *u, struct archive *in, struct archive_entry *entry)
{
    const char *raw = rbx_ar->archive_entry_pathname(entry);
    if (!raw)
        raw = rbx_ar->archive_entry_pathname_utf8(entry);
    show(u, raw);
    if (u->entries >= u->limits->max_entries)
        return rbx_fail(u->err, RBX_ENOSPC,
                        "the %s has more members than the image's limit of %llu (every layer "
                        "counted), at member \"%s\"",
                        u->where, (unsigned long long)u->limits->max_entries, u->shown);
    u->entries++;
    char path[MEMBER_PATH_MAX];
    rbx_status status = member_path(u, raw, "a path", path);
    if (status != RBX_OK)
        return status;
    if (rbx_ar->archive_entry_sparse_count(entry) > 0)
        return refuse(u, "is a sparse file: images may hold plain regular files only");
    /* Before a byte of it is written, whatever its kind (libarchive would
     * read through a declared size it skips). */
    int64_t size = rbx_ar->archive_entry_size_is_set(entry) ? rbx_ar->archive_entry_size(entry) : 0;
    if (size < 0 || (uint64_t)size > u->limits->max_bytes - u->bytes)
        return rbx_fail(u->err, RBX_ENOSPC,
                        "%s member \"%s\" declares %lld bytes, more than the %llu left of the "
                        "image's limit of %llu bytes",
                        u->where, u->shown, (long long)size,
                        (unsigned long long)(u->limits->max_bytes - u->bytes),
                        (unsigned long long)u->limits->max_bytes);
    bool skip;
    if ((status = whiteout_member(u, path, &skip)) != RBX_OK || skip)
        return status;
    if (rbx_ar->archive_entry_hardlink(entry) || rbx_ar->archive_entry_hardlink_utf8(entry))
        return put_hardlink(u, entry, path);
    mode_t type = rbx_ar->archive_entry_filetype(entry);
    if (!path[0] && type != AE_IFDIR)
        return refuse(u, "names the image's root, which must be a directory");
    switch (type) {
    case AE_IFREG:
        return put_file(u, in, entry, path);
    case AE_IFDIR:
        return put_dir(u, entry, path);
    case AE_IFLNK:
        return put_symlink(u, entry, path);
    default: {
        char why[200];
        snprintf(why, sizeof why,
                 "is %s: images may hold directories, regular files and links only",
                 kind_name(type));
        return refuse(u, why);
    }
    }
}

static rbx_status unreadable(unpacker *u, struct archive *in)
{
    return rbx_fail(u->err, RBX_EINVAL,
                    "the %s is not a readable tar archive: %s (accepted: tar, uncompressed or "
                    "compressed with gzip, zstd, xz, bzip2, lz4)",
                    u->where, in ? rbx_ar->archive_error_string(in) : "out of memory");
}

/* A reader of the tar archive fd holds, compressed or not; NULL with the
 * error filled. The filters that would run an outside program (lrzip,
 * lzop, grzip) are left out. */
static struct archive *open_tar(unpacker *u, int fd)
{
    struct archive *in = rbx_ar->archive_read_new();
    if (!in) {
        unreadable(u, NULL);
        return NULL;
    }
    rbx_ar->archive_read_support_format_tar(in);
    rbx_ar->archive_read_support_format_empty(in);
    rbx_ar->archive_read_support_filter_gzip(in);
    rbx_ar->archive_read_support_filter_zstd(in);
    rbx_ar->archive_read_support_filter_xz(in);
    rbx_ar->archive_read_support_filter_lzma(in);
    rbx_ar->archive_read_support_filter_lzip(in);
    rbx_ar->archive_read_support_filter_bzip2(in);
    rbx_ar->archive_read_support_filter_lz4(in);
    rbx_ar->archive_read_support_filter_compress(in);
    if (rbx_ar->archive_read_open_fd(in, fd, COPY_BUFFER) != ARCHIVE_OK) {
        unreadable(u, in);
        rbx_ar->archive_read_free(in);
        return NULL;
    }
    return in;
}

static rbx_status unpack_archive(unpacker *u, int fd)
{
    struct archive *in = open_tar(u, fd);
    if (!in)
        return u->err->status;
    rbx_status status = RBX_OK;
    while (status == RBX_OK) {
        struct archive_entry *entry;
        int rc = rbx_ar->archive_read_next_header(in, &entry);
        if (rc == ARCHIVE_EOF)
            break;
        if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
            status = unreadable(u, in);
        else
            status = unpack_member(u, in, entry);
    }
    rbx_ar->archive_read_free(in);
    return status;
}

/* ---- blobs ---------------------------------------------------------------- */

/* A digest names a blob only as "sha256:" and 64 lowercase hex digits, so
 * that it never names a path outside blobs/sha256/. */
static bool digest_ok(const char *digest)
{
    if (!digest || strncmp(digest, "sha256:", 7) != 0 || strlen(digest) != 71)
        return false;
    for (const char *p = digest + 7; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

static bool hex64(const char *s)
{
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* A file of the layout, opened beneath it without following a link. */
static int open_blob(unpacker *u, int layout, const char *path, const char *what, struct stat *st)
{
    int fd = rbx_open_beneath(layout, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0);
    if (fd < 0) {
        int error = errno;
        rbx_fail(u->err, error == ENOENT ? RBX_EINVAL : RBX_ESYSTEM,
                 "the image layout has no usable %s (%s): %s", what, path,
                 error == ELOOP ? "it is a symbolic link" : strerror(error));
        return -1;
    }
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        close(fd);
        rbx_fail(u->err, RBX_EINVAL, "the image layout's %s (%s) is not a regular file", what,
                 path);
        return -1;
    }
    return fd;
}

/* The sha256 of what fd holds from where it is, as "sha256:<hex>". */
static int hash_fd(int fd, char out[72])
{
    struct sha256_ctx ctx;
    rbx_nettle->sha256_init(&ctx);
    char buf[COPY_BUFFER];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        rbx_nettle->sha256_update(&ctx, (size_t)n, (const uint8_t *)buf);
    }
    uint8_t digest[SHA256_DIGEST_SIZE];
    SHA256_FINISH(&ctx, digest);
    strcpy(out, "sha256:");
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(out + 7 + 2 * i, 3, "%02x", digest[i]);
    return 0;
}

/* Opens the blob and checks, before anything reads it, its size (size < 0:
 * not known) and its sha256 against digest, which `whose` names. */
static int open_checked(unpacker *u, int layout, const char *path, const char *digest, int64_t size,
                        const char *what, const char *whose)
{
    struct stat st;
    int fd = open_blob(u, layout, path, what, &st);
    if (fd < 0)
        return -1;
    char actual[72];
    if (size >= 0 && st.st_size != size) {
        rbx_fail(u->err, RBX_EINVAL,
                 "the image layout's %s (%s) holds %lld bytes where %s says %lld: the layout is "
                 "damaged or was altered",
                 what, path, (long long)st.st_size, whose, (long long)size);
    } else if (hash_fd(fd, actual) != 0) {
        rbx_fail(u->err, RBX_ESYSTEM, "cannot read the image layout's %s (%s): %s", what, path,
                 strerror(errno));
    } else if (strcmp(actual, digest) != 0) {
        rbx_fail(u->err, RBX_EINVAL,
                 "the image layout's %s (%s) does not match its digest: its sha256 is %s, %s "
                 "says %s",
                 what, path, actual + 7, whose, digest + 7);
    } else if (lseek(fd, 0, SEEK_SET) == 0) {
        return fd;
    } else {
        rbx_fail(u->err, RBX_ESYSTEM, "cannot read the image layout's %s: %s", what,
                 strerror(errno));
    }
    close(fd);
    return -1;
}

/* A JSON file of the layout, whole; with digest, checked first. */
static json_t *read_json(unpacker *u, int layout, const char *path, const char *digest,
                         int64_t size, const char *what, const char *whose)
{
    struct stat st;
    int fd = digest ? open_checked(u, layout, path, digest, size, what, whose)
                    : open_blob(u, layout, path, what, &st);
    if (fd < 0)
        return NULL;
    char *text = NULL;
    size_t len = 0;
    json_t *json = NULL;
    if (fstat(fd, &st) != 0 || st.st_size > JSON_MAX) {
        rbx_fail(u->err, RBX_EINVAL, "the image layout's %s (%s) is larger than %d bytes", what,
                 path, JSON_MAX);
    } else if (!(text = malloc((size_t)st.st_size + 1))) {
        rbx_fail(u->err, RBX_ESYSTEM, "out of memory");
    } else {
        while (len < (size_t)st.st_size) {
            ssize_t n = read(fd, text + len, (size_t)st.st_size - len);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            len += (size_t)n;
        }
        json_error_t error;
        json = json_loadb(text, len, JSON_REJECT_DUPLICATES, &error);
        if (!json)
            rbx_fail(u->err, RBX_EINVAL, "the image layout's %s (%s) is not valid JSON: %s", what,
                     path, error.text);
    }
    free(text);
    close(fd);
    return json;
}

/* Applies one layer: checked whole first, then unpacked onto the lower
 * ones. */
static rbx_status apply_layer(unpacker *u, int layout, const char *path, const char *digest,
                              int64_t size, size_t n, size_t of, const char *whose)
{
    char what[64];
    snprintf(what, sizeof what, "layer %zu of %zu", n, of);
    int fd = open_checked(u, layout, path, digest, size, what, whose);
    if (fd < 0)
        return u->err->status;
    u->layer = true;
    snprintf(u->where, sizeof u->where, "image layer %zu of %zu", n, of);
    pathset_clear(&u->touched);
    rbx_status status = unpack_archive(u, fd);
    close(fd);
    pathset_clear(&u->touched);
    return status;
}

/* ---- OCI image layouts ---------------------------------------------------- */

typedef struct descriptor {
    const char *media_type; /* NULL: not given */
    const char *digest;
    int64_t size;
    bool native; /* its platform is linux on this architecture */
} descriptor;

static rbx_status descriptor_get(unpacker *u, json_t *json, const char *what, descriptor *d)
{
    json_t *digest = json_object_get(json, "digest");
    json_t *size = json_object_get(json, "size");
    json_t *platform = json_object_get(json, "platform");
    d->media_type = json_string_value(json_object_get(json, "mediaType"));
    d->digest = json_string_value(digest);
    d->size = json_is_integer(size) ? json_integer_value(size) : -1;
    const char *os = json_string_value(json_object_get(platform, "os"));
    const char *arch = json_string_value(json_object_get(platform, "architecture"));
    d->native = os && arch && !strcmp(os, "linux") && !strcmp(arch, HOST_ARCH);
    if (!json_is_object(json) || !digest_ok(d->digest))
        return rbx_fail(u->err, RBX_EINVAL,
                        "the image layout's %s has no valid digest (\"%.100s\"): a digest is "
                        "\"sha256:\" and 64 lowercase hex digits",
                        what, d->digest ? d->digest : "");
    if (d->size < 0)
        return rbx_fail(u->err, RBX_EINVAL, "the image layout's %s has no valid size", what);
    return RBX_OK;
}

static const char *const index_types[] = {
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json", NULL};
static const char *const manifest_types[] = {"application/vnd.oci.image.manifest.v1+json",
                                             "application/vnd.docker.distribution.manifest.v2+json",
                                             NULL};
static const char *const layer_types[] = {
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.oci.image.layer.nondistributable.v1.tar",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
    NULL};

static bool one_of(const char *value, const char *const *list)
{
    for (; value && *list; list++)
        if (!strcmp(value, *list))
            return true;
    return false;
}

static void blob_path(const char *digest, char out[96])
{
    snprintf(out, 96, "blobs/sha256/%s", digest + 7);
}

typedef struct candidates {
    char digest[CANDIDATES_MAX][72];
    int64_t size[CANDIDATES_MAX];
    bool native[CANDIDATES_MAX];
    size_t count;
} candidates;

/* The image manifests an index lists, through the indexes it lists. */
static rbx_status collect(unpacker *u, int layout, json_t *index, int depth, candidates *found)
{
    json_t *manifests = json_object_get(index, "manifests");
    if (!json_is_array(manifests))
        return rbx_fail(u->err, RBX_EINVAL,
                        "the image layout's index has no \"manifests\" list: not an OCI layout");
    size_t i;
    json_t *item;
    json_array_foreach(manifests, i, item)
    {
        descriptor d;
        rbx_status status = descriptor_get(u, item, "index entry", &d);
        if (status != RBX_OK)
            return status;
        if (one_of(d.media_type, index_types)) {
            if (depth >= INDEX_DEPTH_MAX)
                return rbx_fail(u->err, RBX_EINVAL,
                                "the image layout nests indexes deeper than %d levels",
                                INDEX_DEPTH_MAX);
            char path[96];
            blob_path(d.digest, path);
            json_t *nested =
                read_json(u, layout, path, d.digest, d.size, "nested index", "its index entry");
            if (!nested)
                return u->err->status;
            status = collect(u, layout, nested, depth + 1, found);
            json_decref(nested);
            if (status != RBX_OK)
                return status;
            continue;
        }
        if (d.media_type && !one_of(d.media_type, manifest_types))
            continue; /* not an image (an artifact, a signature) */
        size_t k = 0;
        while (k < found->count && strcmp(found->digest[k], d.digest))
            k++;
        if (k == found->count) {
            if (k == CANDIDATES_MAX)
                return rbx_fail(u->err, RBX_EINVAL, "the image layout lists more than %d manifests",
                                CANDIDATES_MAX);
            snprintf(found->digest[k], sizeof found->digest[k], "%s", d.digest);
            found->size[k] = d.size;
            found->count++;
        }
        found->native[k] = found->native[k] || d.native;
    }
    return RBX_OK;
}

/* The index's only image manifest, or its only one for this platform. */
static rbx_status choose_manifest(unpacker *u, int layout, size_t *chosen, candidates *found)
{
    json_t *index = read_json(u, layout, "index.json", NULL, -1, "index (index.json)", NULL);
    if (!index)
        return u->err->status;
    found->count = 0;
    rbx_status status = collect(u, layout, index, 0, found);
    json_decref(index);
    if (status != RBX_OK)
        return status;
    size_t native = 0;
    for (size_t k = 0; k < found->count; k++)
        if (found->native[k])
            native++, *chosen = k;
    if (found->count == 0)
        return rbx_fail(u->err, RBX_EINVAL,
                        "the image layout's index.json lists no image manifest");
    if (found->count == 1)
        *chosen = 0;
    else if (native != 1)
        return rbx_fail(u->err, RBX_EINVAL,
                        "the image layout holds %zu image manifests, %zu of them for linux/%s: "
                        "import a layout of one image, or with one manifest for linux/%s",
                        found->count, native, HOST_ARCH, HOST_ARCH);
    return RBX_OK;
}

static rbx_status unpack_oci(unpacker *u, int layout)
{
    json_t *marker = read_json(u, layout, "oci-layout", NULL, -1, "oci-layout file", NULL);
    if (!marker)
        return u->err->status;
    bool marked = json_is_string(json_object_get(marker, "imageLayoutVersion"));
    json_decref(marker);
    if (!marked)
        return rbx_fail(u->err, RBX_EINVAL,
                        "the image layout's oci-layout file has no imageLayoutVersion: not an "
                        "OCI image layout");
    candidates *found = malloc(sizeof *found);
    if (!found)
        return rbx_fail(u->err, RBX_ESYSTEM, "out of memory");
    size_t chosen = 0;
    rbx_status status = choose_manifest(u, layout, &chosen, found);
    json_t *manifest = NULL;
    char path[96];
    if (status == RBX_OK) {
        blob_path(found->digest[chosen], path);
        manifest = read_json(u, layout, path, found->digest[chosen], found->size[chosen],
                             "image manifest", "the index");
        if (!manifest)
            status = u->err->status;
    }
    free(found);
    json_t *layers = json_object_get(manifest, "layers");
    if (status == RBX_OK && (!json_is_array(layers) || json_array_size(layers) > LAYERS_MAX))
        status =
            rbx_fail(u->err, RBX_EINVAL,
                     "the image manifest has no \"layers\" list of at most %d layers", LAYERS_MAX);
    size_t count = status == RBX_OK ? json_array_size(layers) : 0;
    for (size_t i = 0; i < count && status == RBX_OK; i++) {
        descriptor d;
        char what[64];
        snprintf(what, sizeof what, "layer %zu of %zu", i + 1, count);
        if ((status = descriptor_get(u, json_array_get(layers, i), what, &d)) != RBX_OK)
            break;
        if (!one_of(d.media_type, layer_types)) {
            status = rbx_fail(u->err, RBX_EINVAL,
                              "the image's %s has media type \"%.100s\": layers must be tar "
                              "archives, uncompressed, gzip or zstd "
                              "(application/vnd.oci.image.layer.v1.tar[+gzip|+zstd])",
                              what, d.media_type ? d.media_type : "");
            break;
        }
        blob_path(d.digest, path);
        status = apply_layer(u, layout, path, d.digest, d.size, i + 1, count, "the manifest");
    }
    json_decref(manifest);
    return status;
}

/* ---- docker save archives ------------------------------------------------- */

/* A docker save archive names its files in manifest.json; older Docker
 * made a layer that two images share a link to the other's file. */
typedef struct alias {
    char *from, *to; /* to: resolved inside the archive */
} alias;

typedef struct aliases {
    alias *items;
    size_t count;
} aliases;

static void aliases_free(aliases *a)
{
    for (size_t i = 0; i < a->count; i++) {
        free(a->items[i].from);
        free(a->items[i].to);
    }
    free(a->items);
    *a = (aliases){0};
}

/* path with its links among the archive's files followed (out:
 * MEMBER_PATH_MAX bytes). */
static void follow_aliases(const aliases *a, const char *path, char *out)
{
    snprintf(out, MEMBER_PATH_MAX, "%s", path);
    for (int hops = 0; hops < 8; hops++) {
        size_t i = 0;
        while (i < a->count && strcmp(a->items[i].from, out))
            i++;
        if (i == a->count)
            return;
        snprintf(out, MEMBER_PATH_MAX, "%s", a->items[i].to);
    }
}

/* A path manifest.json names: a file of the archive, never above it. */
static rbx_status docker_path(unpacker *u, json_t *value, const aliases *a, char *out)
{
    const char *raw = json_string_value(value);
    char path[MEMBER_PATH_MAX];
    if (!raw || !raw[0] || raw[0] == '/' || normalize(raw, path) != PATH_OK || !path[0])
        return rbx_fail(u->err, RBX_EINVAL,
                        "the docker save archive's manifest.json names \"%.200s\": files of the "
                        "archive are named by relative paths inside it",
                        raw ? raw : "");
    follow_aliases(a, path, out);
    return RBX_OK;
}

/* The archive's one image: its layers, checked against its config's
 * diff_ids (the sha256 of each layer as stored: docker save writes them
 * uncompressed). manifest.json itself has no digest: this finds a damaged
 * archive, not a forged one, which is refused member by member anyway. */
static rbx_status unpack_docker(unpacker *u, int layout, const aliases *a)
{
    snprintf(u->where, sizeof u->where, "image archive");
    json_t *manifest = read_json(u, layout, "manifest.json", NULL, -1, "manifest.json", NULL);
    if (!manifest)
        return u->err->status;
    json_t *config = NULL;
    rbx_status status = RBX_OK;
    json_t *image = json_array_get(manifest, 0);
    json_t *layers = json_object_get(image, "Layers");
    char path[MEMBER_PATH_MAX];
    if (json_array_size(manifest) != 1) {
        status = rbx_fail(u->err, RBX_EINVAL,
                          "the docker save archive holds %zu images: save one image per archive",
                          json_array_size(manifest));
    } else if (!json_is_array(layers) || json_array_size(layers) > LAYERS_MAX) {
        status = rbx_fail(u->err, RBX_EINVAL,
                          "the docker save archive's manifest.json has no \"Layers\" list of at "
                          "most %d layers",
                          LAYERS_MAX);
    } else if ((status = docker_path(u, json_object_get(image, "Config"), a, path)) == RBX_OK &&
               !(config = read_json(u, layout, path, NULL, -1, "image config", NULL))) {
        status = u->err->status;
    }
    json_t *diff_ids = json_object_get(json_object_get(config, "rootfs"), "diff_ids");
    if (status == RBX_OK &&
        (!json_is_array(diff_ids) || json_array_size(diff_ids) != json_array_size(layers)))
        status = rbx_fail(u->err, RBX_EINVAL,
                          "the docker save archive's image config lists %zu diff_ids for %zu "
                          "layers: it must name each layer's digest",
                          json_array_size(diff_ids), json_array_size(layers));
    size_t count = status == RBX_OK ? json_array_size(layers) : 0;
    for (size_t i = 0; i < count && status == RBX_OK; i++) {
        const char *digest = json_string_value(json_array_get(diff_ids, i));
        if (!digest_ok(digest)) {
            status = rbx_fail(u->err, RBX_EINVAL,
                              "the docker save archive's image config has an invalid diff_id "
                              "\"%.100s\": a digest is \"sha256:\" and 64 lowercase hex digits",
                              digest ? digest : "");
        } else if ((status = docker_path(u, json_array_get(layers, i), a, path)) == RBX_OK) {
            status = apply_layer(u, layout, path, digest, -1, i + 1, count,
                                 "the image config's diff_ids");
        }
    }
    json_decref(config);
    json_decref(manifest);
    return status;
}

/* ---- a tar holding a layout ------------------------------------------------ */

typedef enum source_kind { SOURCE_ROOTFS, SOURCE_OCI, SOURCE_DOCKER } source_kind;

typedef struct scan {
    source_kind kind;
    bool marked, indexed; /* oci-layout with imageLayoutVersion, index.json */
    json_t *manifest;     /* manifest.json */
    aliases links;
} scan;

/* Whether a path can be a file of an image layout or docker save archive:
 * anything else makes the archive a root filesystem. */
static bool layout_name(const char *path)
{
    static const char *const tops[] = {"oci-layout", "index.json", "manifest.json", "repositories",
                                       "blobs"};
    size_t n = strcspn(path, "/");
    for (size_t i = 0; i < sizeof tops / sizeof *tops; i++)
        if (n == strlen(tops[i]) && !strncmp(path, tops[i], n))
            return true;
    return n >= 64 && hex64(path); /* docker save's <id>/, <id>.json, <id>.tar */
}

/* A small member's text (at most max bytes), or NULL. */
static char *member_text(struct archive *in, struct archive_entry *entry, size_t max, size_t *len)
{
    int64_t size = rbx_ar->archive_entry_size(entry);
    if (size < 0 || (uint64_t)size > max)
        return NULL;
    char *text = malloc((size_t)size + 1);
    la_ssize_t n = text ? rbx_ar->archive_read_data(in, text, (size_t)size) : -1;
    if (n != size) {
        free(text);
        return NULL;
    }
    *len = (size_t)n;
    return text;
}

/* Lexically: the link at path to target, inside the archive (out:
 * MEMBER_PATH_MAX bytes); false where it climbs out or is absolute. */
static bool resolve_in_archive(const char *path, const char *target, char *out)
{
    if (target[0] == '/' || !rbx_link_stays_inside(path, target))
        return false;
    size_t len = (size_t)(last_component(path) - path);
    if (len + strlen(target) >= MEMBER_PATH_MAX)
        return false;
    memcpy(out, path, len);
    size_t o = len;
    for (const char *p = target; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            while (o > 0 && out[o - 1] == '/')
                o--;
            while (o > 0 && out[o - 1] != '/')
                o--;
        } else if (n > 0 && !(n == 1 && p[0] == '.')) {
            if (o > 0 && out[o - 1] != '/')
                out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p += n + (p[n] == '/');
    }
    while (o > 0 && out[o - 1] == '/')
        o--;
    out[o] = 0;
    return o > 0;
}

static rbx_status scan_member(unpacker *u, scan *s, struct archive *in, struct archive_entry *entry,
                              const char *path, bool *rootfs)
{
    mode_t type = rbx_ar->archive_entry_filetype(entry);
    size_t len;
    char *text;
    if (type == AE_IFREG && !strcmp(path, "oci-layout")) {
        json_t *json = (text = member_text(in, entry, 65536, &len))
                           ? json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL)
                           : NULL;
        s->marked = json_is_string(json_object_get(json, "imageLayoutVersion"));
        json_decref(json);
        free(text);
    } else if (type == AE_IFREG && !strcmp(path, "index.json")) {
        s->indexed = true;
    } else if (type == AE_IFREG && !strcmp(path, "manifest.json")) {
        json_decref(s->manifest);
        s->manifest = (text = member_text(in, entry, JSON_MAX, &len))
                          ? json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL)
                          : NULL;
        free(text);
    } else if (type == AE_IFLNK && s->links.count < ARCHIVE_LINKS_MAX) {
        const char *target = rbx_ar->archive_entry_symlink(entry);
        char resolved[MEMBER_PATH_MAX];
        if (!target || !resolve_in_archive(path, target, resolved))
            return RBX_OK; /* refused when manifest.json names it */
        if (!s->links.items &&
            !(s->links.items = calloc(ARCHIVE_LINKS_MAX, sizeof *s->links.items)))
            return rbx_fail(u->err, RBX_ESYSTEM, "out of memory");
        alias *a = &s->links.items[s->links.count];
        if (!(a->from = strdup(path)) || !(a->to = strdup(resolved)))
            return rbx_fail(u->err, RBX_ESYSTEM, "out of memory");
        s->links.count++;
    } else if (type == AE_IFLNK) {
        *rootfs = true; /* no docker save archive has this many */
    }
    return RBX_OK;
}

/* First pass: which kind of archive this is. A layout's archive holds only
 * a layout's names; the first other name makes it a root filesystem. */
static rbx_status scan_archive(unpacker *u, int fd, scan *s)
{
    struct archive *in = open_tar(u, fd);
    if (!in)
        return u->err->status;
    rbx_status status = RBX_OK;
    bool rootfs = false;
    for (uint64_t members = 0; status == RBX_OK && !rootfs; members++) {
        struct archive_entry *entry;
        int rc = rbx_ar->archive_read_next_header(in, &entry);
        if (rc == ARCHIVE_EOF)
            break;
        if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
            status = unreadable(u, in);
            break;
        }
        const char *raw = rbx_ar->archive_entry_pathname(entry);
        char path[MEMBER_PATH_MAX];
        if (members >= u->limits->max_entries || normalize(raw ? raw : "", path) != PATH_OK ||
            (path[0] && !layout_name(path)))
            rootfs = true; /* the second pass says what is wrong, if anything */
        else if (path[0])
            status = scan_member(u, s, in, entry, path, &rootfs);
    }
    rbx_ar->archive_read_free(in);
    json_t *first = json_array_get(s->manifest, 0);
    if (rootfs)
        s->kind = SOURCE_ROOTFS;
    else if (s->marked && s->indexed)
        s->kind = SOURCE_OCI;
    else if (json_is_array(json_object_get(first, "Layers")))
        s->kind = SOURCE_DOCKER;
    else
        s->kind = SOURCE_ROOTFS;
    return status;
}

/* Whether the second pass keeps this file of the archive. */
static bool wanted(const scan *s, const char *path)
{
    if (s->kind == SOURCE_OCI)
        return !strcmp(path, "oci-layout") || !strcmp(path, "index.json") ||
               (!strncmp(path, "blobs/sha256/", 13) && strlen(path) == 13 + 64 && hex64(path + 13));
    if (!strcmp(path, "manifest.json"))
        return true;
    json_t *image = json_array_get(s->manifest, 0);
    json_t *layers = json_object_get(image, "Layers");
    for (size_t i = 0; i <= json_array_size(layers); i++) {
        /* The config, then each layer: as unpack_docker will name them. */
        const char *name =
            json_string_value(i ? json_array_get(layers, i - 1) : json_object_get(image, "Config"));
        char normal[MEMBER_PATH_MAX], named[MEMBER_PATH_MAX];
        if (!name || name[0] == '/' || normalize(name, normal) != PATH_OK)
            continue;
        follow_aliases(&s->links, normal, named);
        if (!strcmp(named, path))
            return true;
    }
    return false;
}

/* One file of a layout into the scratch directory, at its path there. */
static rbx_status save_member(unpacker *u, struct archive *in, int scratch, const char *path)
{
    int dir = fcntl(scratch, F_DUPFD_CLOEXEC, 0);
    char part[MEMBER_PATH_MAX];
    snprintf(part, sizeof part, "%s", path);
    char *p = part;
    for (char *slash; dir >= 0 && (slash = strchr(p, '/')); p = slash + 1) {
        *slash = 0;
        if (mkdirat(dir, p, 0700) != 0 && errno != EEXIST) {
            close(dir);
            return host_failed(u, "make a scratch directory for");
        }
        int next = openat(dir, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(dir);
        dir = next;
    }
    if (dir < 0)
        return host_failed(u, "open a scratch directory for");
    int fd = openat(dir, p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    close(dir);
    if (fd < 0)
        return errno == EEXIST ? refuse(u, "is there twice")
                               : host_failed(u, "make a scratch copy of");
    rbx_status status = copy_data(u, in, fd);
    if (close(fd) != 0 && status == RBX_OK)
        status = host_failed(u, "write a scratch copy of");
    return status;
}

/* Second pass: the layout's own files into scratch, every other member
 * left unread. They count as members and bytes of the image. */
static rbx_status extract_layout(unpacker *u, int fd, const scan *s, int scratch)
{
    struct archive *in = open_tar(u, fd);
    if (!in)
        return u->err->status;
    rbx_status status = RBX_OK;
    while (status == RBX_OK) {
        struct archive_entry *entry;
        int rc = rbx_ar->archive_read_next_header(in, &entry);
        if (rc == ARCHIVE_EOF)
            break;
        if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
            status = unreadable(u, in);
            break;
        }
        const char *raw = rbx_ar->archive_entry_pathname(entry);
        show(u, raw);
        if (u->entries >= u->limits->max_entries) {
            status = rbx_fail(u->err, RBX_ENOSPC,
                              "the %s has more members than the image's limit of %llu", u->where,
                              (unsigned long long)u->limits->max_entries);
            break;
        }
        u->entries++;
        char path[MEMBER_PATH_MAX];
        if ((status = member_path(u, raw, "a path", path)) != RBX_OK || !wanted(s, path))
            continue;
        int64_t size = rbx_ar->archive_entry_size(entry);
        if (rbx_ar->archive_entry_filetype(entry) == AE_IFLNK && s->kind == SOURCE_DOCKER)
            continue; /* an alias, followed when the scan found it */
        if (rbx_ar->archive_entry_filetype(entry) != AE_IFREG ||
            rbx_ar->archive_entry_hardlink(entry) ||
            rbx_ar->archive_entry_sparse_count(entry) > 0)
            status = refuse(u, "is not a plain regular file: an image layout's files must be");
        else if (size < 0 || (uint64_t)size > u->limits->max_bytes - u->bytes)
            status = rbx_fail(u->err, RBX_ENOSPC,
                              "%s member \"%s\" declares %lld bytes, more than the %llu left of "
                              "the image's limit of %llu bytes",
                              u->where, u->shown, (long long)size,
                              (unsigned long long)(u->limits->max_bytes - u->bytes),
                              (unsigned long long)u->limits->max_bytes);
        else
            status = save_member(u, in, scratch, path);
    }
    rbx_ar->archive_read_free(in);
    return status;
}

/* A scratch directory for a layout's files: mkdtemp under $TMPDIR (default
 * /var/tmp, which holds more than a tmpfs /tmp). */
static rbx_status make_scratch(unpacker *u, char *path, size_t size, int *fd)
{
    const char *base = getenv("TMPDIR");
    if (!base || !base[0])
        base = "/var/tmp";
    if (snprintf(path, size, "%s/runbox-unpack-XXXXXX", base) >= (int)size)
        return rbx_fail(u->err, RBX_ESYSTEM, "TMPDIR is too long: %.200s", base);
    if (!mkdtemp(path)) {
        int error = errno;
        path[0] = 0;
        return rbx_fail(u->err, error == ENOSPC ? RBX_ENOSPC : RBX_ESYSTEM,
                        "cannot make a scratch directory in %.200s for the image's layout: %s "
                        "(set TMPDIR to another directory)",
                        base, strerror(error));
    }
    *fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*fd < 0)
        return rbx_fail(u->err, RBX_ESYSTEM, "cannot open %.200s: %s", path, strerror(errno));
    return RBX_OK;
}

static rbx_status unpack_tar(unpacker *u, const char *source)
{
    int fd = open(source, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return rbx_fail(u->err, RBX_ESYSTEM, "cannot open %.300s: %s", source, strerror(errno));
    snprintf(u->where, sizeof u->where, "image archive");
    scan s = {0};
    rbx_status status = scan_archive(u, fd, &s);
    if (status == RBX_OK && lseek(fd, 0, SEEK_SET) != 0)
        status =
            rbx_fail(u->err, RBX_ESYSTEM, "cannot read %.300s again: %s", source, strerror(errno));
    char scratch_path[4096] = "";
    int scratch = -1;
    if (status == RBX_OK && s.kind == SOURCE_ROOTFS) {
        status = unpack_archive(u, fd);
        if (status == RBX_OK && u->entries == 0) /* a layer may be empty; an image may not */
            status = rbx_fail(u->err, RBX_EINVAL,
                              "the image archive %.300s holds no member: a root filesystem "
                              "archive holds the image's files",
                              source);
    } else if (status == RBX_OK &&
               (status = make_scratch(u, scratch_path, sizeof scratch_path, &scratch)) == RBX_OK &&
               (status = extract_layout(u, fd, &s, scratch)) == RBX_OK) {
        status =
            s.kind == SOURCE_OCI ? unpack_oci(u, scratch) : unpack_docker(u, scratch, &s.links);
    }
    close(fd);
    if (scratch >= 0)
        close(scratch);
    if (scratch_path[0] && rbx_remove_tree(AT_FDCWD, scratch_path) != 0 && status == RBX_OK)
        status = rbx_fail(u->err, RBX_ESYSTEM, "cannot remove the scratch directory %.200s: %s",
                          scratch_path, strerror(errno));
    json_decref(s.manifest);
    aliases_free(&s.links);
    return status;
}

static rbx_status unpack_directory(unpacker *u, const char *source)
{
    int dir = open(source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return rbx_fail(u->err, RBX_ESYSTEM, "cannot open %.300s: %s", source, strerror(errno));
    struct stat st;
    rbx_status status;
    aliases none = {0};
    if (fstatat(dir, "oci-layout", &st, AT_SYMLINK_NOFOLLOW) == 0)
        status = unpack_oci(u, dir);
    else if (fstatat(dir, "manifest.json", &st, AT_SYMLINK_NOFOLLOW) == 0)
        status = unpack_docker(u, dir, &none);
    else
        status = rbx_fail(u->err, RBX_EINVAL,
                          "%.300s is a directory but not an image layout: an OCI layout has an "
                          "oci-layout file and index.json (podman save --format oci-dir, skopeo "
                          "copy ... oci:DIR); a root filesystem is imported as a tar archive",
                          source);
    close(dir);
    return status;
}

/* Not as root: directories get the modes that would have kept us out. */
static rbx_status apply_fixups(unpacker *u)
{
    for (size_t i = u->fixup_count; i-- > 0;) {
        int fd = u->fixups[i].path[0]
                     ? rbx_open_beneath(u->root, u->fixups[i].path, O_RDONLY | O_DIRECTORY, 0)
                     : fcntl(u->root, F_DUPFD_CLOEXEC, 0);
        if (fd < 0)
            continue; /* removed or replaced by a later layer */
        int rc = fchmod(fd, u->fixups[i].mode);
        close(fd);
        if (rc != 0)
            return rbx_fail(u->err, RBX_ESYSTEM, "cannot set the mode of %.200s: %s",
                            u->fixups[i].path, strerror(errno));
    }
    return RBX_OK;
}

rbx_status rbx_image_unpack(int root_fd, const char *source, const rbx_unpack_limits *limits,
                            rbx_error *err)
{
    unpacker u = {.root = root_fd, .limits = limits, .is_root = geteuid() == 0, .err = err};
    snprintf(u.where, sizeof u.where, "image archive");
    struct stat st;
    rbx_status status;
    if ((status = rbx_archive_load(err)) != RBX_OK || (status = rbx_nettle_load(err)) != RBX_OK)
        return status;
    if (stat(source, &st) != 0)
        status = rbx_fail(err, errno == ENOENT || errno == ENOTDIR ? RBX_ENOENT : RBX_ESYSTEM,
                          "cannot import %.300s: %s", source, strerror(errno));
    else if (S_ISDIR(st.st_mode))
        status = unpack_directory(&u, source);
    else if (S_ISREG(st.st_mode))
        status = unpack_tar(&u, source);
    else
        status = rbx_fail(err, RBX_EINVAL,
                          "%.300s is neither a file nor a directory: images are imported from a "
                          "tar archive or an OCI layout directory",
                          source);
    if (status == RBX_OK)
        status = apply_fixups(&u);
    for (size_t i = 0; i < u.fixup_count; i++)
        free(u.fixups[i].path);
    free(u.fixups);
    pathset_clear(&u.touched);
    return status;
}
