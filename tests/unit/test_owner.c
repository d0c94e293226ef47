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

/* A memo looks at each owner once: its verdict stands for the rest of the
 * sweep (here, though the owner ended since: what it keeps waits for the
 * next sweep). */
static void a_memo_looks_at_an_owner_once(void **state)
{
    (void)state;
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        alarm(30); /* never outlives a failed test */
        char c;
        (void)!read(go[0], &c, 1);
        _exit(0);
    }
    rbx_owner_memo memo = {0};
    time_t now = time(NULL);
    assert_int_equal(rbx_owner_state_memo(&memo, child, now), RBX_OWNER_ALIVE);
    /* Made before the child started: its pid was another's then. */
    assert_int_equal(rbx_owner_state_memo(&memo, child, now - 3600), RBX_OWNER_GONE);
    assert_int_equal(memo.count, 1);
    assert_int_equal(write(go[1], "g", 1), 1);
    assert_int_equal(waitpid(child, NULL, 0), child);
    assert_int_equal(rbx_owner_state_of(child, now), RBX_OWNER_GONE);
    assert_int_equal(rbx_owner_state_memo(&memo, child, now), RBX_OWNER_ALIVE);
    assert_int_equal(rbx_owner_state_memo(&memo, getpid(), now), RBX_OWNER_ALIVE);
    assert_int_equal(memo.count, 2);
    close(go[0]);
    close(go[1]);
}

/* A pid the memo found gone may have been taken by a new process since:
 * what was made after that look is looked at again, what was made before
 * it is the gone owner's. Here the memo says this process was gone. */
static void a_memo_looks_again_at_a_gone_pid_for_what_is_newer(void **state)
{
    (void)state;
    time_t now = time(NULL);
    rbx_owner_memo memo = {.count = 1};
    memo.seen[0] = (rbx_owner_seen){.pid = getpid(), .state = RBX_OWNER_GONE, .checked = now};
    assert_int_equal(rbx_owner_state_memo(&memo, getpid(), now - 3600), RBX_OWNER_GONE);
    assert_int_equal(rbx_owner_state_memo(&memo, getpid(), now), RBX_OWNER_ALIVE);
    assert_int_equal(memo.count, 1);
    assert_int_equal(memo.seen[0].state, RBX_OWNER_ALIVE);
}

/* Past its room, a memo still answers: by looking every time. */
static void a_full_memo_still_answers(void **state)
{
    (void)state;
    rbx_owner_memo memo = {0};
    time_t made = time(NULL) - 2;
    for (int i = 0; i < RBX_OWNER_MEMO_MAX; i++) {
        pid_t child = exited_child();
        assert_int_equal(waitpid(child, NULL, 0), child);
        assert_int_equal(rbx_owner_state_memo(&memo, child, made), RBX_OWNER_GONE);
    }
    assert_int_equal(memo.count, RBX_OWNER_MEMO_MAX);
    assert_int_equal(rbx_owner_state_memo(&memo, getpid(), time(NULL)), RBX_OWNER_ALIVE);
    assert_int_equal(memo.count, RBX_OWNER_MEMO_MAX);
    assert_int_equal(rbx_owner_state_memo(&memo, 0, made), RBX_OWNER_UNKNOWN);
}

