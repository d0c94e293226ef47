/* A kernel's sandbox (see kernel.h). */
#include "sandbox/kernel.h"
#include "base/error.h"
#include "runbox.h"
#include "sandbox/checkpoint.h"
#include "sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

int rbx_kernel_box_send(rbx_kernel_box *box, const char *data, size_t len)
{
    while (len) {
        /* MSG_NOSIGNAL: a driver that is gone is an error here, not SIGPIPE. */
        ssize_t n = send(box->channel, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The end of what the driver printed on stderr before it failed (its
 * error comes last), for the message. */
static void tail_of_stderr(int fd, char *out, size_t size)
{
    char buf[8192];
    size_t got = 0;
    ssize_t n;
    (void)fcntl(fd, F_SETFL, O_NONBLOCK);
    while (got < sizeof buf && (n = read(fd, buf + got, sizeof buf - got)) > 0)
        got += (size_t)n;
    size_t start = got > size - 1 ? got - (size - 1) : 0;
    memcpy(out, buf + start, got - start);
    out[got - start] = 0;
    for (char *p = out; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

/* Waits for "R" on the report pipe, or for init's end, or the deadline. */
static rbx_status await_ready(rbx_kernel_box *box, double ready_s, rbx_error *err)
{
    int64_t deadline = rbx_now_ms() + (int64_t)(ready_s * 1000);
    char report[512];
    size_t got = 0;
    for (;;) {
        int64_t left = deadline - rbx_now_ms();
        if (left <= 0)
            return rbx_fail(err, RBX_ESYSTEM, "the kernel did not start within %g s", ready_s);
        struct pollfd fds[2] = {{.fd = box->sandbox.report_fd, .events = POLLIN},
                                {.fd = box->sandbox.pidfd, .events = POLLIN}};
        if (poll(fds, 2, (int)left) < 0 && errno != EINTR)
            return rbx_fail(err, RBX_ESYSTEM, "cannot wait for the kernel: %s", strerror(errno));
        if (fds[0].revents) {
            ssize_t n = read(box->sandbox.report_fd, report + got, sizeof report - 1 - got);
            if (n > 0) {
                got += (size_t)n;
                report[got] = 0;
                if (report[got - 1] == 'R' && report[0] != 'E')
                    return RBX_OK;
                continue;
            }
        }
        if (fds[0].revents || fds[1].revents) {
            char tail[400];
            tail_of_stderr(box->sandbox.stderr_fd, tail, sizeof tail);
            if (got && report[0] == 'E')
                return rbx_fail(err, RBX_ESYSTEM,
                                "the kernel's sandbox failed to start: cannot %.300s", report + 1);
            return rbx_fail(err, RBX_ESYSTEM, "the kernel exited as it started%s%.380s",
                            tail[0] ? ": " : "", tail);
        }
    }
}

/* runbox's end of the channel init made (rbx_sandbox_spec.channel_inside):
 * init holds it at the number of the one runbox made, which goes. */
static rbx_status take_channel(rbx_kernel_box *box, int ours, rbx_error *err)
{
    int taken = (int)syscall(SYS_pidfd_getfd, box->sandbox.pidfd, ours, 0);
    if (taken < 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot take the kernel's channel from its sandbox: %s",
                        strerror(errno));
    box->channel = taken;
    box->channel_in_init = ours;
    return RBX_OK;
}

/* The driver, once it runs: its process, and its pipes made non-blocking. */
static rbx_status find_driver(rbx_kernel_box *box, rbx_error *err)
{
    /* Read between calls too (to drop what belongs to none): never block. */
    (void)fcntl(box->sandbox.stdout_fd, F_SETFL, O_NONBLOCK);
    (void)fcntl(box->sandbox.stderr_fd, F_SETFL, O_NONBLOCK);
    box->program = rbx_sandbox_program(&box->sandbox);
    box->program_pidfd = box->program > 0 ? (int)syscall(SYS_pidfd_open, box->program, 0) : -1;
    if (box->program_pidfd < 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot find the kernel's process: %s", strerror(errno));
    return RBX_OK;
}

rbx_status rbx_kernel_box_start(const rbx_sandbox_spec *spec, const char *greeting,
                                size_t greeting_len, double ready_s, rbx_kernel_box *box,
                                rbx_error *err)
{
    memset(box, 0, sizeof *box);
    box->channel = box->program_pidfd = box->channel_in_init = -1;
    box->program = -1;
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot create the kernel's channel: %s",
                        strerror(errno));
    rbx_sandbox_spec own = *spec;
    own.code_fd = pair[1];
    own.channel_inside = true;
    own.channel_ours_fd = pair[0];
    rbx_status status = rbx_sandbox_start(&own, &box->sandbox, err);
    close(pair[1]);
    if (status != RBX_OK) {
        close(pair[0]);
        return status;
    }
    if (box->sandbox.channel_inside) {
        status = take_channel(box, pair[0], err);
        close(pair[0]);
    } else {
        box->channel = pair[0];
    }
    if (status == RBX_OK && greeting && rbx_kernel_box_send(box, greeting, greeting_len) != 0)
        status = rbx_fail(err, RBX_ESYSTEM, "cannot start the kernel: %s", strerror(errno));
    if (status == RBX_OK)
        status = await_ready(box, ready_s, err);
    if (status == RBX_OK)
        status = find_driver(box, err);
    if (status != RBX_OK)
        rbx_kernel_box_stop(box);
    return status;
}

rbx_status rbx_kernel_box_restore(const rbx_sandbox_spec *spec, const rbx_checkpoint *cp,
                                  const char *criu, const char *dir, rbx_kernel_box *box,
                                  rbx_error *err)
{
    memset(box, 0, sizeof *box);
    box->channel = box->program_pidfd = box->channel_in_init = -1;
    box->program = -1;
    rbx_status status = rbx_sandbox_restore(spec, cp, criu, dir, &box->sandbox, err);
    if (status != RBX_OK)
        return status;
    status = take_channel(box, cp->channel_fd, err);
    if (status == RBX_OK)
        status = find_driver(box, err);
    if (status != RBX_OK)
        rbx_kernel_box_stop(box);
    return status;
}

int rbx_kernel_box_interrupt(const rbx_kernel_box *box, bool group)
{
    if (box->program_pidfd < 0)
        return -1;
    if (syscall(SYS_pidfd_send_signal, box->program_pidfd, SIGINT, NULL, 0) != 0)
        return -1;
    /* The driver is its session's and group's leader (setsid): its group
     * is its pid, which cannot be reused while the pidfd above answered. */
    return group ? kill(-box->program, SIGINT) : 0;
}

bool rbx_kernel_box_alive(const rbx_kernel_box *box)
{
    struct pollfd fd = {.fd = box->sandbox.pidfd, .events = POLLIN};
    return box->sandbox.pidfd >= 0 && poll(&fd, 1, 0) == 0;
}

void rbx_kernel_box_stop(rbx_kernel_box *box)
{
    rbx_sandbox_kill(&box->sandbox);
    rbx_sandbox_reap(&box->sandbox, NULL);
    rbx_sandbox_close(&box->sandbox);
    if (box->channel >= 0)
        close(box->channel);
    if (box->program_pidfd >= 0)
        close(box->program_pidfd);
    box->channel = box->program_pidfd = -1;
    box->program = -1;
}
