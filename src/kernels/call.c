/* One call on a kernel (see kernels/call.h). One poll loop: the sandbox's
 * stdout and stderr, the driver's channel, init's pidfd, the caller's
 * cancel and the deadline. */
#include "kernels/call.h"
#include "base/capture.h"
#include "base/error.h"
#include "base/trace.h"
#include "engine/engine.h"
#include "execution/given.h"
#include "execution/shown.h"
#include "kernels/kernels.h"
#include "kernels/wire.h"
#include "languages/classify.h"
#include "runbox.h"
#include "sandbox/cgroup.h"
#include "sandbox/kernel.h"
#include "sandbox/output.h"
#include "sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* How long code may take to yield to an interrupt before its kernel goes. */
#define INTERRUPT_GRACE_S 2.0
#define READ_CHUNK (64 * 1024)
/* A channel line longer than any rich output that could be kept is skipped
 * to its end as it comes (and counted as dropped): what a kernel writes
 * holds no more of the server's memory than its results may. */
#define LINE_MAX_BYTES (RBX_RESULTS_CAP + ((size_t)1 << 20))

/* A call's stdout or stderr, closed until the driver's mark for the call
 * (kernels/wire.h): the bytes before it are an earlier call's, such as the
 * tail of code that ended its call early with a forged "done". */
typedef struct stream_gate {
    char mark[48];
    size_t mark_len;
    size_t matched; /* bytes of the mark the stream ended with so far */
    bool open;
} stream_gate;

/* How many bytes of data belong to no call (all of them while the gate
 * stays closed, else those up to the end of the mark). The mark's first
 * byte, RS, comes again only as its last, so a mismatch restarts the match
 * at that byte without losing an overlap. */
static size_t gate_pass(stream_gate *gate, const char *data, size_t len)
{
    for (size_t i = 0; !gate->open && i < len; i++) {
        if (data[i] == gate->mark[gate->matched])
            gate->matched++;
        else
            gate->matched = data[i] == gate->mark[0] ? 1 : 0;
        if (gate->matched == gate->mark_len) {
            gate->open = true;
            return i + 1;
        }
    }
    return gate->open ? 0 : len;
}

typedef struct call_state {
    rbx_kernel *k;
    const rbx_kernel_call *call;
    rbx_capture out_capture, err_capture;
    rbx_output out, err;
    stream_gate out_gate, err_gate;
    char *line; /* the channel's unfinished line */
    size_t line_len, line_cap;
    bool skipping_line; /* past LINE_MAX_BYTES: dropped to its newline */
    rbx_shown shown; /* the call's rich outputs (execution/shown.h) */
    int64_t id;
    bool started; /* the driver took this call ("start" with its id) */
    bool held;    /* it never did: earlier code held the kernel to the end */
    bool done, died, broken, timed_out, cancelled, interrupted;
    rbx_kernel_event finish;
    rbx_exit_report report;
    bool reported;
} call_state;

/* What a kernel's processes printed between calls (a background job, a
 * timer) belongs to no call: it is dropped before the next one starts. */
static void drop_stale(rbx_kernel *k)
{
    char buf[4096];
    int pipes[] = {k->box.sandbox.stdout_fd, k->box.sandbox.stderr_fd}; /* non-blocking */
    for (size_t i = 0; i < 2; i++)
        while (pipes[i] >= 0 && read(pipes[i], buf, sizeof buf) > 0)
            ;
    while (recv(k->box.channel, buf, sizeof buf, MSG_DONTWAIT) > 0)
        ;
}

static void on_event(call_state *s, rbx_kernel_event *event)
{
    if (!s->started) {
        /* Until the driver takes this call, its events are an earlier
         * call's (displays of code still running, a forged "done"). */
        s->started = event->type == RBX_KERNEL_EVENT_START && event->id == s->id;
    } else if (event->type == RBX_KERNEL_EVENT_DISPLAY) {
        rbx_shown_add(&s->shown, event->output);
        s->cancelled = s->cancelled || s->shown.cancelled;
    } else if (event->type == RBX_KERNEL_EVENT_DONE && event->id == s->id) {
        s->done = true;
        s->finish = *event;
        event->output = NULL;
    }
    rbx_kernel_event_free(event);
}

