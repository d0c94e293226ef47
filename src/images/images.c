/* The image store (see images.h): names, content addresses, building with
 * mmdebstrap, importing with image_unpack.c, listing and removal. */
#include "images/images.h"
#include "images/node_dist.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/nettle_lib.h"
#include "base/owner.h"
#include "engine/engine.h"
#include "images/unpack.h"
#include "languages/runtime.h"
#include "runbox.h"
#include "sessions/session.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What an imported image may hold at most; a built one is what Debian's
 * packages make it. */
#define IMPORT_MAX_BYTES (16ull << 30)
#define IMPORT_MAX_ENTRIES 1000000
/* Deeper trees are refused by the digest walk (one fd per level). */
#define TREE_MAX_DEPTH 128

/* What the default image holds: what runbox's languages need, and what an
 * analyst agent imports without asking for it. Its Node.js and npm are the
 * official builds (node_dist.c), which need libstdc++. */
static const char default_packages[] =
    "bash,coreutils,ca-certificates,tzdata,python3,python3-pip,python3-venv,libstdc++6,"
    "python3-numpy,python3-pandas,python3-matplotlib,python3-scipy,python3-requests,"
    "python3-bs4,python3-lxml,python3-pil,python3-openpyxl,fonts-dejavu-core,procps,curl";
#define DEFAULT_SUITE "trixie"
#define DEFAULT_MIRROR "http://deb.debian.org/debian"

bool rbx_image_name_ok(const char *name, char *why, size_t why_size)
{
    size_t len = name ? strlen(name) : 0;
    bool ok = len > 0 && len < RBX_IMAGE_NAME_MAX && strcmp(name, "host") != 0 &&
              strncmp(name, "sha256", 6) != 0 &&
              (name[0] != '.' && name[0] != '-' && name[0] != '_');
    for (size_t i = 0; ok && i < len; i++) {
        char c = name[i];
        ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    }
    if (!ok)
        snprintf(why, why_size,
                 "'%.80s' is not an image name: 1 to %d of a-z, 0-9, '.', '_' and '-', starting "
                 "with a letter or digit (\"host\" means the host's own /usr, and names starting "
                 "with sha256 are kept for digests)",
                 name ? name : "", RBX_IMAGE_NAME_MAX - 1);
    return ok;
}

/* --- the store's directory ------------------------------------------------------- */

static int store_open(rbx_engine *engine, bool create, rbx_error *err)
{
    if (create && rbx_mkdir_p(engine->images_dir, 0755) != 0) {
        rbx_fail(err, RBX_ESYSTEM, "cannot create the image store %s: %s", engine->images_dir,
                 strerror(errno));
        return -1;
    }
    int fd = open(engine->images_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT && !create)
            return -1;
        rbx_fail(err, RBX_ESYSTEM, "cannot open the image store %s: %s", engine->images_dir,
                 strerror(errno));
        return -1;
    }
    /* Stored images are system software, readable like /usr (an ordinary
     * user's runbox may run on this store); what is being built or
     * unpacked in tmp/ is runbox's alone until it is stored. */
    int tmp = -1;
    if (create && ((mkdirat(fd, "names", 0755) != 0 && errno != EEXIST) ||
                   (tmp = rbx_private_dir_at(fd, "tmp")) < 0)) {
        rbx_fail(err, RBX_ESYSTEM, "cannot create %s/names and tmp: %s", engine->images_dir,
                 strerror(errno));
        close(fd);
        return -1;
    }
    if (tmp >= 0)
        close(tmp);
    return fd;
}

/* The digest a name links to ("sha256-<hex>"), or false. */
static bool read_name(int store, const char *name, char *dir, size_t size)
{
    char link[128], path[RBX_IMAGE_NAME_MAX + 8];
    snprintf(path, sizeof path, "names/%s", name);
    ssize_t n = readlinkat(store, path, link, sizeof link - 1);
    if (n <= 0)
        return false;
    link[n] = 0;
    if (strncmp(link, "../sha256-", 10) || strlen(link + 3) != 71 || strchr(link + 3, '/'))
        return false;
    snprintf(dir, size, "%s", link + 3);
    return true;
}

