/* Unit tests of fsutil.c: removal and disk usage of trees that hostile code
 * may have shaped (links out, unreadable and very deep directories), and
 * rbx_mkdir_p. Every link points into a canary directory made for the test. */
#include "unit_util.h"

#include "base/fsutil.h"

#include <errno.h>
#include <sys/resource.h>
#include <time.h>

typedef struct fixture {
    char base[64];   /* the directory the trees under test live in */
    int base_fd;
    char canary[64]; /* what links point to; must survive every removal */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    make_temp_dir(f->base, sizeof f->base, "fs");
    f->base_fd = open_dir_fd(f->base);
    make_canary(f->canary, sizeof f->canary);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    close(f->base_fd);
    remove_temp_tree(f->base);
    remove_temp_tree(f->canary);
    free(f);
    return 0;
}

static int open_at(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    assert_true(fd >= 0);
    return fd;
}

static uint64_t allocated_at(int dirfd, const char *name)
{
    struct stat st;
    assert_int_equal(fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW), 0);
    return (uint64_t)st.st_blocks * 512;
}

static void write_bytes_at(int dirfd, const char *name, size_t len)
{
    char *data = malloc(len ? len : 1);
    assert_non_null(data);
    memset(data, 'x', len);
    write_file_at(dirfd, name, data, len);
    free(data);
}

/* ---- rbx_remove_tree -------------------------------------------------- */

static void remove_tree_removes_a_file(void **state)
{
    fixture *f = *state;
    write_file_at(f->base_fd, "file", "data", 4);
    assert_int_equal(rbx_remove_tree(f->base_fd, "file"), 0);
    assert_false(exists_at(f->base_fd, "file"));
}

static void remove_tree_of_a_missing_name_succeeds(void **state)
{
    fixture *f = *state;
    assert_int_equal(rbx_remove_tree(f->base_fd, "nothing-here"), 0);
    assert_int_equal(count_entries_at(f->base_fd, "."), 0);
}

static void remove_tree_removes_a_nested_tree_and_nothing_else(void **state)
{
    fixture *f = *state;
    write_file_at(f->base_fd, "neighbor", "n", 1);
    assert_int_equal(mkdirat(f->base_fd, "top", 0755), 0);
    int top = open_at(f->base_fd, "top");
    write_file_at(top, "a.txt", "a", 1);
    assert_int_equal(mkdirat(top, "empty", 0755), 0);
    assert_int_equal(mkdirat(top, "dir", 0755), 0);
    int dir = open_at(top, "dir");
    write_bytes_at(dir, "big", 100000);
    write_file_at(dir, ".hidden", "h", 1);
    assert_int_equal(mkfifoat(dir, "fifo", 0600), 0);
    close(dir);
    close(top);
    assert_int_equal(rbx_remove_tree(f->base_fd, "top"), 0);
    assert_false(exists_at(f->base_fd, "top"));
    assert_int_equal(count_entries_at(f->base_fd, "."), 1);
    assert_file_content_at(f->base_fd, "neighbor", "n");
}

static void remove_tree_unlinks_links_without_following_them(void **state)
{
    fixture *f = *state;
    assert_int_equal(mkdirat(f->base_fd, "top", 0755), 0);
    int top = open_at(f->base_fd, "top");
    plant_hostile_entries(top, f->canary);
    close(top);
    assert_int_equal(rbx_remove_tree(f->base_fd, "top"), 0);
    assert_false(exists_at(f->base_fd, "top"));
    assert_canary_intact(f->canary);
}

static void remove_tree_of_a_link_removes_only_the_link(void **state)
{
    fixture *f = *state;
    assert_int_equal(symlinkat(f->canary, f->base_fd, "top"), 0);
    assert_int_equal(rbx_remove_tree(f->base_fd, "top"), 0);
    assert_false(exists_at(f->base_fd, "top"));
    assert_canary_intact(f->canary);
}

static void remove_tree_removes_unreadable_directories(void **state)
{
    fixture *f = *state;
    assert_int_equal(mkdirat(f->base_fd, "top", 0755), 0);
    int top = open_at(f->base_fd, "top");
    assert_int_equal(mkdirat(top, "locked", 0755), 0);
    int locked = open_at(top, "locked");
    write_file_at(locked, "f", "x", 1);
    assert_int_equal(mkdirat(locked, "deeper", 0), 0);
    assert_int_equal(fchmod(locked, 0), 0);
    close(locked);
    assert_int_equal(fchmod(top, 0), 0);
    close(top);
    assert_int_equal(rbx_remove_tree(f->base_fd, "top"), 0);
    assert_false(exists_at(f->base_fd, "top"));
}

