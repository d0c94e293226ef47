/* Unit tests of runbox-init (src/sandbox/reaper.c), the binary itself (its
 * path is the test's argument): what it says about its program, the children
 * it reaps besides, and arguments it refuses. Each case forks a stand-in for
 * a sandbox's init that starts a program and then executes runbox-init, as
 * init does. */
#include "unit_util.h"
#include "sandbox/exit_report.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>

static const char *reaper;

/* A program that exits with code (or is killed by signal when code < 0)
 * after 50 ms, and a stray child that ends after stray_ms (none when
 * negative); runbox-init becomes their parent. Returns runbox-init's wait
 * status and fills *report (false: none came). */
static int run_stray(int code, int stray_ms, bool *reported, rbx_exit_report *report)
{
    int status_pipe[2];
    assert_int_equal(pipe2(status_pipe, O_CLOEXEC), 0);
    pid_t init = fork();
    assert_true(init >= 0);
    if (init == 0) {
        pid_t stray = stray_ms >= 0 ? fork() : 1;
        if (stray == 0) {
            usleep((useconds_t)stray_ms * 1000);
            _exit(0);
        }
        pid_t program = fork();
        if (program == 0) {
            usleep(50 * 1000);
            if (code < 0)
                raise(-code);
            _exit(code);
        }
        char fd_text[16], pid_text[16];
        snprintf(fd_text, sizeof fd_text, "%d", status_pipe[1]);
        snprintf(pid_text, sizeof pid_text, "%d", (int)program);
        fcntl(status_pipe[1], F_SETFD, 0);
        char *argv[] = {"runbox-init", fd_text, pid_text, NULL};
        execv(reaper, argv);
        _exit(127);
    }
    close(status_pipe[1]);
    ssize_t n = read(status_pipe[0], report, sizeof *report);
    *reported = n == (ssize_t)sizeof *report;
    close(status_pipe[0]);
    int status;
    assert_int_equal(waitpid(init, &status, 0), init);
    return status;
}

/* ... with a stray child that outlives the program. */
static int run_reaper(int code, bool *reported, rbx_exit_report *report)
{
    return run_stray(code, 300, reported, report);
}

static void test_it_reports_how_the_program_ended_and_exits(void **state)
{
    (void)state;
    bool reported;
    rbx_exit_report report;
    int status = run_reaper(7, &reported, &report);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_true(reported);
    assert_true(WIFEXITED(report.wait_status));
    assert_int_equal(WEXITSTATUS(report.wait_status), 7);
    status = run_reaper(-SIGKILL, &reported, &report);
    assert_true(reported && WIFSIGNALED(report.wait_status));
    assert_int_equal(WTERMSIG(report.wait_status), SIGKILL);
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* The report says init was the last process only when it was: runbox
 * then answers without waiting for init's exit (rbx_watch.leave_init), so
 * a claim made while a child still ran would answer with a process of the
 * execution alive. */
static void test_it_says_whether_it_was_the_last_process(void **state)
{
    (void)state;
    bool reported;
    rbx_exit_report report;
    memset(&report, 0x55, sizeof report);
    run_stray(0, -1, &reported, &report);
    assert_true(reported);
    assert_int_equal(report.last, 1); /* no other child */
    memset(&report, 0x55, sizeof report);
    run_stray(0, 0, &reported, &report);
    assert_true(reported);
    assert_int_equal(report.last, 1); /* one that ended first: reaped, not counted */
    memset(&report, 0x55, sizeof report);
    run_stray(0, 300, &reported, &report);
    assert_true(reported);
    assert_int_equal(report.last, 0); /* one that still runs */
}

/* A report of an init restored from a checkpoint of an earlier runbox has
 * no last field: it is whole, and does not say init was the last. */
static void test_a_report_without_its_last_field_is_whole_and_not_last(void **state)
{
    (void)state;
    rbx_exit_report report;
    memset(&report, 0x55, sizeof report);
    assert_true(rbx_exit_report_whole(&report, (long)offsetof(rbx_exit_report, last)));
    assert_int_equal(report.last, 0);
    report.last = 1;
    assert_true(rbx_exit_report_whole(&report, (long)sizeof report));
    assert_int_equal(report.last, 1);
    assert_false(rbx_exit_report_whole(&report, 0));
    assert_false(rbx_exit_report_whole(&report, 100));
    assert_false(rbx_exit_report_whole(&report, -1));
}

static void test_it_refuses_arguments_it_does_not_take(void **state)
{
    (void)state;
    const char *const bad[][3] = {{"", "1", NULL},  {"3", "", NULL},     {"x", "1", NULL},
                                  {"3", "0", NULL}, {"3", "-1", NULL},   {"3", "1x", NULL},
                                  {"3", NULL, NULL}, {"3", "99999999999", NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            char *argv[4] = {"runbox-init", (char *)bad[i][0], (char *)bad[i][1], NULL};
            execv(reaper, argv);
            _exit(127);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 2)
            fail_msg("case %zu: runbox-init exited with status %d, not 2", i, status);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_reaper PATH-OF-RUNBOX-INIT\n");
        return 2;
    }
    reaper = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_it_reports_how_the_program_ended_and_exits),
        cmocka_unit_test(test_it_says_whether_it_was_the_last_process),
        cmocka_unit_test(test_a_report_without_its_last_field_is_whole_and_not_last),
        cmocka_unit_test(test_it_refuses_arguments_it_does_not_take),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