rbx_status rbx_image_locate(rbx_engine *engine, const char *name, rbx_image_place *place,
                            rbx_error *err)
{
    int store = store_open(engine, false, err);
    char dir[80];
    bool found = store >= 0 && read_name(store, name, dir, sizeof dir);
    struct stat st;
    found = found && fstatat(store, dir, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    if (store >= 0)
        close(store);
    if (!found)
        return rbx_fail(err, RBX_ENOENT,
                        "no image named '%s' in %s (runbox images list shows them; runbox images "
                        "build or import makes one; \"host\" runs on the host's /usr)",
                        name, engine->images_dir);
    snprintf(place->name, sizeof place->name, "%s", name);
    snprintf(place->digest, sizeof place->digest, "sha256:%.64s", dir + 7);
    snprintf(place->tree, sizeof place->tree, "%.3900s/%.80s", engine->images_dir, dir);
    return RBX_OK;
}

const char *rbx_image_default_name(rbx_engine *engine)
{
    if (engine->config.image && *engine->config.image)
        return engine->config.image;
    rbx_image_place place;
    rbx_error ignored;
    if (rbx_image_locate(engine, "default", &place, &ignored) == RBX_OK)
        return "default";
    snprintf(engine->image_note, sizeof engine->image_note,
             "the image store %.4200s has no default image: executions that name none run on "
             "the host's /usr (runbox images build default makes it; --images DIR names "
             "another store)",
             engine->images_dir);
    return "host";
}

const char *rbx_engine_default_image(rbx_engine *engine)
{
    return engine->roots[0]->image;
}

bool rbx_image_allowed(const rbx_engine *engine, const char *name)
{
    const char *list = engine->config.images_allowed;
    if (!list)
        return true;
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && !strncmp(p, name, n))
            return true;
        if (!end)
            break;
        p = end + 1;
    }
    return false;
}

const char *rbx_image_interpreter_missing(int tree_fd, const rbx_runtime *runtime)
{
    struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT};
    int fd = tree_fd < 0
                 ? -1
                 : (int)syscall(SYS_openat2, tree_fd, runtime->interpreter + 1, &how, sizeof how);
    struct stat st;
    bool ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
    if (fd >= 0)
        close(fd);
    return ok ? NULL : fd < 0 ? "not there" : "not an executable file";
}

/* Bit i set: the tree has the interpreter of language i. */
static unsigned tree_languages(int tree_fd)
{
    unsigned languages = 0;
    for (size_t i = 0; i < rbx_runtime_count() && i < 32; i++)
        if (!rbx_image_interpreter_missing(tree_fd, rbx_runtime_find(rbx_runtime_name(i))))
            languages |= 1u << i;
    return languages;
}

static void host_info(rbx_engine *engine, rbx_image_info *info)
{
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "host");
    snprintf(info->source, sizeof info->source, "the host's /usr");
    info->is_default = engine->root_count && !strcmp(engine->roots[0]->image, "host");
    info->allowed = rbx_image_allowed(engine, "host");
    int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    info->languages = tree_languages(root);
    if (root >= 0)
        close(root);
}

/* --- content address ------------------------------------------------------------- */

typedef struct digest_walk {
    struct sha256_ctx sha;
    uint64_t bytes;
    char *buf;
} digest_walk;

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int no_dots(const struct dirent *d)
{
    return strcmp(d->d_name, ".") && strcmp(d->d_name, "..");
}

/* Hashes the tree below dirfd (path is its path in the image, "" at the
 * top) in name order: for each entry a header line, then its bytes (a
 * file) or its target (a link). Returns 0, or -1 with errno. */
