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

static void work(rbx_egress_setup *setup)
{
    /* First use in this process: done while init is released and brings
     * its loopback up, before its sockets can come. */
    if (!rbx_egress_rules_ready())
        rbx_egress_rules_prepare(setup->plan);
    rbx_egress_guard_prepare();
    if (!(setup->received = receive_sockets(setup->channel, setup->fds))) {
        setup->status = rbx_fail(&setup->err, RBX_ESYSTEM,
                                 "the sandbox could not set up its egress policy");
        return;
    }
    int64_t from = rbx_now_us();
    setup->status = rbx_egress_plan_has_rules(setup->plan)
                        ? rbx_egress_rules_install(setup->fds[0], setup->plan, &setup->err)
                        : RBX_OK;
    setup->work_us = rbx_now_us() - from;
}

/* On a worker: the work, then its end told (the last touch of setup). */
static void job(void *arg)
{
    rbx_egress_setup *setup = arg;
    work(setup);
    pthread_mutex_lock(&setup->lock);
    setup->running = false;
    pthread_cond_signal(&setup->over);
    pthread_mutex_unlock(&setup->lock);
}

/* The process's workers for this, made at its first network-on start. A
 * fork of runbox has none of its threads: its child makes its own. */
static pthread_mutex_t workers_lock = PTHREAD_MUTEX_INITIALIZER;
static rbx_workers *workers;
static pthread_once_t fork_watch = PTHREAD_ONCE_INIT;

static void forget_workers(void)
{
    workers = NULL;
    pthread_mutex_init(&workers_lock, NULL);
}

static void watch_forks(void)
{
    pthread_atfork(NULL, NULL, forget_workers);
}

static rbx_workers *process_workers(void)
{
    pthread_once(&fork_watch, watch_forks);
    pthread_mutex_lock(&workers_lock);
    if (!workers) /* as many as sandboxes start at once, for the spares' idle time */
        workers = rbx_workers_new(4, 2000);
    rbx_workers *w = workers;
    pthread_mutex_unlock(&workers_lock);
    return w;
}

void rbx_egress_setup_start(rbx_egress_setup *setup, const rbx_egress_plan *plan, int channel)
{
    *setup = (rbx_egress_setup){
        .plan = plan, .channel = channel, .fds = {-1, -1}, .status = RBX_OK, .started = true};
    pthread_mutex_init(&setup->lock, NULL);
    pthread_cond_init(&setup->over, NULL);
    rbx_workers *w = process_workers();
    setup->running = true;
    if (!w || rbx_workers_run(w, job, setup) != 0) {
        setup->running = false;
        setup->on_finish = true; /* no worker: the finish does it */
    }
}

static void close_received(rbx_egress_setup *setup)
{
    for (int i = 0; setup->received && i < 2; i++)
        if (setup->fds[i] >= 0) {
            close(setup->fds[i]);
            setup->fds[i] = -1;
        }
}

/* Waits for the worker's end of the work; again, or after no start, at
 * once. */
static void join(rbx_egress_setup *setup)
{
    if (!setup->started)
        return;
    pthread_mutex_lock(&setup->lock);
    while (setup->running)
        pthread_cond_wait(&setup->over, &setup->lock);
    pthread_mutex_unlock(&setup->lock);
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
    if (setup->started) {
        pthread_mutex_destroy(&setup->lock);
        pthread_cond_destroy(&setup->over);
        setup->started = false;
    }
}