static void remove_tree_removes_a_200_level_chain_with_links_at_the_bottom(void **state)
{
    fixture *f = *state;
    write_file_at(f->base_fd, "neighbor", "n", 1);
    int bottom = make_chain_at(f->base_fd, "top", 200);
    plant_hostile_entries(bottom, f->canary);
    close(bottom);
    size_t fds = open_fd_count();
    assert_int_equal(rbx_remove_tree(f->base_fd, "top"), 0);
    assert_int_equal(open_fd_count(), fds);
    /* Nothing is left next to the tree either (no flattened leftovers). */
    assert_int_equal(count_entries_at(f->base_fd, "."), 1);
    assert_file_content_at(f->base_fd, "neighbor", "n");
    assert_canary_intact(f->canary);
}

static void remove_tree_removes_a_5000_level_chain(void **state)
{
    fixture *f = *state;
    int bottom = make_chain_at(f->base_fd, "top", 5000);
    write_file_at(bottom, "last", "x", 1);
    assert_int_equal(symlinkat(f->canary, bottom, "to_canary"), 0);
    close(bottom);
    size_t fds = open_fd_count();
    assert_int_equal(rbx_remove_tree(f->base_fd, "top"), 0);
    assert_int_equal(open_fd_count(), fds);
    assert_int_equal(count_entries_at(f->base_fd, "."), 0);
    assert_canary_intact(f->canary);
}

static void remove_tree_of_a_5000_level_chain_needs_only_a_bounded_number_of_fds(void **state)
{
    fixture *f = *state;
    int bottom = make_chain_at(f->base_fd, "top", 5000);
    close(bottom);
    /* fsutil.c promises that depth cannot exhaust fds: allow 64 more than
     * are open now, far fewer than the chain has levels. */
    struct rlimit saved;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    struct rlimit tight = {open_fd_count() + 64, saved.rlim_max};
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &tight), 0);
    int rc = rbx_remove_tree(f->base_fd, "top");
    int saved_errno = errno;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
    if (rc != 0)
        fail_msg("rbx_remove_tree failed: %s", strerror(saved_errno));
    assert_int_equal(count_entries_at(f->base_fd, "."), 0);
}

/* Builds top/locked (with a file) in a directory owned by nobody, gives
 * locked the given mode, then removes top as nobody, in a child process.
 * Returns the child's exit status: 0 when top is gone, 13 when
 * rbx_remove_tree failed, 14 when it claimed success but top remains. */
