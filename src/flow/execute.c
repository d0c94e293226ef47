/* One execution, in the order the product promises: validate the request,
 * take the session, start the sandbox, watch it, classify what happened,
 * release the session. Nothing of the code runs before its syntax passed. */
#include "base/capture.h"
#include "base/error.h"
#include "base/trace.h"
#include "egress/policy.h"
#include "engine/engine.h"
#include "envs/deps.h"
#include "execution/given.h"
#include "execution/policy.h"
#include "execution/request.h"
#include "execution/shown.h"
#include "flow/running.h"
#include "images/roots.h"
#include "kernels/kernels.h"
#include "languages/classify.h"
#include "languages/runtime.h"
#include "pool/pool.h"
#include "processes/processes.h"
#include "runbox.h"
#include "sandbox/cgroup.h"
#include "sandbox/net.h"
#include "sandbox/sandbox.h"
#include "sandbox/template.h"
#include "sessions/session.h"
#include "sessions/storage.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int code_memfd(const rbx_request *request, bool counted)
{
    size_t len;
    char *payload = rbx_code_payload(request, NULL, counted, &len);
    int fd = payload ? memfd_create("runbox-code", MFD_CLOEXEC) : -1;
    size_t done = 0;
    while (fd >= 0 && done < len) {
        ssize_t n = write(fd, payload + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close(fd);
            fd = -1;
            break;
        }
        done += (size_t)n;
    }
    free(payload);
    if (fd >= 0)
        lseek(fd, 0, SEEK_SET);
    return fd;
}

/* Appends runbox's own note to the error text. */
static void append_note(rbx_result *result, const char *note)
{
    size_t add = strlen(note);
    char *grown = realloc(result->error, result->error_len + add + 1);
    if (!grown)
        return;
    memcpy(grown + result->error_len, note, add + 1);
    result->error = grown;
    result->error_len += add;
}

/* A NUL byte cannot be part of valid source in any of our languages, and
 * bash could not even see past it: refuse it as a syntax error. */
/* The first byte that code cannot hold, or NULL: a NUL (no interpreter
 * takes one), or in a stateful call to a JSON-speaking kernel a byte that
 * is not UTF-8 (JSON holds text; Python would refuse the source anyway). */
static const char *unrunnable(const rbx_request *request, const rbx_runtime *runtime,
                              size_t *offset, size_t *line, const char **what)
{
    const char *bad = memchr(request->code, 0, request->code_len);
    *what = "a NUL byte";
    if (!bad && request->stateful && runtime->kernel_dialect == RBX_KERNEL_JSON) {
        size_t valid = rbx_utf8_valid_prefix(request->code, request->code_len);
        if (valid < request->code_len) {
            bad = request->code + valid;
            *what = "a byte that is not UTF-8 (a stateful call's code must be UTF-8)";
        }
    }
    if (!bad)
        return NULL;
    *offset = (size_t)(bad - request->code);
    *line = 1;
    for (const char *p = request->code; p < bad; p++)
        *line += *p == '\n';
    return bad;
}

static void fill_exit(rbx_result *result, const rbx_outcome *outcome)
{
    result->exit_code = outcome->exit_code;
    result->signal = outcome->signal;
    result->timed_out = outcome->timed_out;
    result->cancelled = outcome->cancelled;
    result->success = outcome->exit_code == 0 && !outcome->signal && !outcome->timed_out &&
                      !outcome->cancelled && !outcome->syntax_error && !outcome->oom_killed;
}

/* Registers an execution so rbx_session_cancel can reach it. */
static void track(rbx_engine *engine, rbx_running *running, const char *session_id)
{
    snprintf(running->session_id, sizeof running->session_id, "%s", session_id);
    running->kill_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pthread_mutex_lock(&engine->running_lock);
    running->next = engine->running;
    engine->running = running;
    pthread_mutex_unlock(&engine->running_lock);
}

static void untrack(rbx_engine *engine, rbx_running *running)
{
    pthread_mutex_lock(&engine->running_lock);
    for (rbx_running **at = &engine->running; *at; at = &(*at)->next)
        if (*at == running) {
            *at = running->next;
            break;
        }
    pthread_mutex_unlock(&engine->running_lock);
    if (running->kill_fd >= 0)
        close(running->kill_fd);
}

