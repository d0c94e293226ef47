/* Unit tests of file_tree.c and file_watch.c (the session files E2B's envd
 * shows), on an engine whose state directory is a fresh temporary
 * directory: listings to a depth, entries, directories made, moves,
 * metadata, and watches; a link planted in the session to a canary
 * directory is described, never followed. */
#include "unit_util.h"

#include "engine/engine.h"
#include "runbox.h"

#include <poll.h>
#include <sys/mount.h>

typedef struct fixture {
    char state_dir[64];
    char canary[64];
    rbx_engine *engine;
    int work;
} fixture;

#define SESSION "tree"

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    make_temp_dir(f->state_dir, sizeof f->state_dir, "state");
    make_canary(f->canary, sizeof f->canary);
    rbx_config config;
    rbx_config_defaults(&config);
    config.state_dir = f->state_dir;
    config.storage = RBX_STORAGE_CHOOSE_PLAIN;
    rbx_error err = {0};
    f->engine = rbx_engine_new(&config, &err);
    if (!f->engine)
        fail_msg("rbx_engine_new: %s", err.message);
    assert_int_equal(rbx_session_create(f->engine, SESSION, &err), RBX_OK);
    char path[4400];
    assert_int_equal(rbx_session_dir(f->engine, SESSION, path, sizeof path, &err), RBX_OK);
    f->work = open_dir_fd(path);
    /* What a program in the sandbox could plant: links out to the canary. */
    assert_int_equal(symlinkat(f->canary, f->work, "out"), 0);
    assert_int_equal(mkdirat(f->work, "a", 0755), 0);
    int a = openat(f->work, "a", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    write_file_at(a, "one.txt", "1", 1);
    assert_int_equal(mkdirat(a, "b", 0755), 0);
    close(a);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    close(f->work);
    rbx_engine_free(f->engine);
    remove_temp_tree(f->state_dir);
    assert_canary_intact(f->canary);
    remove_temp_tree(f->canary);
    free(f);
    return 0;
}

static void lists_to_the_depth_asked_and_never_through_a_link(void **state)
{
    fixture *f = *state;
    rbx_file_entry *entries;
    size_t count;
    rbx_error err = {0};
    assert_int_equal(rbx_file_list_depth(f->engine, SESSION, "", 1, &entries, &count, &err),
                     RBX_OK);
    assert_int_equal(count, 2); /* a, out: sorted, one level */
    assert_string_equal(entries[0].path, "a");
    assert_int_equal(entries[0].type, 'd');
    assert_string_equal(entries[1].path, "out");
    assert_int_equal(entries[1].type, 'l');
    assert_string_equal(entries[1].link_target, f->canary);
    rbx_file_entries_free(entries, count);
    assert_int_equal(rbx_file_list_depth(f->engine, SESSION, "", 9, &entries, &count, &err),
                     RBX_OK);
    assert_int_equal(count, 4); /* a, a/b, a/one.txt, out: nothing of the canary's */
    assert_string_equal(entries[1].path, "a/b");
    assert_string_equal(entries[2].path, "a/one.txt");
    assert_int_equal(entries[2].size, 1);
    rbx_file_entries_free(entries, count);
    assert_int_equal(rbx_file_list_depth(f->engine, SESSION, "out", 2, &entries, &count, &err),
                     RBX_EINVAL);
    assert_int_equal(rbx_file_list_depth(f->engine, SESSION, "a/one.txt", 1, &entries, &count,
                                         &err),
                     RBX_EINVAL);
    assert_non_null(strstr(err.message, "not a directory"));
    assert_int_equal(rbx_file_list_depth(f->engine, SESSION, "none", 1, &entries, &count, &err),
                     RBX_ENOENT);
}

static void makes_directories_and_moves_without_following_links(void **state)
{
    fixture *f = *state;
    rbx_error err = {0};
    bool made;
    assert_int_equal(rbx_file_mkdir(f->engine, SESSION, "x/y", &made, &err), RBX_OK);
    assert_true(made);
    assert_int_equal(rbx_file_mkdir(f->engine, SESSION, "x/y", &made, &err), RBX_OK);
    assert_false(made);
    assert_int_equal(rbx_file_mkdir(f->engine, SESSION, "a/one.txt", &made, &err), RBX_EINVAL);
    assert_int_equal(rbx_file_mkdir(f->engine, SESSION, "out/new", &made, &err), RBX_EINVAL);
    assert_int_equal(rbx_file_move(f->engine, SESSION, "a/one.txt", "p/q/two.txt", &err),
                     RBX_OK);
    assert_file_content_at(f->work, "p/q/two.txt", "1");
    assert_int_equal(rbx_file_move(f->engine, SESSION, "out/keep.txt", "stolen", &err),
                     RBX_EINVAL);
    assert_int_equal(rbx_file_move(f->engine, SESSION, "p", "out/p", &err), RBX_EINVAL);
    assert_int_equal(rbx_file_move(f->engine, SESSION, "gone", "x", &err), RBX_ENOENT);
    /* The link itself moves, as a link. */
    assert_int_equal(rbx_file_move(f->engine, SESSION, "out", "x/out", &err), RBX_OK);
    rbx_file_entry entry;
    assert_int_equal(rbx_file_stat(f->engine, SESSION, "x/out", &entry, &err), RBX_OK);
    assert_int_equal(entry.type, 'l');
    rbx_file_entry_clear(&entry);
}