static void a_mark_is_read_from_the_start_of_a_name(void **state)
{
    (void)state;
    rbx_owner_id id;
    assert_true(rbx_owner_parse("1234-s5678-abc", &id));
    assert_int_equal(id.pid, 1234);
    assert_int_equal(id.start, 5678);
    assert_true(rbx_owner_parse("1234-s5678", &id));
    assert_int_equal(id.start, 5678);
    /* an older runbox's: the pid alone */
    static const char *const older[] = {"1234-abc", "1234", "1234-s", "1234-sx-1", "1234-s0-a",
                                        "1234-s12x"};
    for (size_t i = 0; i < sizeof older / sizeof older[0]; i++) {
        assert_true(rbx_owner_parse(older[i], &id));
        assert_int_equal(id.pid, 1234);
        assert_int_equal(id.start, 0);
    }
    static const char *const bad[] = {"abc", "-1-x", "0-x", "99999999-x", "1234.5-x", "1234x",
                                      " 1234-x", "", "s1234-x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(rbx_owner_parse(bad[i], &id));
}

/* This process's mark names it, and only it, whatever the clocks say: a
 * leftover it made "long before it started" by the wall clock (as a clock
 * that runs fast against the boot clock, or a step of it, makes its start
 * look) is still its own. The same pid with another start is another
 * process: the maker is gone. */
static void a_mark_names_its_process_whatever_the_clocks_say(void **state)
{
    (void)state;
    char text[64];
    snprintf(text, sizeof text, "%s-x", rbx_owner_mark());
    rbx_owner_id id;
    assert_true(rbx_owner_parse(text, &id));
    assert_int_equal(id.pid, getpid());
    assert_true(id.start > 0);
    assert_true(id.start == rbx_owner_start());
    rbx_owner_memo memo = {0};
    assert_int_equal(rbx_owner_state_id(&memo, &id, 1000), RBX_OWNER_ALIVE);
    assert_int_equal(rbx_owner_state_id(NULL, &id, 1000), RBX_OWNER_ALIVE);
    /* the pid alone, judged by the clocks, would be taken for gone */
    assert_int_equal(rbx_owner_state_of(getpid(), 1000), RBX_OWNER_GONE);
    rbx_owner_id other = {.pid = id.pid, .start = id.start + 1};
    assert_int_equal(rbx_owner_state_id(&memo, &other, time(NULL)), RBX_OWNER_GONE);
    assert_int_equal(rbx_owner_state_id(NULL, &other, time(NULL)), RBX_OWNER_GONE);
}

/* A marked leftover of a process that has exited, reaped or not, is gone;
 * a child's own mark is made anew after a fork. */
static void a_marked_leftover_of_an_exited_process_is_gone(void **state)
{
    (void)state;
    (void)rbx_owner_mark(); /* the parent's, made before the fork */
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        const char *mark = rbx_owner_mark();
        (void)!write(pipefd[1], mark, strlen(mark) + 1);
        _exit(0);
    }
    char mark[64] = "";
    assert_true(read(pipefd[0], mark, sizeof mark - 1) > 0);
    close(pipefd[0]);
    close(pipefd[1]);
    rbx_owner_id id;
    assert_true(rbx_owner_parse(mark, &id));
    assert_int_equal(id.pid, child);
    for (int i = 0; i < 500 && rbx_owner_state_id(NULL, &id, time(NULL)) != RBX_OWNER_GONE; i++)
        usleep(2000); /* until it has exited, unreaped */
    assert_int_equal(rbx_owner_state_id(NULL, &id, time(NULL)), RBX_OWNER_GONE);
    assert_int_equal(waitpid(child, NULL, 0), child);
    assert_int_equal(rbx_owner_state_id(NULL, &id, time(NULL)), RBX_OWNER_GONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(this_process_is_alive),
        cmocka_unit_test(a_process_started_after_the_leftover_reused_its_pid),
        cmocka_unit_test(an_exited_unreaped_process_is_gone),
        cmocka_unit_test(a_reaped_process_is_gone),
        cmocka_unit_test(a_memo_looks_at_an_owner_once),
        cmocka_unit_test(a_memo_looks_again_at_a_gone_pid_for_what_is_newer),
        cmocka_unit_test(a_full_memo_still_answers),
        cmocka_unit_test(a_mark_is_read_from_the_start_of_a_name),
        cmocka_unit_test(a_mark_names_its_process_whatever_the_clocks_say),
        cmocka_unit_test(a_marked_leftover_of_an_exited_process_is_gone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
