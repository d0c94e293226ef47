/* Unit tests of runbox-net's seccomp filter (src/sandbox/net_relay_policy.c),
 * the very program runbox-net installs (the header the build generates):
 * each test forks, installs it under no_new_privs as runbox-net does, and
 * tries one thing a relay of IP sockets never does, or one it must. */
#include "unit_util.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "relay_seccomp_program.h"

/* What the attempt returned in the filtered child: its errno, or 0 when it
 * succeeded. 255: the filter could not be installed. */
static int errno_under_filter(int (*attempt)(void))
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct sock_fprog program = {
            .len = sizeof rbx_relay_seccomp_program / sizeof rbx_relay_seccomp_program[0],
            .filter = (struct sock_filter *)rbx_relay_seccomp_program,
        };
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0)
            _exit(255);
        errno = 0;
        int rc = attempt();
        _exit(rc < 0 ? (errno & 0xff) : 0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status))
        fail_msg("the filtered child was killed by signal %d", WTERMSIG(status));
    assert_int_not_equal(WEXITSTATUS(status), 255);
    return WEXITSTATUS(status);
}

static int run_a_program(void)
{
    char *argv[] = {"/bin/true", NULL};
    char *envp[] = {NULL};
    return execve("/bin/true", argv, envp);
}
static int unix_socket(void) { return socket(AF_UNIX, SOCK_STREAM, 0); }
static int netlink_socket(void) { return socket(AF_NETLINK, SOCK_RAW, 0); }
static int packet_socket(void) { return socket(AF_PACKET, SOCK_RAW, 0); }
static int family_past_the_last(void) { return socket(AF_MAX + 7, SOCK_STREAM, 0); }
static int udp_socket(void) { return socket(AF_INET, SOCK_DGRAM, 0); }
static int tcp6_socket(void) { return socket(AF_INET6, SOCK_STREAM, 0); }
static int signal_the_parent(void) { return kill(getppid(), 0); }
static int new_mount_namespace(void) { return unshare(CLONE_NEWNS); }
static int trace_the_parent(void) { return (int)ptrace(PTRACE_ATTACH, getppid(), NULL, NULL); }
static int mount_a_tmpfs(void) { return mount("x", "/tmp", "tmpfs", 0, NULL); }
static int clone_into_a_user_namespace(void)
{
    long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, NULL);
    if (pid == 0)
        _exit(0);
    return pid < 0 ? -1 : 0;
}
static int plain_fork(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return pid < 0 ? -1 : 0;
}
static int become_root_again(void) { return setuid(0); }
static int another_filter(void) { return prctl(PR_SET_DUMPABLE, 1, 0, 0, 0); }

static void test_it_refuses_to_run_another_program(void **state)
{
    (void)state;
    assert_int_equal(errno_under_filter(run_a_program), EPERM);
}

static void test_it_refuses_sockets_other_than_ip(void **state)
{
    (void)state;
    assert_int_equal(errno_under_filter(unix_socket), EAFNOSUPPORT);
    assert_int_equal(errno_under_filter(netlink_socket), EAFNOSUPPORT);
    assert_int_equal(errno_under_filter(packet_socket), EAFNOSUPPORT);
    assert_int_equal(errno_under_filter(family_past_the_last), EAFNOSUPPORT);
}

static void test_it_allows_the_ip_sockets_it_relays_with(void **state)
{
    (void)state;
    assert_int_equal(errno_under_filter(udp_socket), 0);
    assert_int_equal(errno_under_filter(tcp6_socket), 0);
}

static void test_it_refuses_signals_tracing_and_namespaces(void **state)
{
    (void)state;
    assert_int_equal(errno_under_filter(signal_the_parent), EPERM);
    assert_int_equal(errno_under_filter(trace_the_parent), EPERM);
    assert_int_equal(errno_under_filter(new_mount_namespace), EPERM);
    assert_int_equal(errno_under_filter(clone_into_a_user_namespace), EPERM);
    assert_int_equal(errno_under_filter(mount_a_tmpfs), EPERM);
}

static void test_it_refuses_to_change_its_credentials_or_confinement(void **state)
{
    (void)state;
    assert_int_equal(errno_under_filter(become_root_again), EPERM);
    assert_int_equal(errno_under_filter(another_filter), EPERM);
}

static void test_it_still_forks_as_a_plain_process(void **state)
{
    (void)state;
    assert_int_equal(errno_under_filter(plain_fork), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_it_refuses_to_run_another_program),
        cmocka_unit_test(test_it_refuses_sockets_other_than_ip),
        cmocka_unit_test(test_it_allows_the_ip_sockets_it_relays_with),
        cmocka_unit_test(test_it_refuses_signals_tracing_and_namespaces),
        cmocka_unit_test(test_it_refuses_to_change_its_credentials_or_confinement),
        cmocka_unit_test(test_it_still_forks_as_a_plain_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