/* Cancels the session's executions: each ends as cancelled. */
static size_t cancel_executions(rbx_engine *engine, const char *id)
{
    size_t n = 0;
    uint64_t one = 1;
    pthread_mutex_lock(&engine->running_lock);
    for (rbx_running *r = engine->running; r; r = r->next)
        if (!strcmp(r->session_id, id) && r->kill_fd >= 0 &&
            write(r->kill_fd, &one, sizeof one) == (ssize_t)sizeof one)
            n++;
    pthread_mutex_unlock(&engine->running_lock);
    return n;
}

size_t rbx_session_cancel(rbx_engine *engine, const char *id)
{
    size_t n = rbx_processes_stop_session(engine, id);
    return n + cancel_executions(engine, id);
}

size_t rbx_session_pause(rbx_engine *engine, const char *id, bool paused)
{
    if (paused)
        (void)cancel_executions(engine, id);
    return rbx_processes_pause_session(engine, id, paused);
}

static const char *limits_name(bool in_cgroup)
{
    if (!in_cgroup)
        return "rlimits";
    return rbx_cgroup_probe()->mode == RBX_CGROUP_V2 ? "cgroup-v2" : "cgroup-v1";
}

/* One execution on its way through the engine. */
typedef struct execution {
    rbx_engine *engine;
    const rbx_request *request;
    const rbx_runtime *runtime;
    rbx_root *root;   /* the image it runs on */
    double timeout_s; /* as requested */
    double budget_s;  /* what is left of it once the session was taken */
    const rbx_session *session;
    const rbx_scratch *scratch; /* its /tmp and, for a one-off run, its home */
    const rbx_env *env;
    const rbx_pooled *pooled; /* the prepared sandbox it runs in, or NULL */
    int kill_fd;              /* rbx_session_cancel writes here */
    rbx_trace *trace;
    rbx_output_fn on_output;
    void *user;
} execution;

/* What the sandbox is told: the runtime, the session, the limits, and the
 * environment, read-only, where the runtime looks for it. */
static void build_spec(const execution *x, rbx_sandbox_spec *spec, const char **argv, char *env_dir,
                       size_t env_dir_size)
{
    const rbx_engine *engine = x->engine;
    const rbx_runtime *runtime = x->runtime;
    *spec = (rbx_sandbox_spec){
        .interpreter = runtime->interpreter,
        .root = rbx_root_plan_of(x->root),
        .root_request = {.session_path = x->session->one_off ? NULL : x->session->work_path,
                         .tmp_path = x->scratch->made ? x->scratch->tmp_path : NULL,
                         .become_root = engine->is_root},
        .with_stdin = x->request->stdin_data != NULL,
        .network =
            rbx_execution_wants_network(engine, x->request) ? RBX_NET_OUTSIDE : RBX_NET_LOOPBACK,
        .limits = rbx_execution_limits(engine, x->request),
        .file_size_max = engine->config.disk_cap_bytes,
        .is_root = engine->is_root,
        .trace = x->trace,
        .template_ns = -1,
    };
    if (x->session->one_off && x->scratch->made)
        spec->root_request.session_path = x->scratch->home_path;
    spec->root_request.nameserver = spec->network == RBX_NET_OUTSIDE;
    if (x->env) {
        rbx_runtime_env_bind(runtime, x->env->path, env_dir, env_dir_size, &spec->root_request,
                             &spec->interpreter);
    }
    /* argv[0] is the interpreter's path: Python finds its venv from it. */
    memcpy(argv, runtime->argv, sizeof runtime->argv);
    argv[0] = spec->interpreter;
    spec->argv = (char *const *)argv;
}

