/* Unit tests of plan_cache.c: a kept plan comes back as it was written, and
 * anything else found under its name (cut short, from another build, with
 * a count or a path out of bounds, a link, writable by others) is refused,
 * never used. Entries of other stamps, and another build's of the same
 * root, go when a new one is kept. */
#include "unit_util.h"

#include "sandbox/plan_cache.h"
#include "sandbox/template_pin.h"

#include <stddef.h>
#include <sys/stat.h>

static rbx_root_plan *sample(void)
{
    rbx_root_plan *plan = calloc(1, sizeof *plan);
    assert_non_null(plan);
    assert_true(rbx_root_plan_build(plan, NULL, 0, 64, NULL));
    rbx_root_plan_add_point(plan, "/opt/venv");
    assert_true(plan->count > 0);
    return plan;
}

typedef struct fixture {
    char dir[64];
    char name[RBX_PLAN_CACHE_NAME_MAX];
    char path[200];
    rbx_root_plan *plan, *read;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    make_temp_dir(f->dir, sizeof f->dir, "plans");
    rbx_plan_cache_name(f->name, 1000, NULL, 64);
    snprintf(f->path, sizeof f->path, "%s/%s", f->dir, f->name);
    f->plan = sample();
    f->read = calloc(1, sizeof *f->read);
    assert_non_null(f->read);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    remove_temp_tree(f->dir);
    free(f->plan);
    free(f->read);
    free(f);
    return 0;
}

/* The stored entry's bytes, changed at offset (from the plan's start) by
 * change, written back. */
static void edit_plan_at(const fixture *f, size_t offset, const void *change, size_t len)
{
    int fd = open(f->path, O_RDWR);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    size_t header = (size_t)st.st_size - sizeof(rbx_root_plan);
    assert_int_equal(pwrite(fd, change, len, (off_t)(header + offset)), (ssize_t)len);
    close(fd);
}

static void a_kept_plan_comes_back_byte_for_byte(void **state)
{
    fixture *f = *state;
    assert_false(rbx_plan_cache_load(f->dir, f->name, f->read));
    rbx_plan_cache_store(f->dir, f->name, f->plan);
    assert_true(rbx_plan_cache_load(f->dir, f->name, f->read));
    assert_memory_equal(f->read, f->plan, sizeof *f->plan);
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
}

static void the_name_follows_every_input(void **state)
{
    fixture *f = *state;
    char other[RBX_PLAN_CACHE_NAME_MAX];
    rbx_plan_cache_name(other, 1001, NULL, 64);
    assert_string_not_equal(other, f->name);
    rbx_plan_cache_name(other, 1000, "/srv/image", 64);
    assert_string_not_equal(other, f->name);
    rbx_plan_cache_name(other, 1000, NULL, 65);
    assert_string_not_equal(other, f->name);
    rbx_plan_cache_name(other, 1000, NULL, 64);
    assert_string_equal(other, f->name);
    assert_int_equal(strncmp(f->name, "plan-1000-", 10), 0);
}

static void a_short_or_long_entry_is_refused(void **state)
{
    fixture *f = *state;
    rbx_plan_cache_store(f->dir, f->name, f->plan);
    assert_int_equal(truncate(f->path, sizeof(rbx_root_plan)), 0);
    assert_false(rbx_plan_cache_load(f->dir, f->name, f->read));
    rbx_plan_cache_store(f->dir, f->name, f->plan);
    int fd = open(f->path, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "x", 1), 1);
    close(fd);
    assert_false(rbx_plan_cache_load(f->dir, f->name, f->read));
}

static void another_builds_header_is_refused(void **state)
{
    fixture *f = *state;
    rbx_plan_cache_store(f->dir, f->name, f->plan);
    int fd = open(f->path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "X", 1, 0), 1);
    close(fd);
    assert_false(rbx_plan_cache_load(f->dir, f->name, f->read));
}

static void counts_and_paths_out_of_bounds_are_refused(void **state)
{
    fixture *f = *state;
    size_t too_many = RBX_ROOT_MAX_STEPS + 1;
    rbx_plan_cache_store(f->dir, f->name, f->plan);
    edit_plan_at(f, offsetof(rbx_root_plan, count), &too_many, sizeof too_many);
    assert_false(rbx_plan_cache_load(f->dir, f->name, f->read));

    /* a step's path with no end within its field */
    rbx_plan_cache_store(f->dir, f->name, f->plan);
    char fill[RBX_ROOT_PATH_MAX];
    memset(fill, 'a', sizeof fill);
    edit_plan_at(f, offsetof(rbx_root_plan, steps) + offsetof(rbx_root_step, host), fill,
                 sizeof fill);
    assert_false(rbx_plan_cache_load(f->dir, f->name, f->read));

    /* a step that would mount somewhere not absolute */
    rbx_plan_cache_store(f->dir, f->name, f->plan);
    edit_plan_at(f, offsetof(rbx_root_plan, steps) + offsetof(rbx_root_step, inside), "etc", 4);
    assert_false(rbx_plan_cache_load(f->dir, f->name, f->read));

    /* a kind no builder knows */
    rbx_plan_cache_store(f->dir, f->name, f->plan);
    int kind = 77;
    edit_plan_at(f, offsetof(rbx_root_plan, steps) + offsetof(rbx_root_step, kind), &kind,
                 sizeof kind);
    assert_false(rbx_plan_cache_load(f->dir, f->name, f->read));

    rbx_plan_cache_store(f->dir, f->name, f->plan);
    assert_true(rbx_plan_cache_load(f->dir, f->name, f->read));
}

