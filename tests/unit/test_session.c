/* Unit tests of session.c, on an engine whose state directory is a fresh
 * temporary directory: creation, listing, locking, removal that never
 * follows a link out of the session, and garbage collection. */
#include "unit_util.h"

#include "engine/engine.h"
#include "runbox.h"
#include "sessions/session.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <time.h>

typedef struct fixture {
    char state_dir[64];
    char canary[64];
    rbx_engine *engine;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    make_temp_dir(f->state_dir, sizeof f->state_dir, "state");
    make_canary(f->canary, sizeof f->canary);
    rbx_config config;
    rbx_config_defaults(&config);
    config.state_dir = f->state_dir;
    /* These tests are about session.c and its tree walks on plain
     * directories, but for the one test that asks for btrfs storage. */
    config.storage = RBX_STORAGE_CHOOSE_PLAIN;
    rbx_error err = {0};
    f->engine = rbx_engine_new(&config, &err);
    if (!f->engine)
        fail_msg("rbx_engine_new: %s", err.message);
    *state = f;
    return 0;
}

/* Unmounts whatever a test left mounted below dir (a session's disk). */
static void unmount_below(const char *dir)
{
    size_t len = strlen(dir);
    for (int pass = 0; pass < 8; pass++) {
        FILE *mounts = fopen("/proc/self/mounts", "r");
        assert_non_null(mounts);
        char line[4096], target[4096];
        bool found = false;
        while (fgets(line, sizeof line, mounts))
            if (sscanf(line, "%*s %4095s", target) == 1 && strncmp(target, dir, len) == 0 &&
                target[len] == '/') {
                umount2(target, MNT_DETACH);
                found = true;
            }
        fclose(mounts);
        if (!found)
            return;
    }
}

static int teardown(void **state)
{
    fixture *f = *state;
    rbx_engine_free(f->engine);
    unmount_below(f->state_dir);
    remove_temp_tree(f->state_dir);
    remove_temp_tree(f->canary);
    free(f);
    return 0;
}

/* Sessions: the storage's own .trash and .scratch do not count. */
static size_t session_count(const fixture *f)
{
    return count_entries_at(f->engine->sessions_fd, ".") - 2;
}

static size_t trash_count(const fixture *f)
{
    return count_entries_at(f->engine->session_trash_fd, ".");
}

static void create_ok(fixture *f, const char *id)
{
    rbx_error err = {0};
    if (rbx_session_create(f->engine, id, &err) != RBX_OK)
        fail_msg("rbx_session_create(%s): %s", id, err.message);
}

/* An fd of the session's work directory, for planting files. */
static int open_work(fixture *f, const char *id)
{
    char path[4400];
    rbx_error err = {0};
    assert_int_equal(rbx_session_dir(f->engine, id, path, sizeof path, &err), RBX_OK);
    return open_dir_fd(path);
}

static void assert_no_session(fixture *f, const char *id)
{
    rbx_session_info info;
    rbx_error err = {0};
    assert_int_equal(rbx_session_info_get(f->engine, id, &info, &err), RBX_ENOENT);
    assert_int_equal(err.status, RBX_ENOENT);
    assert_false(exists_at(f->engine->sessions_fd, id));
}