static int digest_dir(digest_walk *w, int dirfd, const char *path, int depth)
{
    if (depth > TREE_MAX_DEPTH) {
        errno = ELOOP;
        return -1;
    }
    struct dirent **names;
    char self[32];
    snprintf(self, sizeof self, "/proc/self/fd/%d", dirfd);
    int n = scandir(self, &names, no_dots, by_name);
    if (n < 0)
        return -1;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        struct stat st;
        char child[4096];
        if (rc == 0 && (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
                        snprintf(child, sizeof child, "%s/%s", path, name) >= (int)sizeof child))
            rc = -1;
        if (rc == 0) {
            char head[4200];
            int len = snprintf(
                head, sizeof head, "%o %u %u %lld %s", (unsigned)st.st_mode, (unsigned)st.st_uid,
                (unsigned)st.st_gid,
                S_ISREG(st.st_mode) || S_ISLNK(st.st_mode) ? (long long)st.st_size : 0LL, child);
            rbx_nettle->sha256_update(&w->sha, (size_t)len + 1, (const uint8_t *)head);
            if (S_ISREG(st.st_mode)) {
                w->bytes += (uint64_t)st.st_size;
                int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                ssize_t got = fd < 0 ? -1 : 0;
                while (fd >= 0 && (got = read(fd, w->buf, 1 << 20)) > 0)
                    rbx_nettle->sha256_update(&w->sha, (size_t)got, (const uint8_t *)w->buf);
                if (fd >= 0)
                    close(fd);
                rc = got < 0 ? -1 : 0;
            } else if (S_ISLNK(st.st_mode)) {
                char target[4096];
                ssize_t got = readlinkat(dirfd, name, target, sizeof target);
                if (got < 0)
                    rc = -1;
                else
                    rbx_nettle->sha256_update(&w->sha, (size_t)got, (const uint8_t *)target);
            } else if (S_ISDIR(st.st_mode)) {
                int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                rc = sub < 0 ? -1 : digest_dir(w, sub, child, depth + 1);
                if (sub >= 0)
                    close(sub);
            }
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

static int tree_digest(int dirfd, char hex[65], uint64_t *bytes)
{
    digest_walk w = {.buf = malloc(1 << 20)};
    if (!w.buf)
        return -1;
    rbx_nettle->sha256_init(&w.sha);
    int rc = digest_dir(&w, dirfd, "", 0);
    uint8_t digest[SHA256_DIGEST_SIZE];
    rbx_nettle->sha256_digest(&w.sha, sizeof digest, digest);
    for (size_t i = 0; i < sizeof digest; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    *bytes = w.bytes;
    free(w.buf);
    return rc;
}

/* --- making an image ------------------------------------------------------------- */

/* A tree being made: images/tmp/<unique>/, removed unless committed. */
typedef struct staging {
    int store;
    char name[64]; /* below tmp/ */
    int fd;        /* the tree */
} staging;

/* What a runbox killed while it built or unpacked an image left in tmp/
 * ("image-<mark>-...", base/owner.h): removed once that process is gone. */
static void sweep_staging(int store)
{
    int tmp = openat(store, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *dir = tmp < 0 ? NULL : fdopendir(dup(tmp));
    for (struct dirent *d; dir && (d = readdir(dir));) {
        struct stat st;
        if (strncmp(d->d_name, "image-", 6) || fstatat(tmp, d->d_name, &st, AT_SYMLINK_NOFOLLOW))
            continue;
        rbx_owner_id id;
        if (rbx_owner_parse(d->d_name + 6, &id) &&
            rbx_owner_state_id(NULL, &id, st.st_mtime) == RBX_OWNER_GONE)
            rbx_remove_tree(tmp, d->d_name);
    }
    if (dir)
        closedir(dir);
    if (tmp >= 0)
        close(tmp);
}

static rbx_status staging_open(rbx_engine *engine, staging *s, rbx_error *err)
{
    s->fd = -1;
    s->store = store_open(engine, true, err);
    if (s->store < 0)
        return err->status;
    sweep_staging(s->store);
    rbx_trash_name(s->name, sizeof s->name, "image");
    char path[96];
    snprintf(path, sizeof path, "tmp/%s", s->name);
    if (mkdirat(s->store, path, 0755) != 0 ||
        (s->fd = openat(s->store, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        rbx_fail(err, RBX_ESYSTEM, "cannot make %s/%s: %s", engine->images_dir, path,
                 strerror(errno));
        close(s->store);
        return RBX_ESYSTEM;
    }
    /* The tree's top is the root's: not writable by the sandbox's user. */
    (void)fchmod(s->fd, 0755);
    return RBX_OK;
}

static void staging_close(staging *s)
{
    if (s->fd >= 0)
        close(s->fd);
    int tmp = openat(s->store, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tmp >= 0) {
        rbx_remove_tree(tmp, s->name); /* gone already once committed */
        close(tmp);
    }
    close(s->store);
}

static void fill_info(rbx_engine *engine, int store, const char *name, const char *dir,
                      rbx_image_info *info)
{
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", name);
    snprintf(info->digest, sizeof info->digest, "sha256:%.64s", dir + 7);
    char meta[96];
    snprintf(meta, sizeof meta, "%s.json", dir);
    int fd = openat(store, meta, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    json_t *doc = fd >= 0 ? json_loadfd(fd, 0, NULL) : NULL;
    if (fd >= 0)
        close(fd);
    if (doc) {
        json_int_t size = json_integer_value(json_object_get(doc, "size_bytes"));
        info->size_bytes = size > 0 ? (uint64_t)size : 0;
        info->created_unix = json_integer_value(json_object_get(doc, "created"));
        const char *source = json_string_value(json_object_get(doc, "source"));
        const char *packages = json_string_value(json_object_get(doc, "packages"));
        const char *node = json_string_value(json_object_get(doc, "node"));
        snprintf(info->source, sizeof info->source, "%s", source ? source : "");
        snprintf(info->packages, sizeof info->packages, "%s", packages ? packages : "");
        snprintf(info->node, sizeof info->node, "%s", node ? node : "");
        json_decref(doc);
    }
    info->is_default = engine->root_count && !strcmp(engine->roots[0]->image, name);
    info->allowed = rbx_image_allowed(engine, name);
    int tree = openat(store, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    info->languages = tree_languages(tree);
    if (tree >= 0)
        close(tree);
}

/* Moves the staged tree into the store under its digest (or drops it for
 * the tree already there), records how it was made, and names it. */
static rbx_status commit(rbx_engine *engine, staging *s, const char *name, const char *source,
                         const char *packages, const char *node, rbx_image_info *info,
                         rbx_error *err)
{
    char hex[65];
    uint64_t bytes = 0;
    rbx_status loaded = rbx_nettle_load(err);
    if (loaded != RBX_OK)
        return loaded;
    if (tree_digest(s->fd, hex, &bytes) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot read the new image's tree: %s",
                        errno == ELOOP ? "deeper than 128 directories" : strerror(errno));
    char dir[80], from[96], meta[96];
    snprintf(dir, sizeof dir, "sha256-%s", hex);
    snprintf(from, sizeof from, "tmp/%s", s->name);
    snprintf(meta, sizeof meta, "%s.json", dir);
    int lock = rbx_lock_dir(s->store);
    char existing[80];
    if (read_name(s->store, name, existing, sizeof existing)) {
        if (lock >= 0)
            rbx_lock_release(lock);
        return rbx_fail(err, RBX_EINVAL,
                        "an image named '%s' exists (runbox images rm %s removes it first)", name,
                        name);
    }
    struct stat st;
    if (fstatat(s->store, dir, &st, AT_SYMLINK_NOFOLLOW) != 0 &&
        renameat(s->store, from, s->store, dir) != 0) {
        int e = errno;
        if (lock >= 0)
            rbx_lock_release(lock);
        return rbx_fail(err, RBX_ESYSTEM, "cannot store the image: %s", strerror(e));
    }
    if (fstatat(s->store, meta, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        json_t *doc = json_pack("{s:s, s:I, s:I, s:s, s:s}", "digest", hex, "size_bytes",
                                (json_int_t)bytes, "created", (json_int_t)time(NULL), "source",
                                source, "packages", packages ? packages : "");
        if (doc && node)
            json_object_set_new(doc, "node", json_string(node));
        char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        if (text)
            (void)rbx_write_new_file(s->store, meta, text, strlen(text));
        free(text);
        json_decref(doc);
    }
    char link[96], temp[128], final[96];
    snprintf(link, sizeof link, "../%s", dir);
    snprintf(temp, sizeof temp, "names/.%s.%d", name, (int)getpid());
    snprintf(final, sizeof final, "names/%s", name);
    unlinkat(s->store, temp, 0);
    int rc = symlinkat(link, s->store, temp) == 0 ? renameat(s->store, temp, s->store, final) : -1;
    int e = errno;
    if (lock >= 0)
        rbx_lock_release(lock);
    if (rc != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot name the image: %s", strerror(e));
    fill_info(engine, s->store, name, dir, info);
    return RBX_OK;
}

static rbx_status check_new_name(rbx_engine *engine, const char *name, rbx_error *err)
{
    char why[300];
    if (!rbx_image_name_ok(name, why, sizeof why))
        return rbx_fail(err, RBX_EINVAL, "%s", why);
    rbx_image_place place;
    rbx_error ignored;
    if (rbx_image_locate(engine, name, &place, &ignored) == RBX_OK)
        return rbx_fail(err, RBX_EINVAL,
                        "an image named '%s' exists (runbox images rm %s removes it first)", name,
                        name);
    return RBX_OK;
}

/* What a built image must not keep: device nodes (a sandbox has its own
 * /dev) and set-id bits (images are mounted nosuid; they mean nothing). */
static int scrub(int dirfd, int depth)
{
    DIR *dir = fdopendir(dup(dirfd));
    if (!dir)
        return -1;
    struct dirent *d;
    while ((d = readdir(dir))) {
        struct stat st;
        if (!no_dots(d) || fstatat(dirfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISFIFO(st.st_mode) ||
            S_ISSOCK(st.st_mode)) {
            unlinkat(dirfd, d->d_name, 0);
        } else if (S_ISREG(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID))) {
            int fd = openat(dirfd, d->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            if (fd >= 0) {
                (void)fchmod(fd, st.st_mode & 0777 & ~(mode_t)(S_ISUID | S_ISGID));
                close(fd);
            }
        } else if (S_ISDIR(st.st_mode) && depth < TREE_MAX_DEPTH) {
            int sub = openat(dirfd, d->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                scrub(sub, depth + 1);
                close(sub);
            }
        }
    }
    closedir(dir);
    return 0;
}

/* Every program's LANG=C.UTF-8 (execution/given.c) found in one file: Debian
 * ships C.UTF-8 as a directory of twelve files, which glibc, without a
 * locale archive, looks for one by one under two spellings, opens and maps
 * at every start of a program that calls setlocale(LC_ALL, ""): 26 opens
 * and 12 maps for each bash. The archive is one open and one map (the
 * directory stays for whatever reads it; test_images.py reads bash's maps):
 * a pooled bash execution's CPU 6.37 -> 5.93 ms (bench/RESULTS.md, issue 31,
 * with the command). */
#define LOCALE_ARCHIVE_HOOK                                                                        \
    "--customize-hook=if [ -d \"$1/usr/lib/locale/C.utf8\" ] && "                                  \
    "[ ! -e \"$1/usr/lib/locale/locale-archive\" ]; then "                                        \
    "chroot \"$1\" localedef --add-to-archive /usr/lib/locale/C.utf8 >/dev/null; fi"

/* Packages as mmdebstrap's --include takes them: comma-separated, each a
 * Debian package name (a-z0-9+-. only, so nothing reaches apt as an option
 * or a path). Appended to out. */
static bool add_packages(char *out, size_t size, const char *list, char *why, size_t why_size)
{
    const char *p = list;
    while (p && *p) {
        while (*p == ',' || *p == ' ')
            p++;
        size_t n = strcspn(p, ", ");
        if (!n)
            break;
        bool ok = n < 128 && ((p[0] >= 'a' && p[0] <= 'z') || (p[0] >= '0' && p[0] <= '9'));
        for (size_t i = 0; ok && i < n; i++)
            ok = (p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '+' ||
                 p[i] == '-' || p[i] == '.';
        if (!ok) {
            snprintf(why, why_size,
                     "'%.*s' is not a Debian package name (lower-case letters, digits, '+', "
                     "'-' and '.', starting with a letter or digit)",
                     (int)(n > 80 ? 80 : n), p);
            return false;
        }
        /* Each once, in the order first given. */
        char item[130];
        snprintf(item, sizeof item, ",%.*s,", (int)n, p);
        char padded[8192];
        snprintf(padded, sizeof padded, ",%s,", out);
        if (!strstr(padded, item)) {
            size_t len = strlen(out);
            if (len + n + 2 > size) {
                snprintf(why, why_size, "too many packages (at most %zu characters)", size - 1);
                return false;
            }
            snprintf(out + len, size - len, "%s%.*s", len ? "," : "", (int)n, p);
        }
        p += n;
    }
    return true;
}

static bool suite_ok(const char *suite)
{
    size_t n = strlen(suite);
    if (!n || n > 32)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((suite[i] >= 'a' && suite[i] <= 'z') || (suite[i] >= '0' && suite[i] <= '9') ||
              suite[i] == '-'))
            return false;
    return true;
}

rbx_status rbx_image_build(rbx_engine *engine, const char *name, const char *packages,
                           const char *from, const char *suite, const char *mirror, int log_fd,
                           rbx_image_info *info, rbx_error *err)
{
    if (!engine->is_root)
        return rbx_fail(err, RBX_EINVAL,
                        "building an image needs root (mmdebstrap installs packages as root); "
                        "runbox images import takes one built elsewhere");
    /* Before mmdebstrap's minutes, not after: the new tree is digested. */
    rbx_status status = rbx_nettle_load(err);
    if (status != RBX_OK)
        return status;
    status = check_new_name(engine, name, err);
    if (status != RBX_OK)
        return status;
    char list[4096] = "", why[300], base_suite[64];
    /* The official Node.js: the default image's, and that of an image
     * built from one that has it. */
    bool official_node = false;
    if (!packages && !from && !strcmp(name, "default")) {
        packages = default_packages;
        official_node = true;
    }
    if (from) {
        rbx_image_place place;
        if ((status = rbx_image_locate(engine, from, &place, err)) != RBX_OK)
            return status;
        rbx_image_info base;
        int store = store_open(engine, false, err);
        fill_info(engine, store, from, strrchr(place.tree, '/') + 1, &base);
        close(store);
        official_node = !strcmp(base.node, RBX_NODE_DIST_NOTE);
        if (!base.packages[0])
            return rbx_fail(err, RBX_EINVAL,
                            "--from %s: that image was imported, so which Debian packages it "
                            "holds is unknown; --from takes an image runbox images build made",
                            from);
        const char *at = strstr(base.source, "mmdebstrap ");
        if (!suite && at) { /* the base's suite, kept past base's scope */
            snprintf(base_suite, sizeof base_suite, "%s", at + strlen("mmdebstrap "));
            suite = base_suite;
        }
        if (!add_packages(list, sizeof list, base.packages, why, sizeof why))
            return rbx_fail(err, RBX_EINVAL, "%s", why);
    }
    if (!add_packages(list, sizeof list, packages, why, sizeof why))
        return rbx_fail(err, RBX_EINVAL, "--packages: %s", why);
    if (!list[0])
        return rbx_fail(err, RBX_EINVAL,
                        "no packages: --packages takes Debian packages, comma-separated (the "
                        "image \"default\" has its own list)");
    if (!suite)
        suite = DEFAULT_SUITE;
    if (!suite_ok(suite))
        return rbx_fail(err, RBX_EINVAL,
                        "'%.40s' is not a Debian suite name (trixie, bookworm, stable, ...)",
                        suite);
    if (!mirror)
        mirror = DEFAULT_MIRROR;
    if (strncmp(mirror, "http://", 7) && strncmp(mirror, "https://", 8) &&
        strncmp(mirror, "file://", 7))
        return rbx_fail(err, RBX_EINVAL, "--mirror takes an http://, https:// or file:// URL");

    staging s;
    if ((status = staging_open(engine, &s, err)) != RBX_OK)
        return status;
    char target[4400], include[4200], hook[32 + RBX_NODE_DIST_HOOK_MAX];
    snprintf(target, sizeof target, "%s/tmp/%s", engine->images_dir, s.name);
    snprintf(include, sizeof include, "--include=%s", list);
    static const char hook_option[] = "--customize-hook=";
    memcpy(hook, hook_option, sizeof hook_option);
    rbx_node_dist_hook(hook + strlen(hook_option));
    /* Documentation and translations are no use to a sandbox. */
    const char *argv[16] = {"mmdebstrap", "--quiet", "--variant=essential", "--mode=root", include,
                            "--dpkgopt=path-exclude=/usr/share/doc/*",
                            "--dpkgopt=path-exclude=/usr/share/man/*",
                            "--dpkgopt=path-exclude=/usr/share/locale/*",
                            "--dpkgopt=path-include=/usr/share/locale/locale.alias",
                            LOCALE_ARCHIVE_HOOK};
    size_t argc = 10;
    if (official_node)
        argv[argc++] = hook;
    argv[argc++] = suite;
    argv[argc++] = target;
    argv[argc++] = mirror;
    pid_t pid = fork();
    if (pid == 0) {
        if (log_fd >= 0) {
            dup2(log_fd, 1);
            dup2(log_fd, 2);
        }
        execvp("mmdebstrap", (char *const *)argv);
        dprintf(2, "runbox: cannot run mmdebstrap: %s\n", strerror(errno));
        _exit(127);
    }
    int wstatus = 0;
    while (pid > 0 && waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
        ;
    if (pid < 0 || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
        staging_close(&s);
        return rbx_fail(err, RBX_ESYSTEM,
                        "mmdebstrap failed (%s%d): its output says why (needs the Debian package "
                        "mmdebstrap and the archive at %s)",
                        pid < 0              ? "fork: "
                        : WIFEXITED(wstatus) ? "exit "
                                             : "signal ",
                        pid < 0              ? errno
                        : WIFEXITED(wstatus) ? WEXITSTATUS(wstatus)
                                             : WTERMSIG(wstatus),
                        mirror);
    }
    /* mmdebstrap replaced the directory it was given: open the new one. */
    close(s.fd);
    char path[96];
    snprintf(path, sizeof path, "tmp/%s", s.name);
    s.fd = openat(s.store, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s.fd < 0 || scrub(s.fd, 0) != 0) {
        staging_close(&s);
        return rbx_fail(err, RBX_ESYSTEM, "cannot read what mmdebstrap made: %s", strerror(errno));
    }
    char source[128];
    snprintf(source, sizeof source, "mmdebstrap %s", suite);
    status = commit(engine, &s, name, source, list, official_node ? RBX_NODE_DIST_NOTE : NULL,
                    info, err);
    staging_close(&s);
    return status;
}

rbx_status rbx_image_import(rbx_engine *engine, const char *name, const char *source,
                            bool drop_setid, rbx_image_info *info, rbx_error *err)
{
    rbx_status status = check_new_name(engine, name, err);
    if (status != RBX_OK)
        return status;
    staging s;
    if ((status = staging_open(engine, &s, err)) != RBX_OK)
        return status;
    rbx_unpack_limits limits = {
        .max_bytes = IMPORT_MAX_BYTES, .max_entries = IMPORT_MAX_ENTRIES, .drop_setid = drop_setid};
    status = rbx_image_unpack(s.fd, source, &limits, err);
    if (status == RBX_OK) {
        char absolute[4096];
        const char *shown = realpath(source, absolute) ? absolute : source;
        char what[600];
        snprintf(what, sizeof what, "import %.500s", shown);
        status = commit(engine, &s, name, what, NULL, NULL, info, err);
    }
    staging_close(&s);
    return status;
}

/* --- listing and removal --------------------------------------------------------- */

rbx_status rbx_image_list(rbx_engine *engine, rbx_image_info **infos, size_t *count, rbx_error *err)
{
    *infos = NULL;
    *count = 0;
    int store = store_open(engine, false, err);
    if (store < 0)
        return errno == ENOENT ? RBX_OK : err->status;
    int names = openat(store, "names", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    char self[32];
    snprintf(self, sizeof self, "/proc/self/fd/%d", names);
    struct dirent **entries = NULL;
    int n = names < 0 ? 0 : scandir(self, &entries, no_dots, by_name);
    if (names >= 0)
        close(names);
    rbx_status status = RBX_OK;
    if (n > 0 && !(*infos = calloc((size_t)n, sizeof **infos)))
        status = rbx_fail(err, RBX_ESYSTEM, "out of memory");
    for (int i = 0; i < (n > 0 ? n : 0); i++) {
        char dir[80];
        if (status == RBX_OK && entries[i]->d_name[0] != '.' &&
            read_name(store, entries[i]->d_name, dir, sizeof dir))
            fill_info(engine, store, entries[i]->d_name, dir, &(*infos)[(*count)++]);
        free(entries[i]);
    }
    free(entries);
    close(store);
    return status;
}

rbx_status rbx_image_list_nameable(rbx_engine *engine, rbx_image_info **infos, size_t *count,
                                   rbx_error *err)
{
    rbx_image_info host;
    host_info(engine, &host);
    rbx_status status = rbx_image_list(engine, infos, count, err);
    if (status != RBX_OK)
        return status;
    size_t kept = 0;
    for (size_t i = 0; i < *count; i++)
        if ((*infos)[i].allowed)
            (*infos)[kept++] = (*infos)[i];
    *count = kept;
    if (host.allowed) {
        rbx_image_info *more = realloc(*infos, (kept + 1) * sizeof *more);
        if (!more) {
            free(*infos);
            *infos = NULL;
            *count = 0;
            return rbx_fail(err, RBX_ESYSTEM, "out of memory");
        }
        more[kept] = host;
        *infos = more;
        *count = kept + 1;
    }
    return RBX_OK;
}

rbx_status rbx_image_remove(rbx_engine *engine, const char *name, rbx_error *err)
{
    char why[300];
    if (!rbx_image_name_ok(name, why, sizeof why))
        return rbx_fail(err, RBX_EINVAL, "%s", why);
    rbx_image_place place;
    rbx_status status = rbx_image_locate(engine, name, &place, err);
    if (status != RBX_OK)
        return status;
    int store = store_open(engine, false, err);
    if (store < 0)
        return err->status;
    int lock = rbx_lock_dir(store);
    char dir[80], path[112];
    snprintf(path, sizeof path, "names/%s", name);
    bool had = read_name(store, name, dir, sizeof dir) && unlinkat(store, path, 0) == 0;
    /* The tree goes when no other name uses it; sandboxes running on it
     * keep what they have open. */
    bool shared = false;
    DIR *names = fdopendir(openat(store, "names", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    for (struct dirent *d; had && names && (d = readdir(names));) {
        char other[80];
        if (d->d_name[0] != '.' && read_name(store, d->d_name, other, sizeof other) &&
            !strcmp(other, dir))
            shared = true;
    }
    if (names)
        closedir(names);
    if (had && !shared) {
        char grave[80], meta[96];
        rbx_trash_name(grave, sizeof grave, "image");
        snprintf(path, sizeof path, "tmp/%s", grave);
        snprintf(meta, sizeof meta, "%s.json", dir);
        if (renameat(store, dir, store, path) == 0) {
            unlinkat(store, meta, 0);
            int tmp = openat(store, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (tmp >= 0) {
                rbx_remove_tree(tmp, grave);
                close(tmp);
            }
        }
    }
    if (lock >= 0)
        rbx_lock_release(lock);
    close(store);
    return had ? RBX_OK
               : rbx_fail(err, RBX_ENOENT, "no image named '%s' (removed meanwhile)", name);
}