static int remove_as_nobody(fixture *f, mode_t locked_mode)
{
    const uid_t nobody = 65534;
    assert_int_equal(chmod(f->base, 0711), 0);
    assert_int_equal(mkdirat(f->base_fd, "mine", 0700), 0);
    assert_int_equal(fchownat(f->base_fd, "mine", nobody, nobody, 0), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setgid(nobody) != 0 || setuid(nobody) != 0)
            _exit(10);
        int mine = openat(f->base_fd, "mine", O_RDONLY | O_DIRECTORY);
        if (mine < 0 || mkdirat(mine, "top", 0755) != 0)
            _exit(11);
        int top = openat(mine, "top", O_RDONLY | O_DIRECTORY);
        if (top < 0 || mkdirat(top, "locked", 0755) != 0)
            _exit(12);
        int locked = openat(top, "locked", O_RDONLY | O_DIRECTORY);
        int file = locked < 0 ? -1 : openat(locked, "f", O_CREAT | O_WRONLY, 0600);
        if (file < 0 || close(file) != 0 || fchmod(locked, locked_mode) != 0)
            _exit(12);
        close(locked);
        close(top);
        if (rbx_remove_tree(mine, "top") != 0)
            _exit(13);
        struct stat st;
        _exit(fstatat(mine, "top", &st, AT_SYMLINK_NOFOLLOW) == 0 ? 14 : 0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* Without root, removing entries needs write permission on their
 * directory: the removal grants it to itself. */
static void remove_tree_without_root_removes_read_only_directories(void **state)
{
    if (geteuid() != 0)
        skip(); /* needs root to switch to nobody */
    assert_int_equal(remove_as_nobody(*state, 0500), 0);
}

/* Without root, opening a chmod 000 directory fails, so the removal has to
 * make it readable first. */
static void remove_tree_without_root_removes_unreadable_directories(void **state)
{
    if (geteuid() != 0)
        skip(); /* needs root to switch to nobody */
    assert_int_equal(remove_as_nobody(*state, 0), 0);
}

/* ---- rbx_unlock_dir_at ------------------------------------------------ */

static mode_t mode_of(const char *dir, const char *name)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    return st.st_mode & 07777;
}

static void unlock_dir_gives_a_locked_directory_back(void **state)
{
    fixture *f = *state;
    assert_int_equal(mkdirat(f->base_fd, "locked", 0), 0);
    assert_int_equal(fchmodat(f->base_fd, "locked", 0, 0), 0);
    assert_int_equal(rbx_unlock_dir_at(f->base_fd, "locked"), 0);
    assert_int_equal(mode_of(f->base, "locked"), 0700);
}

/* Sandboxed code locks a directory (mode 000), then swaps it for a link to
 * a file or directory of runbox's user elsewhere, after the removal's open
 * failed and before it unlocks: the link's target keeps its mode. */
static void unlock_dir_never_follows_a_link_swapped_in(void **state)
{
    fixture *f = *state;
    char target[128];
    snprintf(target, sizeof target, "%s/keep.txt", f->canary);
    assert_int_equal(symlinkat(target, f->base_fd, "to_file"), 0);
    snprintf(target, sizeof target, "%s/sub", f->canary);
    assert_int_equal(symlinkat(target, f->base_fd, "to_dir"), 0);
    mode_t file_mode = mode_of(f->canary, "keep.txt"), dir_mode = mode_of(f->canary, "sub");
    assert_int_not_equal(file_mode, 0700);
    assert_int_not_equal(dir_mode, 0700);

    errno = 0;
    assert_int_equal(rbx_unlock_dir_at(f->base_fd, "to_file"), -1);
    assert_true(errno == ENOTDIR || errno == ELOOP);
    errno = 0;
    assert_int_equal(rbx_unlock_dir_at(f->base_fd, "to_dir"), -1);
    assert_true(errno == ENOTDIR || errno == ELOOP);

    assert_int_equal(mode_of(f->canary, "keep.txt"), file_mode);
    assert_int_equal(mode_of(f->canary, "sub"), dir_mode);
    assert_canary_intact(f->canary);
}

/* ---- rbx_tree_usage --------------------------------------------------- */

static void tree_usage_adds_up_allocated_bytes(void **state)
{
    fixture *f = *state;
    assert_int_equal(mkdirat(f->base_fd, "top", 0755), 0);
    int top = open_at(f->base_fd, "top");
    write_bytes_at(top, "empty", 0);
    write_bytes_at(top, "one", 1);
    write_bytes_at(top, "small", 5000);
    assert_int_equal(mkdirat(top, "dir", 0755), 0);
    int dir = open_at(top, "dir");
    write_bytes_at(dir, "big", 300000);
    uint64_t expected = allocated_at(f->base_fd, "top") + allocated_at(top, "empty") +
                        allocated_at(top, "one") + allocated_at(top, "small") +
                        allocated_at(top, "dir") + allocated_at(dir, "big");
    close(dir);
    close(top);
    uint64_t bytes = 0;
    assert_int_equal(rbx_tree_usage(f->base_fd, "top", &bytes), 0);
    assert_int_equal(bytes, expected);
    assert_true(bytes >= 300000 + 5000 + 1);
}

static void tree_usage_of_a_file_is_its_allocated_bytes(void **state)
{
    fixture *f = *state;
    write_bytes_at(f->base_fd, "file", 70000);
    uint64_t bytes = 0;
    assert_int_equal(rbx_tree_usage(f->base_fd, "file", &bytes), 0);
    assert_int_equal(bytes, allocated_at(f->base_fd, "file"));
    assert_true(bytes >= 70000);
}

static void tree_usage_of_a_missing_name_is_zero(void **state)
{
    fixture *f = *state;
    uint64_t bytes = 123;
    assert_int_equal(rbx_tree_usage(f->base_fd, "nothing-here", &bytes), 0);
    assert_int_equal(bytes, 0);
}

static void tree_usage_does_not_follow_links_out(void **state)
{
    fixture *f = *state;
    /* 1 MiB outside the tree, reachable through links from inside it. */
    assert_int_equal(mkdirat(f->base_fd, "outside", 0755), 0);
    int outside = open_at(f->base_fd, "outside");
    write_bytes_at(outside, "big", 1 << 20);
    close(outside);
    char target[128];
    assert_int_equal(mkdirat(f->base_fd, "top", 0755), 0);
    int top = open_at(f->base_fd, "top");
    snprintf(target, sizeof target, "%s/outside", f->base);
    assert_int_equal(symlinkat(target, top, "to_dir"), 0);
    snprintf(target, sizeof target, "%s/outside/big", f->base);
    assert_int_equal(symlinkat(target, top, "to_file"), 0);
    uint64_t expected = allocated_at(f->base_fd, "top") + allocated_at(top, "to_dir") +
                        allocated_at(top, "to_file");
    close(top);
    uint64_t bytes = 0;
    assert_int_equal(rbx_tree_usage(f->base_fd, "top", &bytes), 0);
    assert_int_equal(bytes, expected);
    assert_true(bytes < (1 << 20));
    /* A tree that is itself a link counts as the link. */
    assert_int_equal(symlinkat(target, f->base_fd, "link_top"), 0);
    assert_int_equal(rbx_tree_usage(f->base_fd, "link_top", &bytes), 0);
    assert_int_equal(bytes, allocated_at(f->base_fd, "link_top"));
}

static void tree_usage_leaves_a_deep_tree_untouched(void **state)
{
    fixture *f = *state;
    int bottom = make_chain_at(f->base_fd, "top", 100);
    write_file_at(bottom, "last", "x", 1);
    close(bottom);
    uint64_t bytes = 0;
    size_t fds = open_fd_count();
    assert_int_equal(rbx_tree_usage(f->base_fd, "top", &bytes), 0);
    assert_int_equal(open_fd_count(), fds);
    assert_true(bytes > 0);
    /* Still one chain of 100 levels with the file at the bottom. */
    int cur = open_at(f->base_fd, "top");
    for (int i = 0; i < 100; i++) {
        assert_int_equal(count_entries_at(cur, "."), 1);
        int next = open_at(cur, "d");
        close(cur);
        cur = next;
    }
    assert_int_equal(count_entries_at(cur, "."), 1);
    assert_file_content_at(cur, "last", "x");
    close(cur);
    assert_int_equal(count_entries_at(f->base_fd, "."), 1);
}

static void tree_usage_counts_files_deeper_than_64_levels(void **state)
{
    fixture *f = *state;
    int bottom = make_chain_at(f->base_fd, "top", 70);
    write_bytes_at(bottom, "big", 1 << 20);
    close(bottom);
    uint64_t bytes = 0;
    assert_int_equal(rbx_tree_usage(f->base_fd, "top", &bytes), 0);
    assert_true(bytes >= (1 << 20));
}

/* ---- rbx_tree_unchanged_since ----------------------------------------- */

static void unchanged_since_sees_a_change_anywhere_in_the_tree(void **state)
{
    fixture *f = *state;
    int bottom = make_chain_at(f->base_fd, "top", 5);
    close(bottom);
    time_t now = time(NULL);
    /* Everything was just made: changed since a minute ago, not since the
     * next second. */
    assert_false(rbx_tree_unchanged_since(f->base_fd, "top", now - 60, 1000));
    assert_true(rbx_tree_unchanged_since(f->base_fd, "top", now + 2, 1000));
    /* A name that is not there has not changed. */
    assert_true(rbx_tree_unchanged_since(f->base_fd, "nothing-here", now - 60, 1000));
}

static void unchanged_since_is_unsure_past_its_entries(void **state)
{
    fixture *f = *state;
    assert_int_equal(mkdirat(f->base_fd, "top", 0755), 0);
    int top = open_at(f->base_fd, "top");
    char name[16];
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "f%d", i);
        write_bytes_at(top, name, 100);
    }
    close(top);
    time_t later = time(NULL) + 2;
    /* Ten files and the top: eleven entries are enough, ten are not. */
    assert_true(rbx_tree_unchanged_since(f->base_fd, "top", later, 11));
    assert_false(rbx_tree_unchanged_since(f->base_fd, "top", later, 10));
}