/* Takes what the channel has; each whole line is an event. */
static void read_channel(call_state *s)
{
    char buf[READ_CHUNK];
    ssize_t n = recv(s->k->box.channel, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        s->broken = true; /* the driver closed it: the kernel is going */
        return;
    }
    const char *data = buf;
    if (s->skipping_line) {
        const char *newline = memchr(buf, '\n', (size_t)n);
        size_t skipped = newline ? (size_t)(newline - buf) + 1 : (size_t)n;
        s->shown.dropped += skipped;
        s->skipping_line = !newline;
        data += skipped;
        n -= (ssize_t)skipped;
    }
    if (s->line_len + (size_t)n + 1 > LINE_MAX_BYTES) {
        /* Longer than anything kept could be: dropped, with what it has so
         * far, up to its newline; a newline in this chunk ends it. */
        const char *newline = memchr(data, '\n', (size_t)n);
        size_t skipped = newline ? (size_t)(newline - data) + 1 : (size_t)n;
        s->shown.dropped += s->line_len + skipped;
        s->line_len = 0;
        s->skipping_line = !newline;
        data += skipped;
        n -= (ssize_t)skipped; /* the rest, if any, is less than a chunk */
    }
    if (s->line_len + (size_t)n + 1 > s->line_cap) {
        size_t cap = (s->line_len + (size_t)n + 1) * 2;
        cap = cap < LINE_MAX_BYTES ? cap : LINE_MAX_BYTES;
        char *grown = realloc(s->line, cap);
        if (!grown) {
            s->broken = true;
            return;
        }
        s->line = grown;
        s->line_cap = cap;
    }
    memcpy(s->line + s->line_len, data, (size_t)n);
    s->line_len += (size_t)n;
    char *start = s->line, *newline;
    while (!s->done && (newline = memchr(start, '\n', s->line_len - (size_t)(start - s->line)))) {
        *newline = 0;
        rbx_kernel_event event;
        if (!rbx_kernel_wire_parse(s->k->runtime->kernel_dialect, start, (size_t)(newline - start),
                                   &event))
            s->broken = true; /* not the driver's: user code broke it */
        else
            on_event(s, &event);
        start = newline + 1;
    }
    s->line_len -= (size_t)(start - s->line);
    memmove(s->line, start, s->line_len);
}

static void read_output(call_state *s, int fd, rbx_output *output, stream_gate *gate)
{
    char buf[READ_CHUNK];
    ssize_t n = read(fd, buf, sizeof buf);
    size_t stale = n > 0 ? gate_pass(gate, buf, (size_t)n) : 0;
    if (n > 0 && stale < (size_t)n &&
        rbx_output_deliver(output, buf + stale, (size_t)n - stale) != 0)
        s->cancelled = true;
}

/* After "done": the output the driver wrote before it is in the pipes. */
static void drain_output(call_state *s)
{
    int fds[] = {s->k->box.sandbox.stdout_fd, s->k->box.sandbox.stderr_fd};
    rbx_output *outputs[] = {&s->out, &s->err};
    stream_gate *gates[] = {&s->out_gate, &s->err_gate};
    char buf[READ_CHUNK];
    for (size_t i = 0; i < 2; i++) {
        ssize_t n;
        while (fds[i] >= 0 && (n = read(fds[i], buf, sizeof buf)) > 0) {
            size_t stale = gate_pass(gates[i], buf, (size_t)n);
            if (stale < (size_t)n)
                (void)rbx_output_deliver(outputs[i], buf + stale, (size_t)n - stale);
        }
        (void)rbx_output_flush(outputs[i]);
    }
}

