/* Unit tests of owner.c: whether the runbox process that made a leftover
 * still runs. A zombie runs no more: its leftovers are a sweep's, even
 * before whoever owes it a wait() reaps it. */
#include "unit_util.h"

#include "base/owner.h"

#include <signal.h>
#include <sys/wait.h>

static void this_process_is_alive(void **state)
{
    (void)state;
    assert_int_equal(rbx_owner_state_of(getpid(), time(NULL)), RBX_OWNER_ALIVE);
}

static void a_process_started_after_the_leftover_reused_its_pid(void **state)
{
    (void)state;
    assert_int_equal(rbx_owner_state_of(getpid(), 1000), RBX_OWNER_GONE);
}

/* A child that has exited, not yet reaped. */
static pid_t exited_child(void)
{
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0)
        _exit(0);
    return child;
}

static void an_exited_unreaped_process_is_gone(void **state)
{
    (void)state;
    time_t made = time(NULL);
    pid_t child = exited_child();
    siginfo_t info;
    /* Exited, and left a zombie: WNOWAIT does not reap it. */
    assert_int_equal(waitid(P_PID, (id_t)child, &info, WEXITED | WNOWAIT), 0);
    assert_int_equal(kill(child, 0), 0); /* signal 0 still finds it */
    assert_int_equal(rbx_owner_state_of(child, made), RBX_OWNER_GONE);
    assert_int_equal(waitpid(child, NULL, 0), child);
}

static void a_reaped_process_is_gone(void **state)
{
    (void)state;
    time_t made = time(NULL);
    pid_t child = exited_child();
    assert_int_equal(waitpid(child, NULL, 0), child);
    assert_int_equal(rbx_owner_state_of(child, made), RBX_OWNER_GONE);
}

static void a_pid_is_read_from_the_start_of_a_name(void **state)
{
    (void)state;
    assert_int_equal(rbx_owner_pid("1234-abc"), 1234);
    assert_int_equal(rbx_owner_pid("abc"), 0);
    assert_int_equal(rbx_owner_pid("1234"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(this_process_is_alive),
        cmocka_unit_test(a_process_started_after_the_leftover_reused_its_pid),
        cmocka_unit_test(an_exited_unreaped_process_is_gone),
        cmocka_unit_test(a_reaped_process_is_gone),
        cmocka_unit_test(a_pid_is_read_from_the_start_of_a_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
