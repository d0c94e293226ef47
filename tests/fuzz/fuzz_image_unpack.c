/* The image unpacker (image_unpack.h) on a hostile archive: the input is
 * written to a file and unpacked into an empty directory, root-N, of a
 * scratch directory that also holds a canary. Whatever it returns, the
 * tree it leaves must be one a sandbox may be given, checked here by a
 * walk of our own that never follows a link:
 *  - nothing was written beside the root: the canary directory holds its
 *    one file, unchanged, and the scratch directory nothing new (the
 *    unpacker's own scratch, under TMPDIR, is gone again);
 *  - only directories, regular files and links; no set-uid or set-gid
 *    file; regular files hold at most max_bytes between them; a hard
 *    link's every name is inside the tree; a link's target, taken by its
 *    text from the link's directory (or from the root when absolute),
 *    never climbs above the root;
 *  - a refusal comes with a message.
 *
 * Header checksums are made right before the input is written: libarchive
 * stops at a wrong one, so most mutations of a header would never reach
 * the unpacker. The input's length picks drop_setid (odd: drop), so both
 * ways of treating a set-id file are searched without a knob byte in front
 * of the archive: the seeds stay plain tar files. */
#include "fuzz.h"

#include "base/fsutil.h"
#include "images/unpack.h"
#include "runbox.h"
#include "base/fsutil.h" /* rbx_remove_tree, to clear the root between inputs */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_BYTES (4u << 20)
#define MAX_ENTRIES 2000
#define TAR_BLOCK 512
#define CANARY_TEXT "written before the image, read after it\n"

static char scratch[64]; /* /tmp/fuzz-image-unpack-XXXXXX */
static char input_path[96];
static int scratch_fd = -1;
static unsigned long inputs;

static void remove_scratch(void)
{
    if (scratch[0])
        rbx_remove_tree(AT_FDCWD, scratch);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(scratch, sizeof scratch, "/tmp/fuzz-image-unpack-XXXXXX");
    if (!mkdtemp(scratch))
        abort();
    atexit(remove_scratch);
    snprintf(input_path, sizeof input_path, "%s/input", scratch);
    scratch_fd = open(scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (scratch_fd < 0 || mkdirat(scratch_fd, "canary", 0755) != 0 ||
        mkdirat(scratch_fd, "tmp", 0700) != 0)
        abort();
    int fd = openat(scratch_fd, "canary/file", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, CANARY_TEXT, strlen(CANARY_TEXT)) != (ssize_t)strlen(CANARY_TEXT) ||
        close(fd) != 0)
        abort();
    /* A layout's tar is unpacked into a scratch directory of the
     * unpacker's own, made under TMPDIR: here, where it can be seen. */
    char tmp[96];
    snprintf(tmp, sizeof tmp, "%s/tmp", scratch);
    setenv("TMPDIR", tmp, 1);
    return 0;
}

/* ---- the input ------------------------------------------------------------- */

/* A tar header's checksum: the sum of its bytes with the checksum field
 * (148..155) taken as spaces, written as six octal digits, NUL, space.
 * Made for every block at a block boundary that carries ustar's magic
 * (POSIX "ustar\0" or GNU "ustar "). */
static void fix_checksums(uint8_t *tar, size_t size)
{
    for (size_t at = 0; at + TAR_BLOCK <= size; at += TAR_BLOCK) {
        uint8_t *h = tar + at;
        if (memcmp(h + 257, "ustar", 5) != 0)
            continue;
        unsigned sum = 0;
        for (size_t i = 0; i < TAR_BLOCK; i++)
            sum += i >= 148 && i < 156 ? ' ' : h[i];
        char field[9];
        snprintf(field, sizeof field, "%06o", sum & 0777777);
        memcpy(h + 148, field, 6);
        h[154] = 0;
        h[155] = ' ';
    }
}

static void write_input(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        abort();
    memcpy(copy, data, size);
    fix_checksums(copy, size);
    int fd =
        openat(scratch_fd, "input", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || (size && write(fd, copy, size) != (ssize_t)size) || close(fd) != 0)
        abort();
    free(copy);
}