static void interrupt(call_state *s, int64_t *deadline_us)
{
    rbx_kernel_box_interrupt(&s->k->box, s->k->runtime->kernel_interrupt_group);
    s->interrupted = true;
    *deadline_us = rbx_now_us() + (int64_t)(INTERRUPT_GRACE_S * 1e6);
}

/* Until the driver says done, the kernel dies, or the grace after an
 * interrupt runs out (then the caller stops the kernel). */
static void watch(call_state *s)
{
    rbx_kernel_box *box = &s->k->box;
    int64_t deadline = rbx_now_us() + (int64_t)(s->call->timeout_s * 1e6);
    while (!s->done && !s->died && !s->broken) {
        struct pollfd fds[] = {
            {.fd = box->sandbox.stdout_fd, .events = POLLIN},
            {.fd = box->sandbox.stderr_fd, .events = POLLIN},
            {.fd = box->channel, .events = POLLIN},
            {.fd = box->sandbox.pidfd, .events = POLLIN},
            {.fd = s->interrupted ? -1 : s->call->request->cancel_fd, .events = POLLIN},
            {.fd = s->interrupted ? -1 : s->call->kill_fd, .events = POLLIN},
        };
        int64_t left = deadline - rbx_now_us();
        int ready = poll(fds, 6, left <= 0 ? 0 : (int)((left + 999) / 1000));
        if (ready < 0 && errno != EINTR)
            break;
        if (fds[0].revents)
            read_output(s, box->sandbox.stdout_fd, &s->out, &s->out_gate);
        if (fds[1].revents)
            read_output(s, box->sandbox.stderr_fd, &s->err, &s->err_gate);
        if (fds[2].revents)
            read_channel(s);
        if (fds[3].revents)
            s->died = true;
        if (!s->interrupted && (fds[4].revents || fds[5].revents))
            s->cancelled = true;
        if (s->done || s->died || s->broken)
            break;
        if (!s->started && (s->cancelled || rbx_now_us() >= deadline)) {
            /* The driver never took the call: an earlier call's code, which
             * ended that call early, still runs. An interrupt now would
             * stop it and then run this call past its end: the kernel goes. */
            s->timed_out = !s->cancelled;
            s->held = true;
            break;
        }
        if (!s->interrupted && (s->cancelled || rbx_now_us() >= deadline)) {
            s->timed_out = !s->cancelled;
            interrupt(s, &deadline);
        } else if (s->interrupted && rbx_now_us() >= deadline) {
            break; /* it did not yield: the kernel goes */
        }
    }
}

/* The note runbox adds to the error text, and what it says of the kernel. */
static void note(rbx_result *result, const char *text)
{
    const char *nl = result->error_len && result->error[result->error_len - 1] != '\n' ? "\n" : "";
    size_t add = strlen(nl) + strlen(text) + 1;
    char *grown = realloc(result->error, result->error_len + add + 1);
    if (!grown)
        return;
    result->error = grown;
    result->error_len += (size_t)snprintf(grown + result->error_len, add + 1, "%s%s\n", nl, text);
}

static void notes(call_state *s, rbx_result *result, bool lost, bool oom)
{
    char text[256];
    double timeout = s->call->asked_s;
    if (s->held) {
        snprintf(text, sizeof text,
                 "[runbox: %s before the kernel took the call: code of an earlier call, which "
                 "ended that call early, was still running; the kernel was stopped: its state "
                 "is lost]",
                 s->cancelled ? "cancelled" : "timed out");
    } else if (oom) {
        snprintf(text, sizeof text,
                 "[runbox: the kernel reached its memory limit of %llu MiB and was stopped: its "
                 "state is lost; the next call starts a fresh one]",
                 (unsigned long long)(s->k->limits.memory_bytes >> 20));
    } else if ((s->timed_out || s->cancelled) && !lost) {
        snprintf(text, sizeof text, "[runbox: %s; the kernel was interrupted and keeps its state]",
                 s->cancelled ? "cancelled" : "timed out");
        if (s->timed_out)
            snprintf(text, sizeof text,
                     "[runbox: timed out after %g s; the kernel was interrupted and keeps its "
                     "state]",
                     timeout);
    } else if (s->timed_out || s->cancelled) {
        snprintf(text, sizeof text,
                 "[runbox: %s; the code did not stop within %g s of an interrupt, so the kernel "
                 "was stopped: its state is lost]",
                 s->cancelled ? "cancelled" : "timed out", INTERRUPT_GRACE_S);
    } else if (lost) {
        snprintf(text, sizeof text,
                 "[runbox: the kernel exited: its state is lost; the next call starts a fresh "
                 "one]");
    } else {
        return;
    }
    note(result, text);
}

