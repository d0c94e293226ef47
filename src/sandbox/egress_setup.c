/* The egress policy put in place beside the making of a sandbox's tap
 * (egress_setup.h). */
#include "sandbox/egress_setup.h"
#include "base/error.h"
#include "egress/rules.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* How long init may take to hand its sockets over: it does so right after
 * it brings its loopback up, before it builds its root; a dead init closes
 * its end of the channel, which ends the wait at once. */
#define SOCKETS_WAIT_MS 10000

/* The netlink and resolver sockets init opened in the sandbox's network
 * namespace (spawn.c, hand_over_egress_sockets). */
static bool receive_sockets(int channel, int fds[2])
{
    char byte, control[CMSG_SPACE(2 * sizeof(int))];
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    struct pollfd pfd = {.fd = channel, .events = POLLIN};
    ssize_t n = poll(&pfd, 1, SOCKETS_WAIT_MS) == 1 ? recvmsg(channel, &msg, MSG_CMSG_CLOEXEC)
                                                     : -1;
    struct cmsghdr *cmsg = n == 1 ? CMSG_FIRSTHDR(&msg) : NULL;
    if (!cmsg || cmsg->cmsg_type != SCM_RIGHTS || cmsg->cmsg_len != CMSG_LEN(2 * sizeof(int)))
        return false;
    memcpy(fds, CMSG_DATA(cmsg), 2 * sizeof(int));
    return true;
}

static void *work(void *arg)
{
    rbx_egress_setup *setup = arg;
    /* First use in this process: done while init is released and brings
     * its loopback up, before its sockets can come. */
    if (!rbx_egress_rules_ready())
        rbx_egress_rules_prepare(setup->plan);
    rbx_egress_guard_prepare();
    if (!(setup->received = receive_sockets(setup->channel, setup->fds))) {
        setup->status = rbx_fail(&setup->err, RBX_ESYSTEM,
                                 "the sandbox could not set up its egress policy");
        return NULL;
    }
    int64_t from = rbx_now_us();
    setup->status = rbx_egress_plan_has_rules(setup->plan)
                        ? rbx_egress_rules_install(setup->fds[0], setup->plan, &setup->err)
                        : RBX_OK;
    setup->work_us = rbx_now_us() - from;
    return NULL;
}

void rbx_egress_setup_start(rbx_egress_setup *setup, const rbx_egress_plan *plan, int channel)
{
    *setup = (rbx_egress_setup){
        .plan = plan, .channel = channel, .fds = {-1, -1}, .status = RBX_OK};
    setup->running = pthread_create(&setup->thread, NULL, work, setup) == 0;
    setup->on_finish = !setup->running; /* no thread: the finish does it */
}

static void close_received(rbx_egress_setup *setup)
{
    for (int i = 0; setup->received && i < 2; i++)
        if (setup->fds[i] >= 0) {
            close(setup->fds[i]);
            setup->fds[i] = -1;
        }
}

static void join(rbx_egress_setup *setup)
{
    if (setup->running)
        pthread_join(setup->thread, NULL);
    setup->running = false;
}

rbx_status rbx_egress_setup_finish(rbx_egress_setup *setup, rbx_egress_guard **guard,
                                   rbx_error *err)
{
    *guard = NULL;
    join(setup);
    if (setup->on_finish) {
        setup->on_finish = false;
        work(setup);
    }
    if (setup->status != RBX_OK) {
        *err = setup->err;
        close_received(setup);
        return err->status;
    }
    /* The resolver's guard takes both sockets, also when it fails. */
    *guard = rbx_egress_guard_start(setup->fds[0], setup->fds[1], setup->plan, err);
    setup->fds[0] = setup->fds[1] = -1;
    setup->received = false;
    return *guard ? RBX_OK : err->status;
}

void rbx_egress_setup_abandon(rbx_egress_setup *setup)
{
    join(setup);
    setup->on_finish = false;
    close_received(setup);
}
