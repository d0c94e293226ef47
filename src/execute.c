/* One execution, in the order the product promises: validate the request,
 * take the session, start the sandbox, watch it, classify what happened,
 * release the session. Nothing of the code runs before its syntax passed. */
#include "deps.h"
#include "policy.h"
#include "sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define ENV_FIXED_MAX 16

/* The environment every program gets: these, then the request's own
 * variables. Nothing is inherited from runbox's environment. */
static size_t fixed_env(const rbx_session *session, char fixed[ENV_FIXED_MAX][4600])
{
    size_t n = 0;
    snprintf(fixed[n++], 4600, "PATH=/usr/local/bin:/usr/bin:/bin");
    snprintf(fixed[n++], 4600, "HOME=" RBX_SANDBOX_HOME);
    snprintf(fixed[n++], 4600, "LANG=C.UTF-8");
    snprintf(fixed[n++], 4600, "TERM=dumb");
    snprintf(fixed[n++], 4600, "TMPDIR=/tmp");
    snprintf(fixed[n++], 4600, "USER=runbox");
    snprintf(fixed[n++], 4600, "LOGNAME=runbox");
    /* Output must reach the agent as it is printed, not at exit. */
    snprintf(fixed[n++], 4600, "PYTHONUNBUFFERED=1");
    snprintf(fixed[n++], 4600, "RUNBOX_SESSION_ID=%s", session->id);
    return n;
}

static char **build_env(const rbx_request *request, const rbx_session *session)
{
    char(*fixed)[4600] = malloc(ENV_FIXED_MAX * sizeof *fixed);
    if (!fixed)
        return NULL;
    size_t nfixed = fixed_env(session, fixed);
    char **envp = calloc(nfixed + request->env_count + 1, sizeof *envp);
    if (!envp) {
        free(fixed);
        return NULL;
    }
    size_t n = 0;
    for (size_t i = 0; i < nfixed; i++)
        envp[n++] = strdup(fixed[i]);
    free(fixed);
    for (size_t i = 0; i < request->env_count; i++) {
        const char *entry = request->env[i];
        size_t name_len = (size_t)(strchr(entry, '=') - entry);
        size_t slot = n;
        for (size_t j = 0; j < n; j++)
            if (envp[j] && strncmp(envp[j], entry, name_len + 1) == 0)
                slot = j; /* a request's value replaces a default */
        if (slot < n)
            free(envp[slot]);
        envp[slot] = strdup(entry);
        if (slot == n)
            n++;
    }
    for (size_t i = 0; i < n; i++)
        if (!envp[i]) {
            for (size_t j = 0; j < n; j++)
                free(envp[j]);
            free(envp);
            return NULL;
        }
    return envp;
}

static void free_env(char **envp)
{
    if (!envp)
        return;
    for (char **e = envp; *e; e++)
        free(*e);
    free(envp);
}