/* The driver's end, from init's report. The driver's channel can close
 * (the interpreter exited) a moment before init has reported and gone:
 * init gets a moment for that, so that os._exit(3) says 3, not a kill. */
static void read_report(call_state *s)
{
    int fd = s->k->box.sandbox.status_fd;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (fd >= 0 && poll(&p, 1, 500) > 0)
        s->reported = read(fd, &s->report, sizeof s->report) == (ssize_t)sizeof s->report;
}

static rbx_status finish(call_state *s, rbx_result *result, bool lost, uint64_t oom_before,
                         const rbx_cgroup_stats *before)
{
    rbx_kernel *k = s->k;
    rbx_outcome outcome = {.timed_out = s->timed_out, .cancelled = s->cancelled};
    if (s->done) {
        outcome.exit_code = s->finish.exit_code;
        outcome.syntax_error = s->finish.status == RBX_KERNEL_SYNTAX;
        if (s->finish.status == RBX_KERNEL_INTERRUPTED && !s->timed_out && !s->cancelled)
            outcome.exit_code = 130; /* the code's own SIGINT or KeyboardInterrupt */
    } else if (s->reported && WIFSIGNALED(s->report.wait_status)) {
        outcome.signal = WTERMSIG(s->report.wait_status);
        outcome.exit_code = 128 + outcome.signal;
    } else if (s->reported && WIFEXITED(s->report.wait_status)) {
        outcome.exit_code = WEXITSTATUS(s->report.wait_status);
        outcome.exit_code = outcome.exit_code ? outcome.exit_code : 1;
    } else {
        outcome.signal = SIGKILL;
        outcome.exit_code = 128 + SIGKILL;
    }
    rbx_cgroup *cg = k->box.sandbox.cgroup;
    outcome.oom_killed = cg && rbx_cgroup_oom_kills(cg) > oom_before &&
                         (lost || !s->done || s->finish.status != RBX_KERNEL_OK);
    if (outcome.timed_out)
        outcome.exit_code = 124;
    result->output = rbx_capture_finish(&s->out_capture, "stdout", &result->truncated_stdout,
                                        &result->output_len);
    result->error = rbx_capture_finish(&s->err_capture, "stderr", &result->truncated_stderr,
                                       &result->error_len);
    if (!result->output || !result->error)
        return RBX_ESYSTEM;
    result->exit_code = outcome.exit_code;
    result->signal = outcome.signal;
    result->timed_out = outcome.timed_out;
    result->cancelled = outcome.cancelled;
    result->success = s->done && outcome.exit_code == 0 && !outcome.timed_out &&
                      !outcome.cancelled && !outcome.oom_killed &&
                      (s->finish.status == RBX_KERNEL_OK || s->finish.status == RBX_KERNEL_EXIT);
    rbx_classify(k->runtime, &outcome, result->error, result->error_len, &result->error_type,
                 &result->exception);
    if (s->done && s->finish.exception[0] && !outcome.timed_out && !outcome.oom_killed) {
        free(result->exception);
        result->exception = strdup(s->finish.exception);
    }
    if (!result->success && !result->error_type)
        result->error_type = "RuntimeError";
    notes(s, result, lost, outcome.oom_killed);
    rbx_cgroup_stats after;
    if (cg && rbx_cgroup_stats_read(cg, &after) == 0) {
        result->cpu_ms = (int64_t)((after.cpu_usec - before->cpu_usec) / 1000);
        result->peak_memory_kb = (int64_t)(after.peak_memory_bytes / 1024);
    }
    result->stateful = true;
    result->execution_count =
        s->done && s->finish.execution_count ? s->finish.execution_count : k->calls;
    return rbx_shown_finish(&s->shown, result);
}