static double seconds_since(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

/* ---- ids -------------------------------------------------------------- */

static void new_ids_are_valid_and_unique(void **state)
{
    (void)state;
    enum { N = 2000 };
    static char ids[N][RBX_SESSION_ID_MAX + 1];
    for (size_t i = 0; i < N; i++) {
        memset(ids[i], 0x7f, sizeof ids[i]);
        rbx_session_id_new(ids[i]);
        assert_true(rbx_session_id_valid(ids[i]));
        assert_int_equal(strlen(ids[i]), 28);
        assert_memory_equal(ids[i], "rbx-", 4);
        for (size_t k = 4; k < 28; k++)
            assert_non_null(strchr("0123456789abcdef", ids[i][k]));
    }
    for (size_t i = 0; i < N; i++)
        for (size_t k = i + 1; k < N; k++)
            if (strcmp(ids[i], ids[k]) == 0)
                fail_msg("duplicate id %s", ids[i]);
}

/* ---- create, info, list ----------------------------------------------- */

static void create_then_info_describes_the_session(void **state)
{
    fixture *f = *state;
    int64_t before = time(NULL);
    create_ok(f, "alpha");
    int64_t after = time(NULL);
    int work = open_work(f, "alpha");
    char data[10000];
    memset(data, 'd', sizeof data);
    write_file_at(work, "data.bin", data, sizeof data);
    struct stat work_st, file_st;
    assert_int_equal(fstat(work, &work_st), 0);
    assert_int_equal(fstatat(work, "data.bin", &file_st, 0), 0);
    close(work);

    rbx_session_info info;
    rbx_error err = {0};
    assert_int_equal(rbx_session_info_get(f->engine, "alpha", &info, &err), RBX_OK);
    assert_string_equal(info.id, "alpha");
    assert_in_range(info.created_unix, before, after);
    assert_in_range(info.last_used_unix, before, after);
    assert_false(info.running);
    assert_int_equal(info.disk_bytes, (uint64_t)(work_st.st_blocks + file_st.st_blocks) * 512);
    assert_true(info.disk_bytes >= sizeof data);
}

static void create_is_idempotent(void **state)
{
    fixture *f = *state;
    create_ok(f, "same");
    int work = open_work(f, "same");
    write_file_at(work, "kept", "k", 1);
    close(work);
    create_ok(f, "same");
    assert_int_equal(session_count(f), 1);
    work = open_work(f, "same");
    assert_file_content_at(work, "kept", "k");
    close(work);
    assert_int_equal(trash_count(f), 0);
}

static void create_rejects_invalid_ids_and_creates_nothing(void **state)
{
    fixture *f = *state;
    const char *bad[] = {"..", "../x", "a/b", "", ".x", "-x", "a b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rbx_error err = {0};
        assert_int_equal(rbx_session_create(f->engine, bad[i], &err), RBX_EINVAL);
        assert_non_null(strstr(err.message, "invalid session id"));
    }
    rbx_error err = {0};
    assert_int_equal(rbx_session_create(f->engine, NULL, &err), RBX_EINVAL);
    assert_int_equal(session_count(f), 0);
    assert_int_equal(trash_count(f), 0);
    int state_fd = open_dir_fd(f->state_dir);
    assert_int_equal(count_entries_at(state_fd, "."), 3); /* sessions, trash, .lock */
    close(state_fd);
}

static void info_of_a_missing_session_is_enoent(void **state)
{
    fixture *f = *state;
    assert_no_session(f, "ghost");
    rbx_session_info info;
    rbx_error err = {0};
    assert_int_equal(rbx_session_info_get(f->engine, "../ghost", &info, &err), RBX_EINVAL);
}

static void list_of_no_sessions_is_empty(void **state)
{
    fixture *f = *state;
    rbx_session_info *infos = (rbx_session_info *)1;
    size_t count = 99;
    rbx_error err = {0};
    assert_int_equal(rbx_session_list(f->engine, &infos, &count, &err), RBX_OK);
    assert_int_equal(count, 0);
    free(infos);
}

static void list_returns_every_session_once(void **state)
{
    fixture *f = *state;
    const char *ids[] = {"one", "two", "three", "x.y-z_9"};
    for (size_t i = 0; i < 4; i++)
        create_ok(f, ids[i]);
    rbx_session_info *infos = NULL;
    size_t count = 0;
    rbx_error err = {0};
    assert_int_equal(rbx_session_list(f->engine, &infos, &count, &err), RBX_OK);
    assert_int_equal(count, 4);
    for (size_t i = 0; i < 4; i++) {
        size_t seen = 0;
        for (size_t k = 0; k < count; k++)
            seen += strcmp(infos[k].id, ids[i]) == 0;
        assert_int_equal(seen, 1);
    }
    free(infos);
}

static void list_skips_entries_that_are_not_sessions(void **state)
{
    fixture *f = *state;
    create_ok(f, "real");
    int sessions = openat(f->engine->sessions_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(sessions >= 0);
    assert_int_equal(mkdirat(sessions, ".hidden", 0700), 0);
    assert_int_equal(mkdirat(sessions, "-dash", 0700), 0);
    close(sessions);
    rbx_session_info *infos = NULL;
    size_t count = 0;
    rbx_error err = {0};
    assert_int_equal(rbx_session_list(f->engine, &infos, &count, &err), RBX_OK);
    assert_int_equal(count, 1);
    assert_string_equal(infos[0].id, "real");
    free(infos);
}

static void session_dir_is_the_work_directory(void **state)
{
    fixture *f = *state;
    create_ok(f, "w");
    char path[4400], expected[4400];
    rbx_error err = {0};
    assert_int_equal(rbx_session_dir(f->engine, "w", path, sizeof path, &err), RBX_OK);
    snprintf(expected, sizeof expected, "%s/sessions/w/work", f->state_dir);
    assert_string_equal(path, expected);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(rbx_session_dir(f->engine, "nope", path, sizeof path, &err), RBX_ENOENT);
    assert_int_equal(rbx_session_dir(f->engine, "../w", path, sizeof path, &err), RBX_EINVAL);
}

/* ---- remove ----------------------------------------------------------- */

static void remove_deletes_the_session_and_its_files(void **state)
{
    fixture *f = *state;
    create_ok(f, "doomed");
    create_ok(f, "bystander");
    int work = open_work(f, "doomed");
    write_file_at(work, "a", "a", 1);
    assert_int_equal(mkdirat(work, "dir", 0755), 0);
    close(work);
    rbx_error err = {0};
    assert_int_equal(rbx_session_remove(f->engine, "doomed", 0, &err), RBX_OK);
    assert_no_session(f, "doomed");
    assert_int_equal(trash_count(f), 0);
    assert_int_equal(session_count(f), 1);
    rbx_session_info info;
    assert_int_equal(rbx_session_info_get(f->engine, "bystander", &info, &err), RBX_OK);
}

static void remove_of_a_missing_session_is_enoent(void **state)
{
    fixture *f = *state;
    rbx_error err = {0};
    assert_int_equal(rbx_session_remove(f->engine, "ghost", 0, &err), RBX_ENOENT);
    assert_non_null(strstr(err.message, "ghost"));
}

static void remove_rejects_invalid_ids(void **state)
{
    fixture *f = *state;
    create_ok(f, "keep");
    const char *bad[] = {"..", ".", "../sessions", "keep/..", "", "/keep"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rbx_error err = {0};
        assert_int_equal(rbx_session_remove(f->engine, bad[i], 0, &err), RBX_EINVAL);
    }
    assert_int_equal(session_count(f), 1);
    assert_true(exists_at(f->engine->sessions_fd, "keep"));
}

static void remove_does_not_follow_links_out_of_the_session(void **state)
{
    fixture *f = *state;
    create_ok(f, "hostile");
    int work = open_work(f, "hostile");
    plant_hostile_entries(work, f->canary);
    int bottom = make_chain_at(work, "deep", 200);
    plant_hostile_entries(bottom, f->canary);
    close(bottom);
    close(work);
    size_t fds = open_fd_count();
    rbx_error err = {0};
    if (rbx_session_remove(f->engine, "hostile", 0, &err) != RBX_OK)
        fail_msg("rbx_session_remove: %s", err.message);
    assert_int_equal(open_fd_count(), fds);
    assert_no_session(f, "hostile");
    assert_int_equal(trash_count(f), 0);
    assert_canary_intact(f->canary);
}

static void remove_of_a_session_whose_work_is_a_link_leaves_the_target(void **state)
{
    fixture *f = *state;
    create_ok(f, "swapped");
    int dir = openat(f->engine->sessions_fd, "swapped", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dir >= 0);
    assert_int_equal(unlinkat(dir, "work", AT_REMOVEDIR), 0);
    assert_int_equal(symlinkat(f->canary, dir, "work"), 0);
    close(dir);
    rbx_error err = {0};
    assert_int_equal(rbx_session_remove(f->engine, "swapped", 0, &err), RBX_OK);
    assert_no_session(f, "swapped");
    assert_int_equal(trash_count(f), 0);
    assert_canary_intact(f->canary);
}

/* Runs rbx_session_remove, then rbx_session_gc, in a child that SIGALRM
 * ends after 3 s; returns the child's wait status. */
static int remove_and_gc_in_child(fixture *f, const char *id)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(3);
        rbx_error err;
        rbx_status status = rbx_session_remove(f->engine, id, 0.2, &err);
        size_t removed;
        rbx_session_gc(f->engine, 0, &removed, &err);
        _exit(status == RBX_OK ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

static void remove_of_a_session_without_lock_file_does_not_hang(void **state)
{
    fixture *f = *state;
    int sessions = openat(f->engine->sessions_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(sessions >= 0);
    assert_int_equal(mkdirat(sessions, "stray", 0700), 0);
    close(sessions);
    int status = remove_and_gc_in_child(f, "stray");
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        fail_msg("rbx_session_remove/gc still running after 3 s");
    assert_true(WIFEXITED(status));
}

/* ---- acquire and release ---------------------------------------------- */

static void acquire_and_release_a_named_session(void **state)
{
    fixture *f = *state;
    create_ok(f, "named");
    size_t fds = open_fd_count();
    rbx_session session;
    rbx_error err = {0};
    assert_int_equal(rbx_session_acquire(f->engine, "named", 0, -1, &session, &err), RBX_OK);
    assert_string_equal(session.id, "named");
    assert_false(session.one_off);
    assert_true(session.lock_fd >= 0);
    assert_true(session.dir_fd >= 0);
    char expected[4400];
    snprintf(expected, sizeof expected, "%s/sessions/named/work", f->state_dir);
    assert_string_equal(session.work_path, expected);

    rbx_session_info info;
    assert_int_equal(rbx_session_info_get(f->engine, "named", &info, &err), RBX_OK);
    assert_true(info.running);

    rbx_session_release(f->engine, &session);
    assert_int_equal(session.lock_fd, -1);
    assert_int_equal(session.dir_fd, -1);
    rbx_session_release(f->engine, &session); /* a second release does nothing */
    assert_int_equal(open_fd_count(), fds);
    assert_int_equal(rbx_session_info_get(f->engine, "named", &info, &err), RBX_OK);
    assert_false(info.running);
}

/* A sandbox's init cloned while an execution held the session has a copy
 * of the lock's descriptor until it closes the ones it does not keep: the
 * session must be free the moment the execution releases it all the same. */
static void a_release_frees_the_session_while_a_clone_still_has_its_lock(void **state)
{
    fixture *f = *state;
    create_ok(f, "cloned");
    rbx_session session;
    rbx_error err = {0};
    assert_int_equal(rbx_session_acquire(f->engine, "cloned", 0, -1, &session, &err), RBX_OK);
    int hold[2];
    assert_int_equal(pipe(hold), 0);
    pid_t clone = fork();
    assert_true(clone >= 0);
    if (clone == 0) { /* keeps every descriptor until told to go */
        char byte;
        close(hold[1]);
        _exit(read(hold[0], &byte, 1) < 0);
    }
    close(hold[0]);
    rbx_session_release(f->engine, &session);
    rbx_session_info info;
    assert_int_equal(rbx_session_info_get(f->engine, "cloned", &info, &err), RBX_OK);
    bool running = info.running;
    rbx_status again = rbx_session_acquire(f->engine, "cloned", 0, -1, &session, &err);
    close(hold[1]);
    int status;
    assert_int_equal(waitpid(clone, &status, 0), clone);
    assert_false(running);
    assert_int_equal(again, RBX_OK);
    rbx_session_release(f->engine, &session);
}

static void acquire_creates_a_missing_session(void **state)
{
    fixture *f = *state;
    rbx_session session;
    rbx_error err = {0};
    assert_int_equal(rbx_session_acquire(f->engine, "fresh", 0, -1, &session, &err), RBX_OK);
    assert_true(exists_at(f->engine->sessions_fd, "fresh"));
    rbx_session_release(f->engine, &session);
    rbx_session_info info;
    assert_int_equal(rbx_session_info_get(f->engine, "fresh", &info, &err), RBX_OK);
    assert_int_equal(trash_count(f), 0);
}

static void acquire_rejects_invalid_ids(void **state)
{
    fixture *f = *state;
    rbx_session session;
    rbx_error err = {0};
    assert_int_equal(rbx_session_acquire(f->engine, "../escape", 0, -1, &session, &err), RBX_EINVAL);
    assert_int_equal(session.lock_fd, -1);
    assert_int_equal(session_count(f), 0);
}

static void second_acquire_of_a_held_session_is_busy_after_waiting(void **state)
{
    fixture *f = *state;
    rbx_session first, second;
    rbx_error err = {0};
    assert_int_equal(rbx_session_acquire(f->engine, "shared", 0, -1, &first, &err), RBX_OK);
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    assert_int_equal(rbx_session_acquire(f->engine, "shared", 0.2, -1, &second, &err), RBX_EBUSY);
    double waited = seconds_since(&start);
    assert_int_equal(err.status, RBX_EBUSY);
    assert_non_null(strstr(err.message, "busy"));
    assert_true(waited >= 0.19);
    assert_true(waited < 2.0);
    assert_int_equal(second.lock_fd, -1);
    /* Once released, it can be taken at once. */
    rbx_session_release(f->engine, &first);
    assert_int_equal(rbx_session_acquire(f->engine, "shared", 0, -1, &second, &err), RBX_OK);
    rbx_session_release(f->engine, &second);
}

static void remove_of_a_held_session_is_busy_and_keeps_it(void **state)
{
    fixture *f = *state;
    rbx_session held;
    rbx_error err = {0};
    assert_int_equal(rbx_session_acquire(f->engine, "held", 0, -1, &held, &err), RBX_OK);
    assert_int_equal(rbx_session_remove(f->engine, "held", 0.1, &err), RBX_EBUSY);
    assert_true(exists_at(f->engine->sessions_fd, "held"));
    rbx_session_release(f->engine, &held);
    assert_int_equal(rbx_session_remove(f->engine, "held", 0, &err), RBX_OK);
    assert_no_session(f, "held");
}

static void one_off_session_leaves_nothing_on_the_host(void **state)
{
    fixture *f = *state;
    size_t fds = open_fd_count();
    rbx_session session;
    rbx_error err = {0};
    assert_int_equal(rbx_session_acquire(f->engine, NULL, 0, -1, &session, &err), RBX_OK);
    assert_true(session.one_off);
    assert_true(rbx_session_id_valid(session.id));
    assert_memory_equal(session.id, "rbx-", 4);
    /* Its files live in the sandbox alone: no directory, lock or fd. */
    assert_string_equal(session.work_path, "");
    assert_int_equal(session.lock_fd, -1);
    assert_int_equal(session.dir_fd, -1);
    assert_int_equal(session_count(f), 0);
    assert_int_equal(trash_count(f), 0);
    rbx_session_release(f->engine, &session);
    assert_int_equal(session_count(f), 0);
    assert_int_equal(open_fd_count(), fds);
    /* Two one-off runs never share an id. */
    rbx_session other;
    assert_int_equal(rbx_session_acquire(f->engine, NULL, 0, -1, &other, &err), RBX_OK);
    assert_string_not_equal(other.id, session.id);
    rbx_session_release(f->engine, &other);
}

static void acquire_marks_the_session_as_used(void **state)
{
    fixture *f = *state;
    create_ok(f, "used");
    rbx_session_info info;
    rbx_error err = {0};
    assert_int_equal(rbx_session_info_get(f->engine, "used", &info, &err), RBX_OK);
    int64_t created = info.created_unix, last_used = info.last_used_unix;
    usleep(1100 * 1000);
    rbx_session session;
    assert_int_equal(rbx_session_acquire(f->engine, "used", 0, -1, &session, &err), RBX_OK);
    /* Marked when taken, not only when given back. */
    assert_int_equal(rbx_session_info_get(f->engine, "used", &info, &err), RBX_OK);
    assert_true(info.last_used_unix > last_used);
    assert_int_equal(info.created_unix, created);
    rbx_session_release(f->engine, &session);
    assert_int_equal(rbx_session_info_get(f->engine, "used", &info, &err), RBX_OK);
    assert_true(info.last_used_unix > last_used);
    assert_int_equal(info.created_unix, created);
}

/* ---- capped disk (disk.c) -------------------------------------------- */

static void capped_storage_holds_sessions_and_removes_them_whole(void **state)
{
    fixture *f = *state;
    /* An engine on a state directory of its own, with btrfs storage as
     * the host allows it and a small cap per session. */
    char dir[4096];
    make_temp_dir(dir, sizeof dir, "btrfs-state");
    rbx_config config;
    rbx_config_defaults(&config);
    config.state_dir = dir;
    config.disk_cap_bytes = 32u << 20;
    rbx_error err = {0};
    rbx_engine *engine = rbx_engine_new(&config, &err);
    assert_non_null(engine);
    if (engine->storage != RBX_STORAGE_BTRFS) {
        rbx_engine_free(engine);
        remove_temp_tree(dir);
        skip(); /* needs root, /dev/loop-control, btrfs and mkfs.btrfs */
    }
    rbx_session session;
    assert_int_equal(rbx_session_acquire(engine, "capped", 0, -1, &session, &err), RBX_OK);
    /* A subvolume in the one mounted image, not a mount of its own. */
    FILE *mounts = fopen("/proc/self/mounts", "r");
    assert_non_null(mounts);
    char line[4096];
    while (fgets(line, sizeof line, mounts))
        if (strstr(line, "/capped"))
            fail_msg("the session is a mount: %s", line);
    fclose(mounts);
    int work = open_dir_fd(session.work_path);
    plant_hostile_entries(work, f->canary);
    /* Past the cap: EDQUOT. */
    int fd = openat(work, "big", O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    char block[1 << 16] = {0};
    ssize_t n = 0;
    for (int i = 0; i < 1024 && n >= 0; i++)
        if ((n = write(fd, block, sizeof block)) < 0)
            assert_int_equal(errno, EDQUOT);
    assert_true(n < 0);
    close(fd);
    close(work);
    rbx_session_release(engine, &session);
    rbx_session_info info;
    assert_int_equal(rbx_session_info_get(engine, "capped", &info, &err), RBX_OK);
    assert_true(info.disk_bytes > (24u << 20) && info.disk_bytes <= (33u << 20));

    assert_int_equal(rbx_session_remove(engine, "capped", 0, &err), RBX_OK);
    assert_false(exists_at(engine->sessions_fd, "capped"));
    assert_int_equal(count_entries_at(engine->session_trash_fd, "."), 0);
    assert_canary_intact(f->canary);
    assert_int_equal(rbx_storage_unmount(engine, &err), RBX_OK);
    rbx_engine_free(engine);
    unmount_below(dir);
    remove_temp_tree(dir);
}

/* ---- gc --------------------------------------------------------------- */

static void gc_removes_idle_sessions_and_keeps_a_locked_one(void **state)
{
    fixture *f = *state;
    create_ok(f, "idle1");
    create_ok(f, "idle2");
    rbx_session held;
    rbx_error err = {0};
    assert_int_equal(rbx_session_acquire(f->engine, "busy", 0, -1, &held, &err), RBX_OK);
    usleep(1100 * 1000);
    size_t removed = 99;
    assert_int_equal(rbx_session_gc(f->engine, 0, &removed, &err), RBX_OK);
    assert_int_equal(removed, 2);
    assert_no_session(f, "idle1");
    assert_no_session(f, "idle2");
    assert_true(exists_at(f->engine->sessions_fd, "busy"));
    assert_int_equal(session_count(f), 1);
    assert_int_equal(trash_count(f), 0);
    rbx_session_release(f->engine, &held);
    rbx_session_info info;
    assert_int_equal(rbx_session_info_get(f->engine, "busy", &info, &err), RBX_OK);
}

static void gc_keeps_sessions_used_within_the_idle_time(void **state)
{
    fixture *f = *state;
    create_ok(f, "recent1");
    create_ok(f, "recent2");
    size_t removed = 99;
    rbx_error err = {0};
    assert_int_equal(rbx_session_gc(f->engine, 3600, &removed, &err), RBX_OK);
    assert_int_equal(removed, 0);
    assert_int_equal(session_count(f), 2);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(new_ids_are_valid_and_unique),
        T(create_then_info_describes_the_session),
        T(create_is_idempotent),
        T(create_rejects_invalid_ids_and_creates_nothing),
        T(info_of_a_missing_session_is_enoent),
        T(list_of_no_sessions_is_empty),
        T(list_returns_every_session_once),
        T(list_skips_entries_that_are_not_sessions),
        T(session_dir_is_the_work_directory),
        T(remove_deletes_the_session_and_its_files),
        T(remove_of_a_missing_session_is_enoent),
        T(remove_rejects_invalid_ids),
        T(remove_does_not_follow_links_out_of_the_session),
        T(remove_of_a_session_whose_work_is_a_link_leaves_the_target),
        T(remove_of_a_session_without_lock_file_does_not_hang),
        T(acquire_and_release_a_named_session),
        T(a_release_frees_the_session_while_a_clone_still_has_its_lock),
        T(acquire_creates_a_missing_session),
        T(acquire_rejects_invalid_ids),
        T(second_acquire_of_a_held_session_is_busy_after_waiting),
        T(remove_of_a_held_session_is_busy_and_keeps_it),
        T(one_off_session_leaves_nothing_on_the_host),
        T(acquire_marks_the_session_as_used),
        T(capped_storage_holds_sessions_and_removes_them_whole),
        T(gc_removes_idle_sessions_and_keeps_a_locked_one),
        T(gc_keeps_sessions_used_within_the_idle_time),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
