/* Helpers shared by the unit tests: temporary directories, canaries that
 * must survive a removal, fd counting, and the switch for tests of known
 * engine bugs. Included after cmocka.h by each test file. */
#ifndef RBX_UNIT_UTIL_H
#define RBX_UNIT_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* mkdtemp under /tmp; path must hold at least 64 bytes. */
static inline void make_temp_dir(char *path, size_t size, const char *tag)
{
    snprintf(path, size, "/tmp/rbx-unit-%s-XXXXXX", tag);
    assert_non_null(mkdtemp(path));
}

/* Removes a test's own temporary tree with rm -rf (which copes with any
 * depth and with chmod 000 directories as root), independently of the
 * engine code under test. */
static inline void remove_temp_tree(const char *path)
{
    if (!path || !path[0])
        return;
    assert_true(strncmp(path, "/tmp/rbx-unit-", 14) == 0);
    char *argv[] = {"rm", "-rf", "--", (char *)path, NULL};
    pid_t pid;
    assert_int_equal(posix_spawnp(&pid, "rm", NULL, NULL, argv, environ), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static inline int open_dir_fd(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    return fd;
}

static inline void write_file_at(int dirfd, const char *name, const char *data, size_t len)
{
    int fd = openat(dirfd, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

static inline void assert_file_content_at(int dirfd, const char *name, const char *expected)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    assert_true(fd >= 0);
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    assert_true(n >= 0);
    buf[n] = 0;
    assert_string_equal(buf, expected);
}

static inline bool exists_at(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Entries of a directory other than . and .. */
static inline size_t count_entries_at(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    assert_true(fd >= 0);
    DIR *dir = fdopendir(fd);
    assert_non_null(dir);
    size_t n = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)))
        if (strcmp(entry->d_name, ".") && strcmp(entry->d_name, ".."))
            n++;
    closedir(dir);
    return n;
}

static inline size_t open_fd_count(void)
{
    DIR *dir = opendir("/proc/self/fd");
    assert_non_null(dir);
    size_t n = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)))
        if (entry->d_name[0] != '.')
            n++;
    closedir(dir);
    return n - 1; /* the directory stream's own fd */
}

/* A canary: a directory outside every tree under test, which hostile links
 * point into. It holds keep.txt and sub/inner.txt. */
static inline void make_canary(char *path, size_t size)
{
    make_temp_dir(path, size, "canary");
    assert_int_equal(chmod(path, 0755), 0);
    int fd = open_dir_fd(path);
    write_file_at(fd, "keep.txt", "canary\n", 7);
    assert_int_equal(mkdirat(fd, "sub", 0755), 0);
    int sub = openat(fd, "sub", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(sub >= 0);
    write_file_at(sub, "inner.txt", "inner\n", 6);
    close(sub);
    close(fd);
}

static inline void assert_canary_intact(const char *path)
{
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0755);
    int fd = open_dir_fd(path);
    assert_int_equal(count_entries_at(fd, "."), 2);
    assert_file_content_at(fd, "keep.txt", "canary\n");
    assert_int_equal(fstatat(fd, "keep.txt", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(st.st_mode & 07777, 0644);
    assert_int_equal(count_entries_at(fd, "sub"), 1);
    int sub = openat(fd, "sub", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(sub >= 0);
    assert_file_content_at(sub, "inner.txt", "inner\n");
    close(sub);
    close(fd);
}

/* Creates a chain name/d/d/.../d of depth directories below dirfd, with
 * at most two fds open at a time; returns an fd of the deepest one. */
static inline int make_chain_at(int dirfd, const char *name, int depth)
{
    assert_int_equal(mkdirat(dirfd, name, 0755), 0);
    int cur = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(cur >= 0);
    for (int i = 0; i < depth; i++) {
        assert_int_equal(mkdirat(cur, "d", 0755), 0);
        int next = openat(cur, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(next >= 0);
        close(cur);
        cur = next;
    }
    return cur;
}

/* Plants, in the directory dirfd, what hostile code would leave behind: links
 * to the canary directory, to a file and a directory inside it, a dangling
 * link, and a chmod 000 directory holding another link and a file. */
static inline void plant_hostile_entries(int dirfd, const char *canary)
{
    char target[256];
    assert_int_equal(symlinkat(canary, dirfd, "to_canary"), 0);
    snprintf(target, sizeof target, "%s/keep.txt", canary);
    assert_int_equal(symlinkat(target, dirfd, "to_keep"), 0);
    snprintf(target, sizeof target, "%s/sub", canary);
    assert_int_equal(symlinkat(target, dirfd, "to_sub"), 0);
    snprintf(target, sizeof target, "%s/missing", canary);
    assert_int_equal(symlinkat(target, dirfd, "dangling"), 0);
    assert_int_equal(mkdirat(dirfd, "locked", 0755), 0);
    int locked = openat(dirfd, "locked", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(locked >= 0);
    assert_int_equal(symlinkat(canary, locked, "to_canary"), 0);
    write_file_at(locked, "secret.txt", "s\n", 2);
    assert_int_equal(mkdirat(locked, "inner", 0755), 0);
    assert_int_equal(fchmodat(locked, "inner", 0, 0), 0);
    assert_int_equal(fchmod(locked, 0), 0);
    close(locked);
}

#endif
