/* Watching a running sandbox: one poll loop that drains output as it is
 * produced, feeds stdin, and enforces the deadline and cancellation. The
 * loop sleeps in poll() only; no timers, no busy waiting. It returns when
 * init has exited and both output pipes are closed, which means no process
 * of the execution is left; or, for a caller that leaves init to be reaped
 * later (rbx_watch.leave_init), when init reported that it was the last
 * and the pipes are closed: init's exit then tears the namespaces down
 * (some hundreds of microseconds) off the execution's path. */
#include "base/error.h"
#include "base/fsutil.h"
#include "base/trace.h"
#include "runbox.h"
#include "sandbox/output.h"
#include "sandbox/sandbox.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_CHUNK (256 * 1024)

enum { P_OUT, P_ERR, P_REPORT, P_INIT, P_STATUS, P_STDIN, P_CANCEL, P_KILL, P_COUNT };

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Reads what is there. Returns 1 on data, 0 at end of stream, -1 to cancel. */
static int drain(rbx_watch *watch, rbx_output *output, int *fd, char *buf)
{
    ssize_t n = read(*fd, buf, READ_CHUNK);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 1;
    if (n <= 0) {
        close_fd(fd);
        return rbx_output_flush(output) != 0 ? -1 : 0;
    }
    if (watch->trace && !watch->trace->at_us[RBX_PHASE_FIRST_BYTE])
        rbx_trace_mark(watch->trace, RBX_PHASE_FIRST_BYTE);
    return rbx_output_deliver(output, buf, (size_t)n) != 0 ? -1 : 1;
}

/* Init's exit report, read as it arrives: whether it says init was the
 * last process (the pipe is read once either way). */
static bool read_status(rbx_sandbox *sandbox, rbx_exit_report *report, bool *reported)
{
    ssize_t n = read(sandbox->status_fd, report, sizeof *report);
    if (n < 0 && errno == EINTR)
        return false;
    *reported = rbx_exit_report_whole(report, n);
    close_fd(&sandbox->status_fd);
    return *reported && report->last;
}

/* Returns -1 when the channel's reader asks to cancel. */
static int read_report(rbx_watch *watch, int *fd)
{
    size_t room = sizeof watch->report - 1 - watch->report_len;
    ssize_t n = room ? read(*fd, watch->report + watch->report_len, room) : 0;
    if (n < 0 && errno == EINTR)
        return 0;
    if (n <= 0) {
        close_fd(fd);
        return 0;
    }
    watch->report_len += (size_t)n;
    watch->report[watch->report_len] = 0;
    /* The code passed its syntax check: the rest is the program's channel,
     * and the report stays "R" (so it never fills). */
    if (watch->on_channel && watch->report[0] == 'R' && watch->report_len > 1) {
        int rc = watch->on_channel(watch->channel_user, watch->report + 1, watch->report_len - 1);
        watch->report_len = 1;
        watch->report[1] = 0;
        return rc != 0 ? -1 : 0;
    }
    return 0;
}

static void feed_stdin(rbx_watch *watch, int *fd, size_t *sent)
{
    ssize_t n = rbx_write_nosignal(*fd, watch->stdin_data + *sent, watch->stdin_len - *sent);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n < 0) {
        close_fd(fd); /* the program stopped reading: what it did not take is dropped */
        return;
    }
    *sent += (size_t)n;
    if (*sent == watch->stdin_len)
        close_fd(fd);
}

static void stop(rbx_sandbox *sandbox, bool *killed)
{
    if (!*killed)
        rbx_sandbox_kill(sandbox);
    *killed = true;
}

bool rbx_supervise(rbx_sandbox *sandbox, rbx_watch *watch, rbx_exit_report *report)
{
    char *buf = malloc(READ_CHUNK);
    rbx_output out = {.stream = RBX_STDOUT,
                      .capture = watch->out,
                      .on_output = watch->on_output,
                      .user = watch->user};
    rbx_output err = {.stream = RBX_STDERR,
                      .capture = watch->err,
                      .on_output = watch->on_output,
                      .user = watch->user};
    int64_t deadline = rbx_now_us() + (int64_t)(watch->timeout_s * 1e6);
    bool killed = false, init_alive = true, reported = false;
    size_t sent = 0;
    int cancel_fd = watch->cancel_fd;
    if (!buf) {
        stop(sandbox, &killed);
        watch->cancelled = true;
    }
    if (sandbox->stdin_fd >= 0 && watch->stdin_len == 0)
        close_fd(&sandbox->stdin_fd);

    while (sandbox->stdout_fd >= 0 || sandbox->stderr_fd >= 0 || init_alive) {
        struct pollfd fds[P_COUNT] = {
            [P_OUT] = {.fd = sandbox->stdout_fd, .events = POLLIN},
            [P_ERR] = {.fd = sandbox->stderr_fd, .events = POLLIN},
            [P_REPORT] = {.fd = sandbox->report_fd, .events = POLLIN},
            [P_INIT] = {.fd = init_alive ? sandbox->pidfd : -1, .events = POLLIN},
            [P_STATUS] = {.fd = init_alive && watch->leave_init ? sandbox->status_fd : -1,
                          .events = POLLIN},
            [P_STDIN] = {.fd = sandbox->stdin_fd, .events = POLLOUT},
            [P_CANCEL] = {.fd = killed ? -1 : cancel_fd, .events = POLLIN},
            [P_KILL] = {.fd = killed ? -1 : watch->kill_fd, .events = POLLIN},
        };
        int wait_ms = -1;
        if (!killed) {
            int64_t left = deadline - rbx_now_us();
            wait_ms = left <= 0 ? 0 : (int)((left + 999) / 1000);
        }
        int ready = poll(fds, P_COUNT, wait_ms);
        if (ready < 0 && errno != EINTR)
            break;
        if (!killed && rbx_now_us() >= deadline) {
            watch->timed_out = true;
            stop(sandbox, &killed);
        }
        if (ready <= 0)
            continue;
        if (fds[P_OUT].revents && drain(watch, &out, &sandbox->stdout_fd, buf) < 0) {
            watch->cancelled = true;
            stop(sandbox, &killed);
        }
        if (fds[P_ERR].revents && drain(watch, &err, &sandbox->stderr_fd, buf) < 0) {
            watch->cancelled = true;
            stop(sandbox, &killed);
        }
        if (fds[P_REPORT].revents && read_report(watch, &sandbox->report_fd) < 0 && !killed) {
            watch->cancelled = true;
            stop(sandbox, &killed);
        }
        if (fds[P_STDIN].revents)
            feed_stdin(watch, &sandbox->stdin_fd, &sent);
        if ((fds[P_CANCEL].revents || fds[P_KILL].revents) && !killed) {
            watch->cancelled = true;
            stop(sandbox, &killed);
        }
        if (fds[P_STATUS].revents && read_status(sandbox, report, &reported)) {
            init_alive = false; /* init alone, exiting: the pipes close next */
            rbx_trace_mark(watch->trace, RBX_PHASE_EXIT);
        }
        if (fds[P_INIT].revents) {
            init_alive = false; /* the namespace is gone: the pipes close next */
            rbx_trace_mark(watch->trace, RBX_PHASE_EXIT);
        }
    }
    /* Whatever the report still holds arrived before init exited. */
    while (sandbox->report_fd >= 0)
        (void)read_report(watch, &sandbox->report_fd);
    free(buf);
    if (reported && report->last)
        return true; /* init is the caller's to reap (rbx_sandbox_reap) */
    bool ended = rbx_sandbox_reap(sandbox, reported ? NULL : report);
    return reported || ended;
}