static void unchanged_since_is_unsure_of_a_tree_deeper_than_it_looks(void **state)
{
    fixture *f = *state;
    /* Deeper than counting goes (256 levels): what changed below is
     * unseen, so the answer must not be "unchanged". */
    int bottom = make_chain_at(f->base_fd, "top", 300);
    close(bottom);
    time_t later = time(NULL) + 2;
    assert_false(rbx_tree_unchanged_since(f->base_fd, "top", later, 100000));
    int shallow = make_chain_at(f->base_fd, "low", 200);
    close(shallow);
    assert_true(rbx_tree_unchanged_since(f->base_fd, "low", later, 100000));
}

/* ---- rbx_read_number, rbx_read_count ---------------------------------- */

static void read_number_reads_what_a_file_starts_with(void **state)
{
    fixture *f = *state;
    static const struct {
        const char *text;
        int status;
        long long value;
    } cases[] = {
        {"3000\n", 0, 3000},  {"-1\n", 0, -1},      {"500 1000\n", 0, 500},
        {"", -1, 0},          {"max\n", -1, 0},      {"99999999999999999999\n", -1, 0},
    };
    char path[128];
    snprintf(path, sizeof path, "%s/value", f->base);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(rbx_write_all(fd, cases[i].text, strlen(cases[i].text)), 0);
        close(fd);
        long long value = 0;
        assert_int_equal(rbx_read_number(path, &value), cases[i].status);
        if (cases[i].status == 0)
            assert_int_equal(value, cases[i].value);
        /* A count is never negative, and 0 where there is none. */
        uint64_t count = cases[i].status == 0 && cases[i].value > 0 ? (uint64_t)cases[i].value : 0;
        assert_int_equal(rbx_read_count(path), count);
    }
    snprintf(path, sizeof path, "%s/missing", f->base);
    long long value;
    assert_int_equal(rbx_read_number(path, &value), -1);
    assert_int_equal(rbx_read_count(path), 0);
    assert_int_equal(rbx_read_count(""), 0);
}

