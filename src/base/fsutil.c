/* Host-side tree walks that never follow a symbolic link. Sandboxed code can
 * plant links anywhere in its session; every walk here goes through openat()
 * with O_NOFOLLOW from a directory fd, so a link is removed or counted as a
 * link, never entered (the Judge0 escapes, CVE-2024-28185/28189). */
#include "base/fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Deeper trees are flattened rather than walked with one fd per level, so a
 * hostile 100,000-level tree cannot exhaust file descriptors or the stack. */
#define WALK_MAX_DEPTH 32
/* Counting never changes the tree, so it cannot flatten: it keeps one fd
 * per level and stops descending here (a sized session disk is measured
 * by its filesystem instead). */
#define COUNT_MAX_DEPTH 256

/* whole is false for a directory whose entries were not walked (deeper
 * than COUNT_MAX_DEPTH). */
typedef int (*visit_fn)(int dirfd, const char *name, const struct stat *st, bool whole,
                        void *user);

static int walk(int topfd, DIR *dir, int depth, visit_fn leave, void *user, unsigned *flattened);

/* chmod on a name follows a link at its end (fchmodat's flag 0), and
 * fchmod refuses an O_PATH descriptor: the mode changes through
 * /proc/self/fd/N, which names the directory that was opened, never a
 * link. O_PATH needs no permission on the directory itself. */
int rbx_unlock_dir_at(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char self[32];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    int rc = chmod(self, 0700);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

/* Opens a directory below dirfd for reading, never through a link. Removal
 * may have to make a directory the sandbox locked readable first; it is
 * known to be a directory, not a link, and nothing runs in it. */
static DIR *open_dir_at(int dirfd, const char *name, bool for_removal)
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == EACCES && for_removal && rbx_unlock_dir_at(dirfd, name) == 0)
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    if (for_removal)
        (void)fchmod(fd, 0700); /* writable too, to unlink its entries */
    DIR *dir = fdopendir(fd);
    if (!dir)
        close(fd);
    return dir;
}

static int walk_entry(int topfd, int dirfd, const char *name, int depth, visit_fn leave, void *user,
                      unsigned *flattened)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : -1;
    if (S_ISDIR(st.st_mode)) {
        if (depth >= COUNT_MAX_DEPTH && !flattened)
            return leave(dirfd, name, &st, false, user); /* counting: deeper is not counted */
        if (depth >= WALK_MAX_DEPTH && flattened && topfd != dirfd) {
            /* Move the subtree up next to the top; a later pass of the top
             * walks it, with none of this walk's descriptors still open. */
            char moved[64];
            snprintf(moved, sizeof moved, ".rbx-flat-%u-%d", (*flattened)++, getpid());
            return renameat(dirfd, name, topfd, moved);
        }
        DIR *sub = open_dir_at(dirfd, name, flattened != NULL);
        if (!sub)
            return -1;
        int rc = walk(topfd, sub, depth + 1, leave, user, flattened);
        closedir(sub);
        if (rc != 0)
            return rc;
    }
    return leave(dirfd, name, &st, true, user);
}

/* One descriptor per level: the directory stream's own. */
static int walk(int topfd, DIR *dir, int depth, visit_fn leave, void *user, unsigned *flattened)
{
    int fd = dirfd(dir);
    for (;;) {
        errno = 0;
        struct dirent *entry = readdir(dir);
        if (!entry)
            return errno ? -1 : 0;
        if (!strcmp(entry->d_name, ".") || !strcmp(entry->d_name, ".."))
            continue;
        if (walk_entry(depth == 0 ? fd : topfd, fd, entry->d_name, depth, leave, user, flattened) !=
            0)
            return -1;
    }
}

static int remove_one(int dirfd, const char *name, const struct stat *st, bool whole,
                      void *user)
{
    (void)whole;
    (void)user;
    if (unlinkat(dirfd, name, S_ISDIR(st->st_mode) ? AT_REMOVEDIR : 0) != 0 && errno != ENOENT)
        return -1;
    return 0;
}

static int count_one(int dirfd, const char *name, const struct stat *st, bool whole,
                     void *user)
{
    (void)dirfd;
    (void)name;
    (void)whole;
    *(uint64_t *)user += (uint64_t)st->st_blocks * 512;
    return 0;
}

/* Walks the tree at name below dirfd, then visits name itself. Entries that
 * were flattened to the top while walking are swept by repeating the walk of
 * the top until it is empty (removal) or stable (counting). */