/* What the poll loop and init told us, turned into the outcome. */
static rbx_outcome read_outcome(const rbx_watch *watch, bool reported,
                                const rbx_exit_report *report, bool oom_killed)
{
    rbx_outcome outcome = {
        .timed_out = watch->timed_out, .cancelled = watch->cancelled, .oom_killed = oom_killed};
    if (reported && WIFEXITED(report->wait_status)) {
        outcome.exit_code = WEXITSTATUS(report->wait_status);
    } else if (reported && WIFSIGNALED(report->wait_status)) {
        outcome.signal = WTERMSIG(report->wait_status);
        outcome.exit_code = 128 + outcome.signal;
    } else {
        outcome.signal = SIGKILL; /* the sandbox was killed before the program ended */
        outcome.exit_code = 128 + SIGKILL;
    }
    if (outcome.timed_out)
        outcome.exit_code = 124;
    bool ready = watch->report_len && watch->report[watch->report_len - 1] == 'R';
    outcome.syntax_error = !ready && watch->report_len && watch->report[0] == 'S' &&
                           !outcome.timed_out && !outcome.cancelled;
    return outcome;
}

static void add_usage(rbx_result *result, bool reported, const rbx_exit_report *report,
                      bool measured, const rbx_cgroup_stats *usage)
{
    if (reported) {
        const struct rusage *ru = &report->usage;
        result->cpu_ms = (ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000 +
                         (ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1000;
        result->peak_memory_kb = ru->ru_maxrss;
    }
    /* The cgroup sees every process of the execution, not just the program. */
    if (measured && usage->cpu_usec)
        result->cpu_ms = (int64_t)(usage->cpu_usec / 1000);
    if (measured && usage->peak_memory_bytes)
        result->peak_memory_kb = (int64_t)(usage->peak_memory_bytes / 1024);
}

/* runbox's own word on how the execution was stopped. */
static void add_notes(rbx_result *result, const rbx_outcome *outcome, const execution *x,
                      uint64_t memory_bytes)
{
    const char *nl = result->error_len && result->error[result->error_len - 1] != '\n' ? "\n" : "";
    char note[200];
    if (outcome->oom_killed) {
        snprintf(note, sizeof note,
                 "%s[runbox: the execution reached its memory limit of %llu MiB and was "
                 "killed]\n",
                 nl, (unsigned long long)(memory_bytes >> 20));
        append_note(result, note);
    } else if (outcome->timed_out) {
        snprintf(note, sizeof note,
                 "%s[runbox: timed out after %g s; every process of the execution was killed]\n",
                 nl, x->timeout_s);
        append_note(result, note);
    } else if (outcome->cancelled) {
        snprintf(note, sizeof note,
                 "%s[runbox: cancelled; every process of the execution was killed]\n", nl);
        append_note(result, note);
    } else if (x->runtime->too_old && result->error &&
               memmem(result->error, result->error_len, x->runtime->too_old,
                      strlen(x->runtime->too_old))) {
        snprintf(note, sizeof note,
                 "%s[runbox: %s needs %s, which the root it ran on (%s) does not have; the "
                 "default image has it]\n",
                 nl, x->runtime->name, x->runtime->needs, result->image[0] ? result->image : "?");
        append_note(result, note);
    }
}

static rbx_status fill_result(const execution *x, rbx_watch *watch, const rbx_outcome *outcome,
                              uint64_t memory_bytes, rbx_result *result, rbx_error *err)
{
    if (watch->report_len && watch->report[0] == 'E') {
        rbx_fail(err, RBX_ESYSTEM, "the sandbox failed to start: cannot %.400s", watch->report + 1);
        err->message[strcspn(err->message, "\n")] = 0;
        return RBX_ESYSTEM;
    }
    result->output =
        rbx_capture_finish(watch->out, "stdout", &result->truncated_stdout, &result->output_len);
    result->error =
        rbx_capture_finish(watch->err, "stderr", &result->truncated_stderr, &result->error_len);
    /* A bare "S": the interpreter printed the message on stderr itself. */
    if (outcome->syntax_error && watch->report_len > 1) {
        free(result->error);
        result->error =
            rbx_utf8_sanitize(watch->report + 1, watch->report_len - 1, &result->error_len);
    }
    fill_exit(result, outcome);
    rbx_classify(x->runtime, outcome, result->error, result->error_len, &result->error_type,
                 &result->exception);
    add_notes(result, outcome, x, memory_bytes);
    if (!result->output || !result->error)
        return rbx_fail(err, RBX_ESYSTEM, "out of memory building the result");
    return RBX_OK;
}

/* Watches a started sandbox to its end; fills the result but its rich outputs. */
static rbx_status watch_to_end(const execution *x, rbx_sandbox *sandbox, rbx_watch *watch,
                               uint64_t memory_bytes, rbx_result *result, rbx_error *err)
{
    rbx_exit_report report;
    int64_t started = rbx_now_us();
    bool reported = rbx_supervise(sandbox, watch, &report);
    rbx_cgroup_stats usage = {0};
    bool measured = sandbox->cgroup && rbx_cgroup_stats_read(sandbox->cgroup, &usage) == 0;
    /* A prepared sandbox's interpreter started before the execution did. */
    if (x->pooled && usage.cpu_usec >= x->pooled->cpu_usec_at_take)
        usage.cpu_usec -= x->pooled->cpu_usec_at_take;
    result->limits = limits_name(sandbox->cgroup != NULL);
    if (sandbox->cgroup)
        result->cpus = x->request->cpus > 0 ? x->request->cpus : x->engine->config.cpus;
    rbx_execution_egress_result(sandbox, result, x->trace);
    if (!x->pooled) /* a prepared sandbox's keeper tears it down, off the request's path */
        rbx_sandbox_close(sandbox);
    result->duration_ms = (rbx_now_us() - started + 500) / 1000;
    rbx_outcome outcome = read_outcome(watch, reported, &report, measured && usage.oom_killed);
    add_usage(result, reported, &report, measured, &usage);
    return fill_result(x, watch, &outcome, memory_bytes, result, err);
}

static int take_shown(void *user, const char *data, size_t len)
{
    rbx_shown *shown = user;
    rbx_shown_feed(shown, data, len);
    return shown->cancelled ? -1 : 0;
}

/* Watches a started sandbox to its end; fills the result. */
static rbx_status watch_sandbox(const execution *x, rbx_sandbox *sandbox, rbx_watch *watch,
                                uint64_t memory_bytes, rbx_result *result, rbx_error *err)
{
    watch->kill_fd = x->kill_fd;
    /* The program's rich outputs, where its bootstrap gives them a channel:
     * kept and capped as a stateful call's are. */
    rbx_shown shown;
    rbx_shown_init(&shown, x->on_output, x->user);
    if (x->runtime->results_channel) {
        watch->on_channel = take_shown;
        watch->channel_user = &shown;
    }
    rbx_status status = watch_to_end(x, sandbox, watch, memory_bytes, result, err);
    if (status == RBX_OK && x->runtime->results_channel &&
        rbx_shown_finish(&shown, result) != RBX_OK)
        status = rbx_fail(err, RBX_ESYSTEM, "out of memory building the result");
    rbx_shown_free(&shown);
    return status;
}

static rbx_status run_in_sandbox(const execution *x, rbx_result *result, rbx_error *err)
{
    char **envp = rbx_execution_env(x->request, x->session, NULL);
    int code_fd = code_memfd(x->request, x->runtime->payload_counted);
    rbx_watch *watch = calloc(1, sizeof *watch);
    rbx_capture out, errc;
    rbx_capture_init(&out, x->engine->config.output_cap_bytes);
    rbx_capture_init(&errc, x->engine->config.output_cap_bytes);
    rbx_status status = RBX_OK;
    if (!envp || code_fd < 0 || !watch)
        status = rbx_fail(err, RBX_ESYSTEM, "cannot prepare the execution: %s", strerror(errno));
    rbx_sandbox_spec spec;
    const char *argv[sizeof x->runtime->argv / sizeof x->runtime->argv[0]];
    char env_dir[4500];
    rbx_sandbox sandbox;
    rbx_egress_plan egress = {0};
    if (status == RBX_OK) {
        build_spec(x, &spec, argv, env_dir, sizeof env_dir);
        spec.envp = envp;
        spec.code_fd = code_fd;
        result->network = spec.network == RBX_NET_OUTSIDE;
        if (result->network &&
            (status = rbx_egress_plan_make(&egress, x->engine->egress, x->request, err)) == RBX_OK)
            spec.egress = &egress;
    }
    if (status == RBX_OK) {
        spec.template_ns = rbx_root_template_ns(x->root);
        rbx_trace_mark(x->trace, RBX_PHASE_TEMPLATE);
        status = rbx_sandbox_start(&spec, &sandbox, err);
        if (spec.template_ns >= 0)
            close(spec.template_ns);
    }
    if (code_fd >= 0)
        close(code_fd);
    rbx_execution_env_free(envp);
    if (status == RBX_OK) {
        *watch = (rbx_watch){.trace = x->trace,
                             .timeout_s = x->budget_s,
                             .cancel_fd = x->request->cancel_fd,
                             .stdin_data = x->request->stdin_data,
                             .stdin_len = x->request->stdin_len,
                             .on_output = x->on_output,
                             .user = x->user,
                             .out = &out,
                             .err = &errc};
        status = watch_sandbox(x, &sandbox, watch, spec.limits.memory_bytes, result, err);
    }
    rbx_capture_free(&out);
    rbx_capture_free(&errc);
    free(watch);
    rbx_egress_plan_free(&egress); /* the sandbox, which used it, is gone */
    return status;
}

/* Names an interpreter reads when it starts, before a prepared sandbox's
 * bootstrap could apply them: a request setting one gets a cold start. */
static bool read_at_startup(const char *entry)
{
    static const char *const prefixes[] = {"PYTHON", "NODE_",   "LD_", "LC_",     "BASH",
                                           "GLIBC_", "MALLOC_", "UV_", "OPENSSL_"};
    static const char *const names[] = {"LANG", "LANGUAGE",        "TZ",    "HOME", "SHELLOPTS",
                                        "ENV",  "POSIXLY_CORRECT", "TMPDIR"};
    size_t len = strcspn(entry, "=");
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (!strncmp(entry, prefixes[i], strlen(prefixes[i])))
            return true;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (len == strlen(names[i]) && !strncmp(entry, names[i], len))
            return true;
    return false;
}

/* Whether a prepared sandbox gives this execution exactly what a cold
 * start would (with requirements: one prepared with their environment).
 * Not: stdin (a prepared program's is /dev/null), a narrowed egress policy
 * (rules of its own), variables read at startup, limits that only rlimits could set (fixed
 * when the program started), or, unprivileged, a session's directory
 * (mounting it into a running sandbox takes root). */
static bool poolable(const execution *x)
{
    const rbx_engine *engine = x->engine;
    const rbx_request *r = x->request;
    if (!engine->pool || r->stdin_data || r->egress_allow || x->root != engine->roots[0])
        return false;
    if (!x->session->one_off && !engine->is_root)
        return false;
    if (rbx_cgroup_probe()->mode == RBX_CGROUP_NONE &&
        ((r->memory_mb && r->memory_mb != engine->config.memory_mb) ||
         (r->cpus > 0 && r->cpus != engine->config.cpus)))
        return false;
    for (size_t i = 0; i < r->env_count; i++)
        if (read_at_startup(r->env[i]))
            return false;
    return true;
}

/* All of the payload to the bootstrap, then its end, within timeout_ms. */
static int send_payload(int fd, const char *data, size_t len, int timeout_ms)
{
    int64_t deadline = rbx_now_ms() + timeout_ms;
    size_t done = 0;
    while (done < len) {
        ssize_t n = send(fd, data + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        int64_t left = deadline - rbx_now_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        if (left <= 0 || poll(&pfd, 1, (int)left) < 0) {
            errno = ETIMEDOUT;
            return -1;
        }
    }
    return shutdown(fd, SHUT_WR);
}

/* A prepared sandbox becomes this execution's: its limits, its session's
 * directory, then its environment and code. Until the code is sent
 * nothing of the execution is in it, and a failure means a cold start. */
static bool hand_over(const execution *x, rbx_pooled *pooled, rbx_error *err)
{
    rbx_sandbox *sandbox = &pooled->sandbox;
    rbx_cgroup_limits limits = rbx_execution_limits(x->engine, x->request);
    char why[256];
    if (sandbox->cgroup && rbx_cgroup_update(sandbox->cgroup, &limits, why, sizeof why) != 0)
        return false;
    if (!x->session->one_off &&
        rbx_template_replace_home(sandbox->pidfd, x->session->work_path) != 0)
        return false;
    char **envp = rbx_execution_env(x->request, x->session, NULL);
    size_t len = 0;
    char *payload = envp ? rbx_code_payload(x->request, envp, x->runtime->payload_counted, &len) : NULL;
    rbx_execution_env_free(envp);
    if (!payload)
        return false;
    int timeout_ms = (int)(x->budget_s * 1000) + 1;
    int rc = send_payload(pooled->code_fd, payload, len, timeout_ms);
    free(payload);
    if (rc != 0) {
        /* Its interpreter took part of the payload: it is this execution's
         * now, and what became of it is reported as such. */
        rbx_fail(err, RBX_ESYSTEM, "cannot hand the code to a prepared sandbox: %s",
                 strerror(errno));
    }
    return true;
}

/* Runs the execution in a prepared sandbox; false when none could take it
 * (then nothing of it ran, and it starts cold). */
static bool run_pooled(execution *x, rbx_result *result, rbx_status *status, rbx_error *err)
{
    if (!poolable(x))
        return false;
    bool network = rbx_execution_wants_network(x->engine, x->request);
    /* What a killed runbox left is gone before any execution runs, pooled
     * or not (a cold start's cgroup creation sweeps; taking one creates
     * nothing). One listing of one directory. */
    rbx_cgroup_sweep();
    rbx_pooled *pooled = rbx_pool_take(x->engine->pool, x->runtime, network, x->env);
    if (!pooled)
        return false;
    rbx_trace_mark(x->trace, RBX_PHASE_TEMPLATE);
    err->status = RBX_OK;
    if (!hand_over(x, pooled, err)) {
        rbx_pool_done(x->engine->pool, pooled);
        return false;
    }
    rbx_trace_mark(x->trace, RBX_PHASE_RELEASED);
    result->network = network;
    result->pooled = true;
    x->pooled = pooled;
    rbx_watch *watch = calloc(1, sizeof *watch);
    rbx_capture out, errc;
    rbx_capture_init(&out, x->engine->config.output_cap_bytes);
    rbx_capture_init(&errc, x->engine->config.output_cap_bytes);
    if (!watch || err->status != RBX_OK) {
        rbx_sandbox_kill(&pooled->sandbox);
        *status = err->status != RBX_OK ? err->status : rbx_fail(err, RBX_ESYSTEM, "out of memory");
    } else {
        *watch = (rbx_watch){.trace = x->trace,
                             .timeout_s = x->budget_s,
                             .cancel_fd = x->request->cancel_fd,
                             .on_output = x->on_output,
                             .user = x->user,
                             .out = &out,
                             .err = &errc,
                             .leave_init = true}; /* the keeper reaps it */
        uint64_t memory = rbx_execution_limits(x->engine, x->request).memory_bytes;
        *status = watch_sandbox(x, &pooled->sandbox, watch, memory, result, err);
    }
    rbx_capture_free(&out);
    rbx_capture_free(&errc);
    free(watch);
    x->pooled = NULL;
    rbx_pool_done(x->engine->pool, pooled);
    return true;
}

/* The requirements could not be installed: the code does not run. */
static rbx_status install_failed_result(const rbx_env *env, rbx_result *result)
{
    static const char note[] = "\n[runbox: installing the requirements failed; the code was not "
                               "run]\n";
    const char *message = env->message ? env->message : "";
    size_t len = strlen(message);
    result->output = strdup("");
    result->error = malloc(len + sizeof note);
    if (!result->output || !result->error)
        return RBX_ESYSTEM;
    memcpy(result->error, message, len);
    memcpy(result->error + len, note, sizeof note);
    result->error_len = len + sizeof note - 1;
    result->exit_code = 1;
    result->error_type = "ImportError";
    return RBX_OK;
}

/* Refused by the operator's policy: nothing runs. */
static rbx_status policy_result(const char *rule, rbx_result *result)
{
    char message[200];
    snprintf(message, sizeof message,
             "runbox: refused by the operator's policy rule '%s'; nothing was run\n", rule);
    result->output = strdup("");
    result->error = strdup(message);
    result->error_len = strlen(message);
    result->exit_code = 126;
    result->error_type = "PermissionError";
    return result->output && result->error ? RBX_OK : RBX_ESYSTEM;
}

static rbx_status syntax_result(const rbx_runtime *runtime, const char *what, size_t offset,
                                size_t line, rbx_result *result)
{
    char message[200];
    snprintf(message, sizeof message,
             "SyntaxError: the code contains %s at offset %zu (line %zu)\n", what, offset, line);
    result->output = strdup("");
    result->error = strdup(message);
    result->error_len = strlen(message);
    rbx_outcome outcome = {.exit_code = 2, .syntax_error = true};
    fill_exit(result, &outcome);
    rbx_classify(runtime, &outcome, NULL, 0, &result->error_type, &result->exception);
    return RBX_OK;
}

/* Takes the session (waiting counts against the execution's own timeout)
 * and runs the code in it. */
static rbx_status run_in_session(execution *x, rbx_result *result, rbx_error *err)
{
    const rbx_request *request = x->request;
    if (x->env && x->env->failed) {
        if (request->session_id)
            snprintf(result->session_id, sizeof result->session_id, "%s", request->session_id);
        else
            rbx_session_id_new(result->session_id);
        return install_failed_result(x->env, result) == RBX_OK
                   ? RBX_OK
                   : rbx_fail(err, RBX_ESYSTEM, "out of memory");
    }
    rbx_status status = rbx_storage_room(x->engine, err);
    if (status != RBX_OK)
        return status;
    rbx_session session;
    int64_t waited_from = rbx_now_us();
    status = rbx_session_acquire(x->engine, request->session_id, x->timeout_s, request->cancel_fd,
                                 &session, err);
    if (status != RBX_OK)
        return status;
    rbx_trace_mark(x->trace, RBX_PHASE_SESSION);
    snprintf(result->session_id, sizeof result->session_id, "%s", session.id);
    x->budget_s = x->timeout_s - (double)(rbx_now_us() - waited_from) / 1e6;
    if (x->budget_s < 0.001)
        x->budget_s = 0.001;
    x->session = &session;
    /* Tracked from here on, so a cancel that comes before the sandbox has
     * started is not lost: the poll loop finds it waiting. */
    rbx_running running;
    track(x->engine, &running, session.id);
    x->kill_fd = running.kill_fd;
    if (request->stateful) {
        rbx_kernel_call call = {.request = request,
                                .runtime = x->runtime,
                                .root = x->root,
                                .session = &session,
                                .env = x->env,
                                .timeout_s = x->budget_s,
                                .asked_s = x->timeout_s,
                                .kill_fd = x->kill_fd,
                                .on_output = x->on_output,
                                .user = x->user,
                                .trace = x->trace};
        status = rbx_kernel_run(x->engine, &call, result, err);
    } else if (!run_pooled(x, result, &status, err)) {
        rbx_scratch scratch;
        status = rbx_scratch_make(x->engine, session.one_off, &scratch, err);
        rbx_trace_mark(x->trace, RBX_PHASE_SCRATCH);
        x->scratch = &scratch;
        if (status == RBX_OK)
            status = run_in_sandbox(x, result, err);
        rbx_scratch_remove(x->engine, &scratch);
        x->scratch = NULL;
    }
    untrack(x->engine, &running);
    rbx_session_release(x->engine, &session);
    x->session = NULL;
    return status;
}

/* Refusals that need no session and run nothing: a byte the code cannot
 * hold (see unrunnable), or the operator's policy. Returns true when the result is one of those. */
static bool refused(const rbx_engine *engine, const rbx_request *request,
                    const rbx_runtime *runtime, rbx_result *result, rbx_status *status)
{
    size_t bad_offset, bad_line;
    const char *rule = NULL, *what = NULL;
    if (!unrunnable(request, runtime, &bad_offset, &bad_line, &what) &&
        !(rule = rbx_policy_match(engine->policy, runtime->name, request->code)))
        return false;
    if (request->session_id)
        snprintf(result->session_id, sizeof result->session_id, "%s", request->session_id);
    else
        rbx_session_id_new(result->session_id);
    *status = rule ? policy_result(rule, result)
                   : syntax_result(runtime, what, bad_offset, bad_line, result);
    return true;
}

/* Finds or installs the requirements' environment; the result says how. */
static rbx_status prepare_env(execution *x, rbx_env *env, rbx_result *result, rbx_error *err)
{
    rbx_requirements reqs;
    rbx_status status = rbx_requirements_parse(x->engine, x->runtime, x->request, &reqs, err);
    rbx_trace_mark(x->trace, RBX_PHASE_VALIDATED);
    if (status != RBX_OK || reqs.count == 0)
        return status;
    status = rbx_env_acquire(x->engine, x->runtime, x->root, &reqs, env, err);
    rbx_requirements_free(&reqs);
    if (status != RBX_OK)
        return status;
    rbx_trace_mark(x->trace, RBX_PHASE_ENV);
    result->has_install = true;
    snprintf(result->install_env, sizeof result->install_env, "%s", env->key);
    result->install_reused = env->reused;
    result->install_ms = env->install_ms;
    x->env = env;
    return RBX_OK;
}

rbx_status rbx_execute(rbx_engine *engine, const rbx_request *asked, rbx_output_fn on_output,
                       void *user, rbx_result *result, rbx_error *err)
{
    memset(result, 0, sizeof *result);
    /* A stateful call without a session starts one, which it keeps: its
     * id in the result is the way back to the kernel. */
    rbx_request stateful_copy;
    char new_id[RBX_SESSION_ID_MAX + 1];
    const rbx_request *request = asked;
    if (asked->stateful && !asked->session_id) {
        stateful_copy = *asked;
        rbx_session_id_new(new_id);
        stateful_copy.session_id = new_id;
        request = &stateful_copy;
    }
    execution x = {.engine = engine, .request = request, .on_output = on_output, .user = user};
    x.trace = request->trace ? rbx_trace_new() : NULL;
    rbx_trace_mark(x.trace, RBX_PHASE_START);
    rbx_status status = rbx_request_validate(engine, request, &x.runtime, &x.timeout_s, err);
    if (status != RBX_OK)
        goto out;
    result->language = x.runtime->name;
    if ((status = rbx_engine_root(engine, request->image, &x.root, err)) != RBX_OK)
        goto out;
    char why[400];
    if (!rbx_root_has_runtime(x.root, x.runtime, why, sizeof why)) {
        status = rbx_fail(err, RBX_EINVAL, "%s", why);
        goto out;
    }
    snprintf(result->image, sizeof result->image, "%s", x.root->image);
    if ((!request->image || !*request->image) && engine->image_note[0])
        result->image_note = engine->image_note;
    if (refused(engine, request, x.runtime, result, &status))
        goto out;
    rbx_env env = {.use_fd = -1};
    if ((status = prepare_env(&x, &env, result, err)) == RBX_OK)
        status = run_in_session(&x, result, err);
    rbx_env_release(&env);
    rbx_trace_mark(x.trace, RBX_PHASE_TEARDOWN);
out:
    if (status == RBX_OK && x.trace)
        result->trace = rbx_trace_json(x.trace);
    rbx_trace_free(x.trace);
    if (status != RBX_OK) {
        rbx_result_free(result);
        if (err->status == RBX_OK)
            rbx_fail(err, RBX_ESYSTEM, "out of memory");
    }
    return status;
}

void rbx_result_free(rbx_result *result)
{
    free(result->output);
    free(result->error);
    free(result->exception);
    free(result->trace);
    free(result->results);
    result->output = result->error = result->exception = result->trace = result->results = NULL;
}