static void keeps_metadata_on_the_file(void **state)
{
    fixture *f = *state;
    rbx_error err = {0};
    const char *keys[] = {"owner", "stage"}, *values[] = {"alice", "raw"};
    assert_int_equal(
        rbx_file_put_meta(f->engine, SESSION, "m.txt", "m", 1, keys, values, 2, &err), RBX_OK);
    rbx_file_entry entry;
    assert_int_equal(rbx_file_stat(f->engine, SESSION, "m.txt", &entry, &err), RBX_OK);
    assert_int_equal(entry.meta_count, 2);
    bool owner = false;
    for (size_t i = 0; i < entry.meta_count; i++)
        owner |= !strcmp(entry.meta_keys[i], "owner") && !strcmp(entry.meta_values[i], "alice");
    assert_true(owner);
    rbx_file_entry_clear(&entry);
    const char *bad_keys[] = {"Upper"}, *bad_values[] = {"v"};
    assert_int_equal(rbx_file_put_meta(f->engine, SESSION, "n.txt", "n", 1, bad_keys,
                                       bad_values, 1, &err),
                     RBX_EINVAL);
    const char *ok_keys[] = {"k"}, *control[] = {"a\nb"};
    assert_int_equal(
        rbx_file_put_meta(f->engine, SESSION, "n.txt", "n", 1, ok_keys, control, 1, &err),
        RBX_EINVAL);
    assert_false(exists_at(f->work, "n.txt"));
}

typedef struct seen {
    char names[64][256];
    rbx_file_change changes[64];
    size_t count;
} seen;

static void record(void *arg, const rbx_file_event *e)
{
    seen *s = arg;
    if (s->count < 64) {
        snprintf(s->names[s->count], sizeof s->names[0], "%s", e->name);
        s->changes[s->count++] = e->change;
    }
}

static bool saw(const seen *s, const char *name, rbx_file_change change)
{
    for (size_t i = 0; i < s->count; i++)
        if (!strcmp(s->names[i], name) && s->changes[i] == change)
            return true;
    return false;
}

static void take_all(rbx_file_watch *watch, seen *s, bool *gone)
{
    struct pollfd p = {.fd = rbx_file_watch_fd(watch), .events = POLLIN};
    while (poll(&p, 1, 200) > 0)
        rbx_file_watch_take(watch, record, s, gone);
}

static void watches_what_changes_never_through_a_link(void **state)
{
    fixture *f = *state;
    rbx_error err = {0};
    rbx_file_watch *watch;
    assert_int_equal(rbx_file_watch_open(f->engine, SESSION, "out", true, &watch, &err),
                     RBX_EINVAL);
    assert_int_equal(rbx_file_watch_open(f->engine, SESSION, "", true, &watch, &err), RBX_OK);
    assert_int_equal(rbx_file_put(f->engine, SESSION, "new.txt", "n", 1, &err), RBX_OK);
    assert_int_equal(mkdirat(f->work, "later", 0755), 0);
    int later = openat(f->work, "later", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    write_file_at(later, "inside.txt", "i", 1); /* likely before its watch: reported anyway */
    close(later);
    int canary = open_dir_fd(f->canary);
    write_file_at(canary, "outside.txt", "o", 1); /* through the link: never seen */
    unlinkat(canary, "outside.txt", 0);
    close(canary);
    assert_int_equal(renameat(f->work, "new.txt", f->work, "renamed.txt"), 0);
    assert_int_equal(unlinkat(f->work, "renamed.txt", 0), 0);
    seen s = {0};
    bool gone = false;
    take_all(watch, &s, &gone);
    assert_true(saw(&s, "new.txt", RBX_FILE_CREATED)); /* the upload's temporary is not shown */
    assert_true(saw(&s, "later", RBX_FILE_CREATED));
    assert_true(saw(&s, "later/inside.txt", RBX_FILE_CREATED));
    assert_true(saw(&s, "new.txt", RBX_FILE_RENAMED));
    assert_true(saw(&s, "renamed.txt", RBX_FILE_REMOVED));
    for (size_t i = 0; i < s.count; i++) {
        assert_null(strstr(s.names[i], "outside"));
        assert_null(strstr(s.names[i], ".rbx-upload-"));
    }
    assert_false(gone);
    rbx_file_watch_close(watch);
    /* A watched directory removed: the watch is gone. */
    assert_int_equal(rbx_file_watch_open(f->engine, SESSION, "a/b", false, &watch, &err), RBX_OK);
    assert_int_equal(rbx_file_delete(f->engine, SESSION, "a/b", &err), RBX_OK);
    take_all(watch, &s, &gone);
    assert_true(gone);
    rbx_file_watch_close(watch);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(lists_to_the_depth_asked_and_never_through_a_link),
        T(makes_directories_and_moves_without_following_links),
        T(keeps_metadata_on_the_file),
        T(watches_what_changes_never_through_a_link),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