static int walk_tree(int parent, const char *name, visit_fn leave, void *user, bool repeat)
{
    struct stat st;
    if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return leave(parent, name, &st, true, user);
    DIR *top = open_dir_at(parent, name, repeat);
    if (!top)
        return -1;
    unsigned flattened = 0;
    int rc = 0;
    for (;;) {
        unsigned before = flattened;
        rewinddir(top);
        rc = walk(dirfd(top), top, 0, leave, user, repeat ? &flattened : NULL);
        if (rc != 0 || !repeat || flattened == before)
            break;
    }
    closedir(top);
    if (rc != 0)
        return rc;
    return leave(parent, name, &st, true, user);
}

int rbx_remove_tree(int dirfd, const char *name)
{
    return walk_tree(dirfd, name, remove_one, NULL, true);
}

int rbx_tree_usage(int dirfd, const char *name, uint64_t *bytes)
{
    *bytes = 0;
    return walk_tree(dirfd, name, count_one, bytes, false);
}

struct change_search {
    time_t since;
    size_t left;
    bool changed;
};

static int look_for_change(int dirfd, const char *name, const struct stat *st, bool whole,
                           void *user)
{
    (void)dirfd;
    (void)name;
    struct change_search *search = user;
    /* ctime: the kernel sets it on a change (a write, a removal in a
     * directory, a utime; not an fallocate within the file's size), and
     * nothing in a sandbox can set it back. */
    if (!whole || search->left == 0 || st->st_ctim.tv_sec >= search->since) {
        search->changed = true;
        return -1; /* stops the walk */
    }
    search->left--;
    return 0;
}

bool rbx_tree_unchanged_since(int dirfd, const char *name, time_t since, size_t entries_max)
{
    struct change_search search = {since, entries_max, false};
    return walk_tree(dirfd, name, look_for_change, &search, false) == 0 && !search.changed;
}

int rbx_open_regular(int dirfd, const char *path, int flags)
{
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
     * writer forever (a program's `mkfifo` must not hold a server thread);
     * O_NOCTTY: a terminal never becomes ours. Regular files ignore both. */
    int fd = openat(dirfd, path, flags | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
}

int rbx_open_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
    struct open_how how = {
        .flags = (uint64_t)(flags | O_CLOEXEC),
        .mode = (flags & O_CREAT) ? mode : 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
    };
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

bool rbx_link_stays_inside(const char *path, const char *target)
{
    if (!target[0])
        return false;
    int depth = 0;
    if (target[0] != '/')
        for (const char *p = path; (p = strchr(p, '/')); p++)
            depth++; /* directories above the link, inside the tree */
    for (const char *p = target; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0)
                return false;
        } else if (n > 0 && !(n == 1 && p[0] == '.')) {
            depth++;
        }
        p += n + (p[n] == '/');
    }
    return true;
}

int rbx_write_new_file(int dirfd, const char *name, const void *data, size_t len)
{
    /* Whatever is at name (a link, a FIFO, a tree) was made by someone
     * else: it goes, and the new file is created, never opened. */
    if (rbx_remove_tree(dirfd, name) != 0)
        return -1;
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    if (rbx_write_all(fd, data, len) != 0) {
        int saved = errno;
        close(fd);
        unlinkat(dirfd, name, 0);
        errno = saved;
        return -1;
    }
    return close(fd);
}

int rbx_lock_dir(int dirfd)
{
    int fd = openat(dirfd, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0)
        while (flock(fd, LOCK_EX) != 0 && errno == EINTR)
            ;
    return fd;
}

void rbx_lock_release(int fd)
{
    if (fd < 0)
        return;
    (void)flock(fd, LOCK_UN);
    close(fd);
}

int rbx_read_number(const char *path, long long *value)
{
    char text[32];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    char *end;
    errno = 0;
    *value = strtoll(text, &end, 10);
    return end == text || errno ? -1 : 0;
}

uint64_t rbx_read_count(const char *path)
{
    long long value;
    return path[0] && rbx_read_number(path, &value) == 0 && value > 0 ? (uint64_t)value : 0;
}