static void a_link_or_an_entry_others_may_write_is_refused(void **state)
{
    fixture *f = *state;
    char real[260];
    snprintf(real, sizeof real, "%s/elsewhere", f->dir);
    rbx_plan_cache_store(f->dir, f->name, f->plan);
    assert_int_equal(rename(f->path, real), 0);
    assert_int_equal(symlink(real, f->path), 0);
    assert_false(rbx_plan_cache_load(f->dir, f->name, f->read));
    assert_int_equal(unlink(f->path), 0);

    rbx_plan_cache_store(f->dir, f->name, f->plan);
    assert_int_equal(chmod(f->path, 0622), 0);
    assert_false(rbx_plan_cache_load(f->dir, f->name, f->read));
    assert_int_equal(chmod(f->path, 0600), 0);
    if (geteuid() == 0) {
        assert_int_equal(chown(f->path, 65534, 65534), 0);
        assert_false(rbx_plan_cache_load(f->dir, f->name, f->read));
    }
}

static void keeping_one_removes_the_entries_of_other_stamps(void **state)
{
    fixture *f = *state;
    char old[RBX_PLAN_CACHE_NAME_MAX], same[RBX_PLAN_CACHE_NAME_MAX], newer[RBX_PLAN_CACHE_NAME_MAX];
    rbx_plan_cache_name(old, 999, NULL, 64);
    rbx_plan_cache_name(same, 1000, "/srv/image", 64);
    rbx_plan_cache_name(newer, 1001, NULL, 64);
    rbx_plan_cache_store(f->dir, old, f->plan);
    int dir = open_dir_fd(f->dir);
    write_file_at(dir, ".plan-999-0000000000000000.77", "half", 4);
    write_file_at(dir, "unrelated", "x", 1);
    rbx_plan_cache_store(f->dir, same, f->plan);
    rbx_plan_cache_store(f->dir, f->name, f->plan);
    assert_int_equal(faccessat(dir, old, F_OK, AT_SYMLINK_NOFOLLOW), -1);
    assert_int_equal(faccessat(dir, ".plan-999-0000000000000000.77", F_OK, 0), -1);
    assert_int_equal(faccessat(dir, same, F_OK, 0), 0);
    assert_int_equal(faccessat(dir, "unrelated", F_OK, 0), 0);
    rbx_plan_cache_store(f->dir, newer, f->plan);
    assert_int_equal(faccessat(dir, same, F_OK, 0), -1);
    assert_int_equal(faccessat(dir, f->name, F_OK, 0), -1);
    assert_true(rbx_plan_cache_load(f->dir, newer, f->read));
    close(dir);
}

static void keeping_one_removes_another_builds_entry_of_its_root(void **state)
{
    fixture *f = *state;
    char older[RBX_PLAN_CACHE_NAME_MAX], other_root[RBX_PLAN_CACHE_NAME_MAX];
    /* The same stamp and root, another key: what another build kept. */
    snprintf(older, sizeof older, "%s", f->name);
    memset(strrchr(older, '-') + 1, '0', 16);
    assert_string_not_equal(older, f->name);
    rbx_plan_cache_name(other_root, 1000, "/srv/image", 64);
    rbx_plan_cache_store(f->dir, older, f->plan);
    rbx_plan_cache_store(f->dir, other_root, f->plan);
    rbx_plan_cache_store(f->dir, f->name, f->plan);
    int dir = open_dir_fd(f->dir);
    assert_int_equal(faccessat(dir, older, F_OK, 0), -1);
    assert_int_equal(faccessat(dir, other_root, F_OK, 0), 0);
    assert_int_equal(faccessat(dir, f->name, F_OK, 0), 0);
    close(dir);
}

static void a_name_replaces_other_stamps_its_roots_other_builds_and_the_old_form(void **state)
{
    (void)state;
    const char *kept = "mnt-1000-00000000000000aa-00000000000000bb";
    assert_false(rbx_template_name_replaced(kept, kept));
    assert_true(rbx_template_name_replaced("mnt-999-00000000000000aa-00000000000000bb", kept));
    assert_true(rbx_template_name_replaced("mnt-1000-00000000000000aa-00000000000000cc", kept));
    assert_false(rbx_template_name_replaced("mnt-1000-00000000000000dd-00000000000000cc", kept));
    assert_true(rbx_template_name_replaced("mnt-1000-00000000000000ee", kept)); /* older form */
    assert_false(rbx_template_name_replaced("mnt-1000-00000000000000dd-0", "mnt-bad"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_kept_plan_comes_back_byte_for_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(the_name_follows_every_input, setup, teardown),
        cmocka_unit_test_setup_teardown(a_short_or_long_entry_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(another_builds_header_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(counts_and_paths_out_of_bounds_are_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_link_or_an_entry_others_may_write_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(keeping_one_removes_the_entries_of_other_stamps, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(keeping_one_removes_another_builds_entry_of_its_root, setup,
                                        teardown),
        cmocka_unit_test(a_name_replaces_other_stamps_its_roots_other_builds_and_the_old_form),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
