/* Unit tests of criu_kernel.c: criu's dump reads a tree's sockets through
 * socket diagnostics and its network namespace's connection tracking
 * through ctnetlink, and a kernel without the module that serves one
 * refuses the request, which `criu check` does not notice. The probes must
 * tell the two apart: this host answers for unix, TCP and UDP sockets and
 * for ctnetlink, and no module serves an inet protocol that does not
 * exist. */
#include "unit_util.h"

#include "sandbox/criu_kernel.h"

#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

static void what_a_checkpoint_reads_is_answered_here(void **state)
{
    (void)state;
    assert_int_equal(rbx_criu_socket_diag(AF_UNIX, 0), 0);
    assert_int_equal(rbx_criu_socket_diag(AF_INET, IPPROTO_TCP), 0);
    assert_int_equal(rbx_criu_socket_diag(AF_INET, IPPROTO_UDP), 0);
    if (geteuid() != 0) {
        /* ctnetlink answers root alone; checkpoints need root anyway. */
        assert_int_equal(rbx_criu_conntrack(), -EPERM);
        return;
    }
    assert_int_equal(rbx_criu_conntrack(), 0);
    char why[200] = "";
    bool gap = rbx_criu_kernel_gap(why, sizeof why);
    assert_false(gap);
    assert_string_equal(why, "");
}

static void a_protocol_no_module_serves_is_told_apart(void **state)
{
    (void)state;
    /* 253 is set aside for experiments (RFC 3692): no diagnostics module has it. */
    assert_int_equal(rbx_criu_socket_diag(AF_INET, 253), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(what_a_checkpoint_reads_is_answered_here),
        cmocka_unit_test(a_protocol_no_module_serves_is_told_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