ssize_t rbx_write_nosignal(int fd, const void *data, size_t len)
{
    sigset_t pipe_only, old, pending;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    /* One already pending (another write of this thread's, or the
     * process's) is left for whoever it is for. */
    bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    ssize_t n = write(fd, data, len);
    int error = errno;
    if (n < 0 && error == EPIPE && !was_pending) {
        static const struct timespec now = {0};
        while (sigtimedwait(&pipe_only, NULL, &now) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = error;
    return n;
}

int rbx_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int rbx_read_all(int fd, void *data, size_t len)
{
    char *p = data;
    while (len) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Copying is only done to migrate sessions, whose trees are not live. A
 * deeper tree than this is cut there (its deeper levels are left out):
 * one descriptor is open per level. */
#define COPY_MAX_DEPTH 200

static int copy_file_data(int src_dirfd, const char *name, int dst_dirfd, mode_t mode)
{
    int in = rbx_open_regular(src_dirfd, name, O_RDONLY);
    if (in < 0)
        return -1;
    int out = openat(dst_dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    int rc = out < 0 ? -1 : 0;
    for (ssize_t n = 1; rc == 0 && n > 0;) {
        n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
        if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL))
            n = sendfile(out, in, NULL, 1 << 30); /* across filesystems on older kernels */
        if (n < 0)
            rc = -1;
    }
    int saved = errno;
    close(in);
    if (out >= 0 && close(out) != 0 && rc == 0)
        rc = -1;
    errno = saved;
    return rc;
}

static int copy_entry(int src, int dst, const char *name, const struct stat *st, int depth);

static int copy_dir(int src, int dst, int depth)
{
    int fd = fcntl(src, F_DUPFD_CLOEXEC, 0);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    rewinddir(dir);
    int rc = 0;
    struct dirent *entry;
    while (rc == 0 && (errno = 0, entry = readdir(dir))) {
        struct stat st;
        if (!strcmp(entry->d_name, ".") || !strcmp(entry->d_name, ".."))
            continue;
        if (fstatat(src, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue; /* gone meanwhile */
        rc = copy_entry(src, dst, entry->d_name, &st, depth);
    }
    if (rc == 0 && errno)
        rc = -1;
    closedir(dir);
    return rc;
}

static int copy_entry(int src, int dst, const char *name, const struct stat *st, int depth)
{
    mode_t mode = st->st_mode & 0777 & ~(mode_t)(S_ISUID | S_ISGID);
    int rc;
    if (S_ISDIR(st->st_mode)) {
        if (depth >= COPY_MAX_DEPTH)
            return 0;
        if (mkdirat(dst, name, 0700) != 0)
            return -1;
        int from = openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int to = openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        rc = from >= 0 && to >= 0 ? copy_dir(from, to, depth + 1) : -1;
        int saved = errno;
        if (from >= 0)
            close(from);
        if (to >= 0)
            close(to);
        errno = saved;
        mode |= st->st_mode & S_ISVTX;
    } else if (S_ISREG(st->st_mode)) {
        rc = copy_file_data(src, name, dst, 0600);
    } else if (S_ISLNK(st->st_mode)) {
        char target[4096];
        ssize_t n = readlinkat(src, name, target, sizeof target - 1);
        if (n < 0)
            return -1;
        target[n] = 0;
        rc = symlinkat(target, dst, name);
    } else if (S_ISFIFO(st->st_mode)) {
        rc = mkfifoat(dst, name, 0600);
    } else {
        return 0; /* sockets and devices: nothing a session could use again */
    }
    if (rc != 0)
        return -1;
    if (fchownat(dst, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW) != 0 && errno != EPERM)
        return -1;
    if (!S_ISLNK(st->st_mode) && fchmodat(dst, name, mode, 0) != 0)
        return -1;
    struct timespec times[2] = {st->st_atim, st->st_mtim};
    return utimensat(dst, name, times, AT_SYMLINK_NOFOLLOW);
}

int rbx_copy_tree(int src_dirfd, int dst_dirfd)
{
    return copy_dir(src_dirfd, dst_dirfd, 0);
}

int rbx_private_dir_at(int dirfd, const char *name)
{
    if (mkdirat(dirfd, name, 0700) != 0 && errno != EEXIST)
        return -1;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && fchmod(fd, 0700) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

/* Also called in the sandbox's child: system calls only. */
int rbx_mkdir_p(const char *path, mode_t mode)
{
    char buf[4096];
    size_t len = strlen(path);
    if (len >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, mode) != 0 && errno != EEXIST)
        return -1;
    return 0;
}