/* ---- beside the root --------------------------------------------------------- */

/* The canary directory holds its one file, with its text and one name. */
static void check_canary(void)
{
    int dir = openat(scratch_fd, "canary", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    FUZZ_CHECK(dir >= 0);
    DIR *listing = fdopendir(dir);
    FUZZ_CHECK(listing);
    int names = 0;
    for (struct dirent *d; (d = readdir(listing));)
        if (strcmp(d->d_name, ".") && strcmp(d->d_name, "..")) {
            FUZZ_CHECK(!strcmp(d->d_name, "file"));
            names++;
        }
    FUZZ_CHECK(names == 1);
    struct stat st;
    FUZZ_CHECK(fstatat(dirfd(listing), "file", &st, AT_SYMLINK_NOFOLLOW) == 0);
    FUZZ_CHECK(S_ISREG(st.st_mode) && st.st_nlink == 1 && (st.st_mode & 07777) == 0644);
    char text[sizeof CANARY_TEXT + 8];
    int fd = openat(dirfd(listing), "file", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    FUZZ_CHECK(fd >= 0);
    ssize_t n = read(fd, text, sizeof text);
    close(fd);
    FUZZ_CHECK(n == (ssize_t)strlen(CANARY_TEXT) && !memcmp(text, CANARY_TEXT, (size_t)n));
    closedir(listing);
}

/* The scratch directory holds the canary, TMPDIR (empty again), the
 * input (one name) and this input's root, nothing else. */
static void check_scratch(const char *root)
{
    DIR *listing = fdopendir(fcntl(scratch_fd, F_DUPFD_CLOEXEC, 0));
    FUZZ_CHECK(listing);
    rewinddir(listing); /* the duplicate shares the offset of earlier listings */
    int names = 0;
    for (struct dirent *d; (d = readdir(listing));) {
        if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
            continue;
        if (strcmp(d->d_name, "canary") && strcmp(d->d_name, "tmp") && strcmp(d->d_name, "input") &&
            strcmp(d->d_name, root)) {
            fprintf(stderr, "unexpected entry beside the root: %s\n", d->d_name);
            FUZZ_CHECK(!"an entry appeared beside the root");
        }
        names++;
    }
    closedir(listing);
    FUZZ_CHECK(names == 4);
    struct stat st;
    FUZZ_CHECK(fstatat(scratch_fd, "input", &st, AT_SYMLINK_NOFOLLOW) == 0);
    FUZZ_CHECK(S_ISREG(st.st_mode) && st.st_nlink == 1);
    int tmp = openat(scratch_fd, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    FUZZ_CHECK(tmp >= 0);
    DIR *left = fdopendir(tmp);
    FUZZ_CHECK(left);
    for (struct dirent *d; (d = readdir(left));)
        if (strcmp(d->d_name, ".") && strcmp(d->d_name, "..")) {
            fprintf(stderr, "the unpacker's scratch directory is left: tmp/%s\n", d->d_name);
            FUZZ_CHECK(!"the unpacker's scratch directory was removed");
        }
    closedir(left);
}

/* ---- the tree ------------------------------------------------------------------- */

typedef struct inode {
    dev_t dev;
    ino_t ino;
    nlink_t links; /* names it has on the filesystem */
    nlink_t seen;  /* names the walk found in the tree */
} inode;

typedef struct tree {
    uint64_t bytes; /* regular files', each inode once */
    inode *inodes;  /* regular files with more than one name */
    size_t count, cap;
} tree;

/* Counts a regular file's bytes the first time its inode is seen. */
static void count_file(tree *t, const struct stat *st)
{
    if (st->st_nlink > 1) {
        for (size_t i = 0; i < t->count; i++)
            if (t->inodes[i].dev == st->st_dev && t->inodes[i].ino == st->st_ino) {
                t->inodes[i].seen++;
                return;
            }
        if (t->count == t->cap) {
            t->cap = t->cap ? t->cap * 2 : 16;
            t->inodes = realloc(t->inodes, t->cap * sizeof *t->inodes);
            if (!t->inodes)
                abort();
        }
        t->inodes[t->count++] = (inode){st->st_dev, st->st_ino, st->st_nlink, 1};
    }
    t->bytes += (uint64_t)st->st_size;
}

/* The link's target by its text alone: from the link's directory, depth
 * levels below the root (from the root when absolute), each ".." one
 * level up. It may never go above the root. */
static bool target_stays_inside(int depth, const char *target)
{
    if (target[0] == '/')
        depth = 0;
    for (const char *p = target; *p;) {
        const char *end = strchr(p, '/');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            depth--;
        else if (n && !(n == 1 && p[0] == '.'))
            depth++;
        if (depth < 0)
            return false;
        p += n + (end != NULL);
    }
    return true;
}

/* Every entry of the directory dir, depth levels below the root. */
static void walk(tree *t, int dir, int depth)
{
    FUZZ_CHECK(depth < 512); /* the unpacker stops members at 128 levels */
    int fd = fcntl(dir, F_DUPFD_CLOEXEC, 0);
    DIR *listing = fd >= 0 ? fdopendir(fd) : NULL;
    FUZZ_CHECK(listing);
    for (struct dirent *d; (d = readdir(listing));) {
        const char *name = d->d_name;
        if (!strcmp(name, ".") || !strcmp(name, ".."))
            continue;
        FUZZ_CHECK(name[0] && !strchr(name, '/'));
        struct stat st;
        FUZZ_CHECK(fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0);
        if (S_ISDIR(st.st_mode)) {
            int sub = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            FUZZ_CHECK(sub >= 0);
            walk(t, sub, depth + 1);
            close(sub);
        } else if (S_ISREG(st.st_mode)) {
            if (st.st_mode & (S_ISUID | S_ISGID))
                fprintf(stderr, "set-id file %s, mode %04o\n", name, st.st_mode & 07777);
            FUZZ_CHECK(!(st.st_mode & (S_ISUID | S_ISGID)));
            count_file(t, &st);
        } else if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX + 1];
            ssize_t n = readlinkat(dir, name, target, sizeof target - 1);
            FUZZ_CHECK(n > 0);
            target[n] = 0;
            if (!target_stays_inside(depth, target))
                fprintf(stderr, "link %s -> %s, %d levels down, climbs out\n", name, target, depth);
            FUZZ_CHECK(target_stays_inside(depth, target));
        } else {
            fprintf(stderr, "%s has mode %06o\n", name, st.st_mode);
            FUZZ_CHECK(!"only directories, regular files and links");
        }
    }
    closedir(listing);
}

static void check_tree(int root)
{
    tree t = {0};
    walk(&t, root, 0);
    FUZZ_CHECK(t.bytes <= MAX_BYTES);
    /* A name the walk did not find is outside the tree. */
    for (size_t i = 0; i < t.count; i++)
        FUZZ_CHECK(t.inodes[i].seen == t.inodes[i].links);
    free(t.inodes);
}

/* ---- one input ---------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    write_input(data, size);
    char root_name[32];
    snprintf(root_name, sizeof root_name, "root-%lu", inputs++);
    FUZZ_CHECK(mkdirat(scratch_fd, root_name, 0755) == 0);
    int root = openat(scratch_fd, root_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    FUZZ_CHECK(root >= 0);

    rbx_unpack_limits limits = {
        .max_bytes = MAX_BYTES, .max_entries = MAX_ENTRIES, .drop_setid = size & 1};
    rbx_error err = {0};
    rbx_status status = rbx_image_unpack(root, input_path, &limits, &err);
    if (status != RBX_OK)
        FUZZ_CHECK(err.status == status && err.message[0]);

    check_canary();
    check_scratch(root_name);
    check_tree(root);
    close(root);
    FUZZ_CHECK(rbx_remove_tree(scratch_fd, root_name) == 0);
    return 0;
}