/* ---- rbx_mkdir_p ------------------------------------------------------ */

static void mkdir_p_creates_missing_parents(void **state)
{
    fixture *f = *state;
    char path[128];
    snprintf(path, sizeof path, "%s/a/b/c", f->base);
    mode_t old = umask(022);
    int rc = rbx_mkdir_p(path, 0711);
    umask(old);
    assert_int_equal(rc, 0);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0711);
    snprintf(path, sizeof path, "%s/a/b", f->base);
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
}

static void mkdir_p_of_an_existing_directory_succeeds(void **state)
{
    fixture *f = *state;
    assert_int_equal(rbx_mkdir_p(f->base, 0700), 0);
    char path[128];
    snprintf(path, sizeof path, "%s/x/", f->base);
    assert_int_equal(rbx_mkdir_p(path, 0700), 0);
    assert_int_equal(rbx_mkdir_p(path, 0700), 0);
    assert_true(exists_at(f->base_fd, "x"));
}

static void mkdir_p_rejects_a_path_too_long(void **state)
{
    (void)state;
    char *path = malloc(5000);
    assert_non_null(path);
    path[0] = '/';
    memset(path + 1, 'a', 4998);
    path[4999] = 0;
    errno = 0;
    assert_int_equal(rbx_mkdir_p(path, 0700), -1);
    assert_int_equal(errno, ENAMETOOLONG);
    free(path);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(remove_tree_removes_a_file),
        T(remove_tree_of_a_missing_name_succeeds),
        T(remove_tree_removes_a_nested_tree_and_nothing_else),
        T(remove_tree_unlinks_links_without_following_them),
        T(remove_tree_of_a_link_removes_only_the_link),
        T(remove_tree_removes_unreadable_directories),
        T(remove_tree_removes_a_200_level_chain_with_links_at_the_bottom),
        T(remove_tree_removes_a_5000_level_chain),
        T(remove_tree_of_a_5000_level_chain_needs_only_a_bounded_number_of_fds),
        T(remove_tree_without_root_removes_read_only_directories),
        T(remove_tree_without_root_removes_unreadable_directories),
        T(unlock_dir_gives_a_locked_directory_back),
        T(unlock_dir_never_follows_a_link_swapped_in),
        T(tree_usage_adds_up_allocated_bytes),
        T(tree_usage_of_a_file_is_its_allocated_bytes),
        T(tree_usage_of_a_missing_name_is_zero),
        T(tree_usage_does_not_follow_links_out),
        T(tree_usage_leaves_a_deep_tree_untouched),
        T(tree_usage_counts_files_deeper_than_64_levels),
        T(unchanged_since_sees_a_change_anywhere_in_the_tree),
        T(unchanged_since_is_unsure_past_its_entries),
        T(unchanged_since_is_unsure_of_a_tree_deeper_than_it_looks),
        T(read_number_reads_what_a_file_starts_with),
        T(mkdir_p_creates_missing_parents),
        T(mkdir_p_of_an_existing_directory_succeeds),
        T(mkdir_p_rejects_a_path_too_long),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