rbx_status rbx_kernel_call_run(rbx_engine *engine, rbx_kernel *k, const rbx_kernel_call *call,
                               rbx_result *result, bool *lost, rbx_error *err)
{
    call_state s = {.k = k, .call = call};
    rbx_shown_init(&s.shown, call->on_output, call->user);
    rbx_capture_init(&s.out_capture, engine->config.output_cap_bytes);
    rbx_capture_init(&s.err_capture, engine->config.output_cap_bytes);
    s.out = (rbx_output){.stream = RBX_STDOUT,
                         .capture = &s.out_capture,
                         .on_output = call->on_output,
                         .user = call->user};
    s.err = (rbx_output){.stream = RBX_STDERR,
                         .capture = &s.err_capture,
                         .on_output = call->on_output,
                         .user = call->user};
    int64_t started = rbx_now_us();
    rbx_cgroup *cg = k->box.sandbox.cgroup;
    rbx_cgroup_stats before = {0};
    if (cg)
        (void)rbx_cgroup_stats_read(cg, &before);
    uint64_t oom_before = cg ? rbx_cgroup_oom_kills(cg) : 0;
    result->limits =
        cg ? (rbx_cgroup_probe()->mode == RBX_CGROUP_V2 ? "cgroup-v2" : "cgroup-v1") : "rlimits";
    result->network = k->network;
    result->cpus = cg ? (double)k->limits.cpu_quota_us / RBX_CPU_PERIOD_US : 0;

    drop_stale(k);
    const rbx_request *request = call->request;
    k->calls++;
    s.id = rbx_kernel_wire_new_id();
    s.out_gate.mark_len = s.err_gate.mark_len =
        rbx_kernel_wire_mark(s.id, s.out_gate.mark, sizeof s.out_gate.mark);
    memcpy(s.err_gate.mark, s.out_gate.mark, sizeof s.err_gate.mark);
    rbx_kernel_wire_call wire = {.id = s.id,
                                 .code = request->code,
                                 .code_len = request->code_len,
                                 .env = request->env,
                                 .env_count = request->env_count,
                                 .cwd = k->calls == 1 ? request->kernel_cwd : NULL};
    size_t len;
    char *bytes = rbx_kernel_wire_request(k->runtime->kernel_dialect, &wire, &len);
    rbx_trace_mark(call->trace, RBX_PHASE_RELEASED);
    if (!bytes || rbx_kernel_box_send(&k->box, bytes, len) != 0)
        s.broken = true;
    free(bytes);
    if (!s.broken)
        watch(&s);
    *lost = !s.done;
    if (*lost) {
        k->dead = true;
        if (s.died || s.broken)
            read_report(&s);
    } else {
        drain_output(&s);
    }
    rbx_trace_mark(call->trace, RBX_PHASE_EXIT);
    rbx_status status = finish(&s, result, *lost, oom_before, &before);
    rbx_execution_egress_result(&k->box.sandbox, result, call->trace);
    result->duration_ms = (rbx_now_us() - started + 500) / 1000;
    free(s.line);
    rbx_shown_free(&s.shown);
    rbx_capture_free(&s.out_capture);
    rbx_capture_free(&s.err_capture);
    if (status != RBX_OK)
        return rbx_fail(err, RBX_ESYSTEM, "out of memory building the result");
    return RBX_OK;
}