static int code_memfd(const rbx_request *request)
{
    int fd = memfd_create("runbox-code", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t done = 0;
    while (done < request->code_len) {
        ssize_t n = write(fd, request->code + done, request->code_len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)n;
    }
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

static char *dup_text(const char *text, size_t len, size_t *out_len)
{
    return rbx_utf8_sanitize(text, len, out_len);
}

/* A NUL byte cannot be part of valid source in any of our languages, and
 * bash could not even see past it: refuse it as a syntax error. */
static bool find_nul(const rbx_request *request, size_t *offset, size_t *line)
{
    const char *nul = memchr(request->code, 0, request->code_len);
    if (!nul)
        return false;
    *offset = (size_t)(nul - request->code);
    *line = 1;
    for (const char *p = request->code; p < nul; p++)
        *line += *p == '\n';
    return true;
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

/* An explicit --network where none can be had is an error; the default
 * quietly becomes loopback-only, and the result's "network" says so. */
static bool wants_network(const rbx_engine *engine, const rbx_request *request)
{
    if (request->network >= 0)
        return request->network != 0;
    return !engine->config.network_off && rbx_net_helper_available();
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

size_t rbx_session_cancel(rbx_engine *engine, const char *id)
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

static const char *limits_name(bool in_cgroup)
{
    if (!in_cgroup)
        return "rlimits";
    return rbx_cgroup_probe()->mode == RBX_CGROUP_V2 ? "cgroup-v2" : "cgroup-v1";
}

static rbx_status run_in_sandbox(rbx_engine *engine, const rbx_request *request,
                                 const rbx_runtime *runtime, double timeout_s, double budget_s,
                                 const rbx_session *session, const rbx_env *env,
                                 rbx_output_fn on_output, void *user, rbx_result *result,
                                 rbx_error *err)
{
    char **envp = build_env(request, session);
    int code_fd = code_memfd(request);
    if (!envp || code_fd < 0) {
        rbx_fail(err, RBX_ESYSTEM, "cannot prepare the execution: %s", strerror(errno));
        free_env(envp);
        if (code_fd >= 0)
            close(code_fd);
        return RBX_ESYSTEM;
    }
    rbx_sandbox_spec spec = {
        .interpreter = runtime->interpreter,
        .argv = (char *const *)runtime->argv,
        .envp = envp,
        .root = engine->root_plan,
        .root_request =
            {
                .session_path = session->one_off ? NULL : session->work_path,
                .become_root = engine->is_root,
            },
        .code_fd = code_fd,
        .with_stdin = request->stdin_data != NULL,
        .network = wants_network(engine, request) ? RBX_NET_OUTSIDE : RBX_NET_LOOPBACK,
        .limits =
            {
                .memory_bytes = (uint64_t)(request->memory_mb ? request->memory_mb
                                                               : engine->config.memory_mb)
                                << 20,
                .pids = engine->config.pids_max,
                .cpu_weight = engine->config.cpu_weight,
            },
        .file_size_max = engine->config.disk_cap_bytes,
        .is_root = engine->is_root,
    };
    rbx_capture out, errc;
    rbx_capture_init(&out, engine->config.output_cap_bytes);
    rbx_capture_init(&errc, engine->config.output_cap_bytes);
    rbx_watch *watch = calloc(1, sizeof *watch);
    rbx_sandbox sandbox;
    spec.root_request.nameserver = spec.network == RBX_NET_OUTSIDE;
    char env_dir[4500];
    if (env) {
        /* The environment, read-only, where the runtime looks for it. */
        snprintf(env_dir, sizeof env_dir, "%s/%s", env->path, runtime->env_subdir);
        spec.root_request.binds[0] =
            (rbx_bind){.host = env_dir, .inside = runtime->env_run_at, .writable = false};
        spec.root_request.bind_count = 1;
        if (runtime->env_interpreter)
            spec.interpreter = runtime->env_interpreter;
    }
    /* argv[0] is the interpreter's path: Python finds its venv from it. */
    const char *argv[sizeof runtime->argv / sizeof runtime->argv[0]];
    memcpy(argv, runtime->argv, sizeof argv);
    argv[0] = spec.interpreter;
    spec.argv = (char *const *)argv;
    result->network = spec.network == RBX_NET_OUTSIDE;
    int64_t started = rbx_now_us();
    rbx_status status = watch ? rbx_sandbox_start(&spec, &sandbox, err)
                              : rbx_fail(err, RBX_ESYSTEM, "out of memory");
    close(code_fd);
    free_env(envp);
    if (status != RBX_OK) {
        free(watch);
        rbx_capture_free(&out);
        rbx_capture_free(&errc);
        return status;
    }
    rbx_running running;
    track(engine, &running, session->id);
    *watch = (rbx_watch){
        .timeout_s = budget_s,
        .cancel_fd = request->cancel_fd,
        .kill_fd = running.kill_fd,
        .stdin_data = request->stdin_data,
        .stdin_len = request->stdin_len,
        .on_output = on_output,
        .user = user,
        .out = &out,
        .err = &errc,
    };
    rbx_exit_report report;
    bool reported = rbx_supervise(&sandbox, watch, &report);
    untrack(engine, &running);
    rbx_cgroup_stats usage = {0};
    bool measured = sandbox.cgroup && rbx_cgroup_stats_read(sandbox.cgroup, &usage) == 0;
    result->limits = limits_name(sandbox.cgroup != NULL);
    rbx_sandbox_close(&sandbox);
    result->duration_ms = (rbx_now_us() - started + 500) / 1000;

    rbx_outcome outcome = {.timed_out = watch->timed_out,
                           .cancelled = watch->cancelled,
                           .oom_killed = measured && usage.oom_killed};
    if (reported && WIFEXITED(report.wait_status)) {
        outcome.exit_code = WEXITSTATUS(report.wait_status);
    } else if (reported && WIFSIGNALED(report.wait_status)) {
        outcome.signal = WTERMSIG(report.wait_status);
        outcome.exit_code = 128 + outcome.signal;
    } else {
        outcome.signal = SIGKILL; /* the sandbox was killed before the program ended */
        outcome.exit_code = 128 + SIGKILL;
    }
    if (outcome.timed_out)
        outcome.exit_code = 124;
    if (reported) {
        result->cpu_ms = (report.usage.ru_utime.tv_sec + report.usage.ru_stime.tv_sec) * 1000 +
                         (report.usage.ru_utime.tv_usec + report.usage.ru_stime.tv_usec) / 1000;
        result->peak_memory_kb = report.usage.ru_maxrss;
    }
    /* The cgroup sees every process of the execution, not just the program. */
    if (measured && usage.cpu_usec)
        result->cpu_ms = (int64_t)(usage.cpu_usec / 1000);
    if (measured && usage.peak_memory_bytes)
        result->peak_memory_kb = (int64_t)(usage.peak_memory_bytes / 1024);

    const char *rep = watch->report;
    if (watch->report_len && rep[0] == 'E') {
        status = rbx_fail(err, RBX_ESYSTEM, "the sandbox failed to start: cannot %.400s", rep + 1);
        err->message[strcspn(err->message, "\n")] = 0;
    } else if (watch->report_len && rep[0] == 'S' && !outcome.timed_out && !outcome.cancelled) {
        outcome.syntax_error = true;
    }
    if (status == RBX_OK) {
        result->output =
            rbx_capture_finish(&out, "stdout", &result->truncated_stdout, &result->output_len);
        result->error =
            rbx_capture_finish(&errc, "stderr", &result->truncated_stderr, &result->error_len);
        /* A bare "S": the interpreter printed the message on stderr itself. */
        if (outcome.syntax_error && watch->report_len > 1) {
            free(result->error);
            result->error = dup_text(rep + 1, watch->report_len - 1, &result->error_len);
        }
        fill_exit(result, &outcome);
        rbx_classify(runtime, &outcome, result->error, result->error_len, &result->error_type,
                     &result->exception);
        char note[200];
        if (outcome.oom_killed) {
            snprintf(note, sizeof note,
                     "%s[runbox: the execution reached its memory limit of %llu MiB and was "
                     "killed]\n",
                     result->error_len && result->error[result->error_len - 1] != '\n' ? "\n" : "",
                     (unsigned long long)(spec.limits.memory_bytes >> 20));
            append_note(result, note);
        } else if (outcome.timed_out) {
            snprintf(note, sizeof note,
                     "%s[runbox: timed out after %g s; every process of the execution was "
                     "killed]\n",
                     result->error_len && result->error[result->error_len - 1] != '\n' ? "\n" : "",
                     timeout_s);
            append_note(result, note);
        } else if (outcome.cancelled) {
            append_note(result, "[runbox: cancelled; every process of the execution was killed]\n");
        }
        if (!result->output || !result->error)
            status = rbx_fail(err, RBX_ESYSTEM, "out of memory building the result");
    }
    rbx_capture_free(&out);
    rbx_capture_free(&errc);
    free(watch);
    return status;
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

static rbx_status syntax_result(const rbx_runtime *runtime, size_t offset, size_t line,
                                rbx_result *result)
{
    char message[160];
    snprintf(message, sizeof message,
             "SyntaxError: the code contains a NUL byte at offset %zu (line %zu)\n", offset, line);
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
static rbx_status run_in_session(rbx_engine *engine, const rbx_request *request,
                                 const rbx_runtime *runtime, double timeout_s, const rbx_env *env,
                                 rbx_output_fn on_output, void *user, rbx_result *result,
                                 rbx_error *err)
{
    if (env && env->failed) {
        if (request->session_id)
            snprintf(result->session_id, sizeof result->session_id, "%s", request->session_id);
        else
            rbx_session_id_new(result->session_id);
        return install_failed_result(env, result) == RBX_OK
                   ? RBX_OK
                   : rbx_fail(err, RBX_ESYSTEM, "out of memory");
    }
    rbx_session session;
    int64_t waited_from = rbx_now_us();
    rbx_status status =
        rbx_session_acquire(engine, request->session_id, timeout_s, &session, err);
    if (status != RBX_OK)
        return status;
    snprintf(result->session_id, sizeof result->session_id, "%s", session.id);
    double left = timeout_s - (double)(rbx_now_us() - waited_from) / 1e6;
    if (left < 0.001)
        left = 0.001;
    status = run_in_sandbox(engine, request, runtime, timeout_s, left, &session, env, on_output,
                            user, result, err);
    rbx_session_release(engine, &session);
    return status;
}

rbx_status rbx_execute(rbx_engine *engine, const rbx_request *request, rbx_output_fn on_output,
                       void *user, rbx_result *result, rbx_error *err)
{
    memset(result, 0, sizeof *result);
    const rbx_runtime *runtime;
    double timeout_s;
    rbx_status status = rbx_request_validate(engine, request, &runtime, &timeout_s, err);
    if (status != RBX_OK)
        return status;
    result->language = runtime->name;

    /* Refusals that need no session and run nothing. */
    size_t nul_offset, nul_line;
    const char *rule = NULL;
    if (find_nul(request, &nul_offset, &nul_line) ||
        (rule = rbx_policy_match(engine->policy, runtime->name, request->code))) {
        if (request->session_id)
            snprintf(result->session_id, sizeof result->session_id, "%s", request->session_id);
        else
            rbx_session_id_new(result->session_id);
        status = rule ? policy_result(rule, result)
                      : syntax_result(runtime, nul_offset, nul_line, result);
        if (status != RBX_OK) {
            rbx_result_free(result);
            return rbx_fail(err, RBX_ESYSTEM, "out of memory");
        }
        return RBX_OK;
    }

    rbx_requirements reqs;
    status = rbx_requirements_parse(engine, runtime, request, &reqs, err);
    if (status != RBX_OK)
        return status;
    rbx_env env = {.use_fd = -1};
    if (reqs.count) {
        status = rbx_env_acquire(engine, runtime, &reqs, &env, err);
        rbx_requirements_free(&reqs);
        if (status != RBX_OK)
            return status;
        result->has_install = true;
        snprintf(result->install_env, sizeof result->install_env, "%s", env.key);
        result->install_reused = env.reused;
        result->install_ms = env.install_ms;
    }
    status = run_in_session(engine, request, runtime, timeout_s,
                            result->has_install ? &env : NULL, on_output, user, result, err);
    rbx_env_release(&env);
    if (status != RBX_OK)
        rbx_result_free(result);
    return status;
}

void rbx_result_free(rbx_result *result)
{
    free(result->output);
    free(result->error);
    free(result->exception);
    result->output = result->error = result->exception = NULL;
}
