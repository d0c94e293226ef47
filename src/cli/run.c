/* runbox run: one execution from the command line. */
#include "cli/cli.h"
#include "local/local.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char run_usage[] =
    "usage: runbox run LANGUAGE (-c CODE | FILE | -) [options]\n"
    "\n"
    "LANGUAGE is python (py, python3), javascript (js, node, nodejs), typescript (ts, tsx:\n"
    "its types stripped, not checked) or bash (sh, shell).\n"
    "The code comes from -c, from FILE, or from standard input with '-'.\n"
    "\n"
    "options:\n"
    "  --session ID        run in this session (created on first use); without it the\n"
    "                      run gets a fresh session that is removed afterwards\n"
    "  --image NAME        the root image to run on (runbox images list; \"host\" is the\n"
    "                      host's /usr); default: the operator's (--default-image)\n"
    "  --timeout SECONDS   wall-clock limit (default 30, at most 300)\n"
    "  --json              print exactly one line: the result object\n"
    "  --stream            print newline-delimited JSON events as they happen, the\n"
    "                      result last\n"
    "  --env NAME=VALUE    add an environment variable (repeatable)\n"
    "  --input FILE        the program's standard input (default /dev/null)\n"
    "  --network           let the code reach outside hosts (the default)\n"
    "  --no-network        loopback only\n"
    "  --memory MIB        memory limit (default 512)\n"
    "  --cpus N            CPU quota in cores, e.g. 0.5 or 2 (default 1; at most the\n"
    "                      operator's --max-cpus, by default the host's cores)\n"
    "  --stateful          run in the session's live interpreter (its kernel), which\n"
    "                      keeps variables, imports and the working directory from one\n"
    "                      stateful call to the next; kernels live in a runbox process\n"
    "                      that outlives this one and is configured as this one (runbox\n"
    "                      serve, or the runbox daemon of these options, started here\n"
    "                      when needed)\n"
    "  --require SPEC      a package the code needs (repeatable): a PEP 508 spec for\n"
    "                      python (numpy>=1.24), an npm spec for javascript and typescript\n"
    "                      (lodash@4.17.21); installed once into a cached environment\n"
    "  --egress-allow LIST only these destinations, and only where the operator's\n"
    "                      egress policy allows them: CIDRs, addresses and domain\n"
    "                      names (pypi.org, *.example.com) separated by commas or\n"
    "                      spaces, at most 64 (repeatable); '' reaches nothing\n"
    "\n"
    "Without --json or --stream the program's output passes through live and runbox\n"
    "exits with the program's exit code (124 on timeout). With them, runbox exits 0\n"
    "whenever a result was produced. Usage errors exit 2.\n";

enum output_mode { MODE_LIVE, MODE_JSON, MODE_STREAM };

typedef struct run_options {
    const char *language;
    const char *code_arg;
    const char *file;
    const char *session;
    const char *image;
    const char *input;
    double timeout;
    enum output_mode mode;
    const char **env;
    size_t env_count;
    const char **requirements;
    size_t requirement_count;
    cli_globals *globals;
    int network;
    unsigned memory_mb;
    double cpus;
    bool stateful;
    bool egress_given; /* --egress-allow, even '': the request narrows the policy */
    char *egress[RBX_EGRESS_ALLOW_MAX];
    size_t egress_count;
} run_options;

/* The write end of the pipe that cancels the run on SIGINT or SIGTERM, so
 * that the sandbox is killed and a one-off session removed on the way out. */
static int cancel_write_fd = -1;

static void on_signal(int sig)
{
    (void)sig;
    if (cancel_write_fd >= 0)
        (void)!write(cancel_write_fd, "x", 1);
}

static int cancel_pipe(void)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    cancel_write_fd = fds[1];
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    return fds[0];
}

static int write_all(FILE *stream, const char *data, size_t len)
{
    if (len && fwrite(data, 1, len, stream) != len)
        return -1;
    return fflush(stream) == 0 ? 0 : -1;
}

static void show_display(json_t *event);

static int on_output(void *user, rbx_stream stream, const char *data, size_t len)
{
    enum output_mode mode = *(enum output_mode *)user;
    if (mode == MODE_LIVE && stream == RBX_DISPLAY) {
        json_t *event = json_loadb(data, len, 0, NULL);
        if (event)
            show_display(event);
        json_decref(event);
        return 0;
    }
    if (mode == MODE_LIVE) {
        /* A closed stdout (runbox ... | head) must not kill the program. */
        (void)write_all(stream == RBX_STDOUT ? stdout : stderr, data, len);
        return 0;
    }
    if (mode == MODE_STREAM) {
        char *line = rbx_event_to_json(stream, data, len);
        int rc = line ? write_all(stdout, line, strlen(line)) | write_all(stdout, "\n", 1) : -1;
        free(line);
        return rc ? 1 : 0; /* nobody is reading: stop the run */
    }
    return 0;
}

static const char *option_value(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (!strncmp(argv[*i], name, n) && argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (*i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

static bool is_option(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(arg, name, n) && (arg[n] == 0 || arg[n] == '=');
}

/* --egress-allow's list, added to the entries of earlier ones. Only the
 * shape is checked here (the engine judges each destination); an entry
 * must be text, to travel as JSON to the process that holds kernels. */
static int add_egress(run_options *opts, const char *list)
{
    static const char separators[] = ", \t\n";
    opts->egress_given = true;
    for (const char *p = list + strspn(list, separators); *p; p += strspn(p, separators)) {
        size_t len = strcspn(p, separators);
        if (opts->egress_count == RBX_EGRESS_ALLOW_MAX)
            return cli_usage_error("run", "--egress-allow lists more than %d destinations",
                                   RBX_EGRESS_ALLOW_MAX);
        char *entry = strndup(p, len);
        json_t *text = entry ? json_string(entry) : NULL;
        json_decref(text);
        if (!text) {
            free(entry);
            if (!entry) {
                fprintf(stderr, "runbox: out of memory\n");
                return EXIT_SYSTEM;
            }
            return cli_usage_error("run", "--egress-allow: an entry is not UTF-8 text (give "
                                          "CIDRs, addresses or domain names)");
        }
        opts->egress[opts->egress_count++] = entry;
        p += len;
    }
    return 0;
}

static void free_options(run_options *opts)
{
    free(opts->env);
    free(opts->requirements);
    for (size_t i = 0; i < opts->egress_count; i++)
        free(opts->egress[i]);
}

static int parse(int argc, char **argv, run_options *opts)
{
    bool options_done = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *value;
        if (options_done || arg[0] != '-' || !strcmp(arg, "-")) {
            if (!opts->language)
                opts->language = arg;
            else if (!opts->file && !opts->code_arg)
                opts->file = arg;
            else
                return cli_usage_error("run", "unexpected argument '%.64s'", arg);
        } else if (!strcmp(arg, "--")) {
            options_done = true;
        } else if (!strcmp(arg, "-c")) {
            if (i + 1 >= argc)
                return cli_usage_error("run", "-c needs the code to run");
            if (opts->file || opts->code_arg)
                return cli_usage_error("run", "give the code once: -c CODE, FILE or -");
            opts->code_arg = argv[++i];
        } else if (!strcmp(arg, "--json")) {
            opts->mode = MODE_JSON;
        } else if (!strcmp(arg, "--stream")) {
            opts->mode = MODE_STREAM;
        } else if (!strcmp(arg, "--network")) {
            opts->network = 1;
        } else if (!strcmp(arg, "--no-network")) {
            opts->network = 0;
        } else if (!strcmp(arg, "--stateful")) {
            opts->stateful = true;
        } else if (is_option(arg, "--image")) {
            if (!(value = option_value(argc, argv, &i, "--image")) || !*value)
                return cli_usage_error("run", "--image needs an image's name (runbox images list "
                                              "shows them; \"host\" is the host's /usr)");
            opts->image = value;
        } else if (is_option(arg, "--session")) {
            if (!(value = option_value(argc, argv, &i, "--session")))
                return cli_usage_error("run", "--session needs an id");
            opts->session = value;
        } else if (is_option(arg, "--timeout")) {
            if (!(value = option_value(argc, argv, &i, "--timeout")) ||
                cli_parse_seconds(value, &opts->timeout) != 0)
                return cli_usage_error("run", "--timeout needs a number of seconds above 0, "
                                              "e.g. --timeout 10");
        } else if (is_option(arg, "--memory")) {
            char *end;
            if (!(value = option_value(argc, argv, &i, "--memory")) || !*value ||
                (opts->memory_mb = (unsigned)strtoul(value, &end, 10), *end) || value[0] == '-' ||
                strlen(value) > 7)
                return cli_usage_error("run", "--memory needs a whole number of MiB, e.g. "
                                              "--memory 256");
        } else if (is_option(arg, "--cpus")) {
            if (!(value = option_value(argc, argv, &i, "--cpus")) ||
                cli_parse_seconds(value, &opts->cpus) != 0)
                return cli_usage_error("run", "--cpus needs a number of cores above 0, e.g. "
                                              "--cpus 0.5");
        } else if (is_option(arg, "--require")) {
            if (!(value = option_value(argc, argv, &i, "--require")))
                return cli_usage_error("run", "--require needs a package spec");
            opts->requirements[opts->requirement_count++] = value;
        } else if (is_option(arg, "--env")) {
            if (!(value = option_value(argc, argv, &i, "--env")))
                return cli_usage_error("run", "--env needs NAME=VALUE");
            opts->env[opts->env_count++] = value;
        } else if (is_option(arg, "--egress-allow")) {
            if (!(value = option_value(argc, argv, &i, "--egress-allow")))
                return cli_usage_error("run", "--egress-allow needs a list of destinations, "
                                              "e.g. --egress-allow pypi.org,10.1.0.0/16 "
                                              "('' for none)");
            int rc = add_egress(opts, value);
            if (rc)
                return rc;
        } else if (is_option(arg, "--input")) {
            if (!(value = option_value(argc, argv, &i, "--input")))
                return cli_usage_error("run", "--input needs a file");
            opts->input = value;
        } else {
            int rc = cli_global_option(argc, argv, &i, opts->globals, "run");
            if (rc == CLI_NOT_GLOBAL)
                return cli_usage_error("run", "unknown option '%.64s'", arg);
            if (rc)
                return rc;
        }
    }
    if (!opts->language)
        return cli_usage_error("run", "missing LANGUAGE (python, javascript, typescript or bash)");
    if (!opts->file && !opts->code_arg)
        return cli_usage_error("run", "missing code: give -c CODE, a FILE, or - for stdin");
    return 0;
}

/* Live mode: why a connection failed, which the program may not say. */
static void note_egress(uint64_t denied, const char *const *to, size_t count)
{
    if (!denied)
        return;
    fprintf(stderr, "runbox: the egress policy refused %llu connection attempt%s",
            (unsigned long long)denied, denied == 1 ? "" : "s");
    for (size_t i = 0; i < count; i++) {
        fputs(i ? ", " : " (to ", stderr);
        for (const char *c = to[i]; *c; c++) /* a name the code made up: no escapes */
            fputc((unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c, stderr);
    }
    fputs(count ? ")\n" : "\n", stderr);
}

static int render(const rbx_result *result, enum output_mode mode)
{
    if (mode == MODE_LIVE) {
        /* The program's own output already went by; add what it could not say. */
        if (result->error_type && !strcmp(result->error_type, "SyntaxError"))
            fwrite(result->error, 1, result->error_len, stderr);
        else if (result->timed_out)
            fprintf(stderr, "runbox: timed out; every process of the execution was killed\n");
        const char *to[RBX_EGRESS_REPORT_MAX];
        size_t count = 0;
        for (; count < result->egress_denied_count && count < RBX_EGRESS_REPORT_MAX; count++)
            to[count] = result->egress_denied_to[count];
        note_egress(result->egress_denied, to, count);
        return result->exit_code;
    }
    char *json = mode == MODE_JSON ? rbx_result_to_json(result) : rbx_result_event_to_json(result);
    if (!json)
        return EXIT_SYSTEM;
    int rc = write_all(stdout, json, strlen(json)) | write_all(stdout, "\n", 1);
    free(json);
    return rc ? EXIT_SYSTEM : 0;
}

/* The request as the local socket takes it (HTTP's execute body). */
static json_t *request_json(const rbx_request *request)
{
    json_t *body =
        json_pack("{s:s, s:b}", "language", request->language, "stateful", request->stateful);
    json_t *code = json_stringn(request->code, request->code_len);
    bool text = code != NULL; /* UTF-8: else its bytes go as code_bytes */
    if (!code)
        code = local_bytes_to_json(request->code, request->code_len);
    if (!body || !code) {
        json_decref(body);
        json_decref(code);
        return NULL;
    }
    json_object_set_new(body, text ? "code" : "code_bytes", code);
    if (request->session_id)
        json_object_set_new(body, "session_id", json_string(request->session_id));
    if (request->image)
        json_object_set_new(body, "image", json_string(request->image));
    if (request->timeout_s > 0)
        json_object_set_new(body, "timeout", json_real(request->timeout_s));
    if (request->trace)
        json_object_set_new(body, "trace", json_true());
    if (request->network >= 0)
        json_object_set_new(body, "network", json_boolean(request->network));
    if (request->memory_mb)
        json_object_set_new(body, "memory_mb", json_integer(request->memory_mb));
    if (request->cpus > 0)
        json_object_set_new(body, "cpus", json_real(request->cpus));
    if (request->stdin_data)
        json_object_set_new(body, "stdin", json_stringn(request->stdin_data, request->stdin_len));
    json_t *env = json_object(), *requirements = json_array();
    for (size_t i = 0; i < request->env_count; i++) {
        const char *eq = strchr(request->env[i], '=');
        char name[256];
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - request->env[i]) : 0, request->env[i]);
        json_object_set_new(env, name, json_string(eq ? eq + 1 : ""));
    }
    for (size_t i = 0; i < request->requirement_count; i++)
        json_array_append_new(requirements, json_string(request->requirements[i]));
    json_object_set_new(body, "env", env);
    json_object_set_new(body, "requirements", requirements);
    if (request->egress_allow) {
        json_t *egress = json_array();
        for (size_t i = 0; i < request->egress_allow_count; i++)
            json_array_append_new(egress, json_string(request->egress_allow[i]));
        if (json_array_size(egress) != request->egress_allow_count) {
            json_decref(egress);
            json_decref(body);
            return NULL; /* a destination left out would change the request */
        }
        json_object_set_new(body, "egress_allow", egress);
    }
    return body;
}

/* A rich output shown live: its text (the value of a last expression,
 * like a REPL prints it), or what it is when it has none (an image). */
static void show_display(json_t *event)
{
    json_t *data = json_object_get(event, "data");
    const char *text = json_string_value(json_object_get(data, "text/plain"));
    if (text && !json_object_get(data, "image/png")) {
        printf("%s\n", text);
        fflush(stdout);
        return;
    }
    const char *mime;
    json_t *value;
    fprintf(stderr, "[runbox: %s:", json_string_value(json_object_get(event, "kind")));
    json_object_foreach(data, mime, value) fprintf(stderr, " %s", mime);
    fprintf(stderr, " (see --json)]\n");
}

static void note_egress_json(json_t *result)
{
    json_t *list = json_object_get(result, "egress_denied_to");
    const char *to[RBX_EGRESS_REPORT_MAX];
    size_t count = 0;
    for (size_t i = 0; i < json_array_size(list) && count < RBX_EGRESS_REPORT_MAX; i++)
        if ((to[count] = json_string_value(json_array_get(list, i))))
            count++;
    json_int_t denied = json_integer_value(json_object_get(result, "egress_denied"));
    note_egress(denied > 0 ? (uint64_t)denied : 0, to, count);
}

/* What the live mode adds once the result came from another process. */
static void note_remote_end(const rbx_request *request, json_t *result)
{
    const char *type = json_string_value(json_object_get(result, "error_type"));
    const char *error = json_string_value(json_object_get(result, "error"));
    if (!request->stateful && type && !strcmp(type, "SyntaxError") && error)
        fputs(error, stderr); /* a one-off run's syntax error is not streamed */
    else if (json_is_true(json_object_get(result, "timed_out")))
        fputs(request->stateful ? "runbox: timed out; the kernel was interrupted\n"
                                : "runbox: timed out; every process of the execution was killed\n",
              stderr);
    note_egress_json(result);
}

/* Returned by exchange when nothing of the run was done there (the
 * process declined it, configured otherwise, or could not be sent it). */
#define RUN_HERE (-1)
/* Returned by exchange when the process was closing (a daemon gone idle,
 * a server stopping) and read nothing of the call: connecting again
 * reaches the process that takes its place. */
#define RUN_AGAIN (-2)
/* How often, 10 ms apart, a call goes to a process that says it closes:
 * its socket goes with it a moment later. */
#define CLOSING_TRIES 300

static bool of_type(json_t *event, const char *type)
{
    return !strcmp(json_string_value(json_object_get(event, "type")) ?: "", type);
}

/* Sends the run over fd (closed here, whatever happens) with the CLI's
 * configuration, and renders what comes back; an error answer is left in
 * *error for the caller. who names the process, for the case where it
 * ends the connection without a result. */
static int exchange(int fd, const rbx_request *request, const char *config, enum output_mode mode,
                    const char *who, json_t **error)
{
    *error = NULL;
    json_t *body = request_json(request);
    /* --json wants the result alone: the output's events would be sent,
     * parsed and dropped (a flood's every byte, twice over). */
    json_t *message = body ? json_pack("{s:s, s:o, s:s, s:b}", "op", "execute", "request", body,
                                       "config", config, "events", mode != MODE_JSON)
                           : NULL;
    FILE *in = message ? fdopen(fd, "r") : NULL;
    if (!in) {
        fprintf(stderr, "runbox: out of memory\n");
        json_decref(message);
        close(fd);
        return EXIT_SYSTEM;
    }
    errno = 0;
    if (cli_local_send(fd, message) != 0) {
        /* A closing process answers without reading: its answer may be
         * here although the call could not be sent. */
        bool hung_up = errno == EPIPE || errno == ECONNRESET;
        json_t *answer = hung_up ? cli_local_read(in) : NULL;
        int rc = of_type(answer, "closing") ? RUN_AGAIN : RUN_HERE;
        json_decref(answer);
        fclose(in);
        return rc;
    }
    int rc = EXIT_SYSTEM;
    bool answered = false;
    json_t *event;
    while (!answered && (event = cli_local_read(in))) {
        const char *type = json_string_value(json_object_get(event, "type"));
        const char *data = json_string_value(json_object_get(event, "data"));
        answered = type && (!strcmp(type, "result") || !strcmp(type, "error") ||
                            !strcmp(type, "declined") || !strcmp(type, "closing"));
        if (type && !strcmp(type, "declined")) {
            rc = RUN_HERE;
        } else if (type && !strcmp(type, "closing")) {
            rc = RUN_AGAIN;
        } else if (type && !strcmp(type, "error")) {
            *error = json_incref(event);
        } else if (mode == MODE_STREAM) {
            rc = cli_print_json(json_incref(event));
        } else if (answered) {
            json_object_del(event, "type");
            rc = mode == MODE_JSON ? cli_print_json(json_incref(event))
                                   : (int)json_integer_value(json_object_get(event, "exit_code"));
            if (mode == MODE_LIVE)
                note_remote_end(request, event);
        } else if (mode == MODE_LIVE && type && !strcmp(type, "display")) {
            show_display(event);
        } else if (mode == MODE_LIVE && data) {
            (void)write_all(!strcmp(type, "stdout") ? stdout : stderr, data, strlen(data));
        }
        json_decref(event);
    }
    fclose(in);
    if (!answered) {
        /* It stopped or failed mid-call: what of the call ran is unknown. */
        fprintf(stderr, "runbox: %s ended the connection before the call's result\n", who);
        rc = EXIT_SYSTEM;
    }
    return rc;
}

/* Whether an error answer says the session's kernel is held elsewhere:
 * busy, with the kernel of the call's language in a runbox process other
 * than the one (pid) that answered. */
static bool kernel_elsewhere(rbx_engine *engine, const rbx_request *request, json_t *error,
                             int pid)
{
    const char *status = json_string_value(json_object_get(error, "status"));
    if (!request->stateful || !request->session_id || !status || strcmp(status, "busy"))
        return false;
    rbx_error err;
    if (rbx_engine_open_storage(engine, &err) != RBX_OK)
        return false;
    int holder = cli_kernel_holder(engine, request->session_id, request->language);
    return holder && holder != pid;
}

/* One try of run_remote (below): RUN_AGAIN when the process that answered
 * was closing. */
static int run_remote_once(const cli_globals *globals, rbx_engine *engine,
                           const rbx_request *request, enum output_mode mode, bool start)
{
    const char *state_dir = rbx_engine_config(engine)->state_dir;
    char config[17], why[600], who[4200];
    rbx_engine_fingerprint(engine, config);
    json_t *error = NULL;
    int fd = cli_serve_connect(state_dir);
    int pid = fd >= 0 ? cli_local_peer_pid(fd) : 0;
    snprintf(who, sizeof who, "runbox serve (pid %d; see its log)", pid);
    int rc = fd >= 0 ? exchange(fd, request, config, mode, who, &error) : RUN_HERE;
    if (rc == RUN_AGAIN)
        return rc;
    /* The session's kernel in the daemon of this configuration (started
     * before the server was): the call is its. */
    bool to_daemon = rc == RUN_HERE || (error && kernel_elsewhere(engine, request, error, pid));
    if (to_daemon && (fd = cli_daemon_connect(globals, engine, start && !error, why,
                                              sizeof why)) >= 0) {
        json_decref(error);
        pid = cli_local_peer_pid(fd);
        snprintf(who, sizeof who, "the runbox daemon (pid %d; see %s/daemon.log)", pid,
                 state_dir);
        rc = exchange(fd, request, config, mode, who, &error);
        if (rc == RUN_HERE && request->stateful) {
            fprintf(stderr, "runbox: the runbox daemon of this configuration did not take the "
                            "call (see %s/daemon.log)\n",
                    state_dir);
            rc = EXIT_SYSTEM;
        }
    } else if (to_daemon && !error && request->stateful) {
        fprintf(stderr, "runbox: %s\n", why);
        rc = EXIT_SYSTEM;
    }
    if (error) {
        if (kernel_elsewhere(engine, request, error, pid))
            rc = cli_kernel_elsewhere_error(globals, engine, request->session_id,
                                            request->language);
        else
            rc = cli_local_error(error);
        json_decref(error);
    }
    return rc;
}

/* The run in another runbox process configured as this CLI is: runbox
 * serve when it runs configured alike (it holds the kernels of sessions
 * HTTP uses too), else this configuration's daemon, when it runs or start
 * says to start it (always for a stateful call). A one-off run that
 * neither takes returns RUN_HERE. A process that was closing as the call
 * came (a daemon's last moment once idle) read nothing of it: the call
 * goes again, to the process in its place. */
static int run_remote(const cli_globals *globals, rbx_engine *engine, const rbx_request *request,
                      enum output_mode mode, bool start)
{
    for (int tries = 1;; tries++) {
        int rc = run_remote_once(globals, engine, request, mode, start);
        if (rc != RUN_AGAIN)
            return rc;
        if (tries == CLOSING_TRIES) {
            fprintf(stderr, "runbox: every runbox process of %s that was asked said it is "
                            "closing (see %s/daemon.log)\n",
                    rbx_engine_config(engine)->state_dir, rbx_engine_config(engine)->state_dir);
            return EXIT_SYSTEM;
        }
        struct timespec pause = {.tv_nsec = 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
}

int cli_run(cli_globals *globals, int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(run_usage, stdout);
            return 0;
        }
    run_options opts = {.globals = globals, .network = -1};
    opts.env = calloc((size_t)argc, sizeof *opts.env);
    opts.requirements = calloc((size_t)argc, sizeof *opts.requirements);
    int rc = opts.env && opts.requirements ? parse(argc, argv, &opts) : EXIT_SYSTEM;
    if (rc) {
        free_options(&opts);
        return rc;
    }
    rbx_engine *engine = cli_engine_storage_later(globals, &rc);
    if (!engine) {
        free_options(&opts);
        return rc;
    }
    const rbx_config *config = rbx_engine_config(engine);
    rbx_request request;
    rbx_request_init(&request);
    request.language = opts.language;
    request.session_id = opts.session;
    request.image = opts.image;
    request.timeout_s = opts.timeout;
    request.env = opts.env;
    request.env_count = opts.env_count;
    request.network = opts.network;
    request.memory_mb = opts.memory_mb;
    request.cpus = opts.cpus;
    request.requirements = opts.requirements;
    const char *trace = getenv("RUNBOX_TRACE");
    request.trace = trace && *trace && strcmp(trace, "0");
    request.requirement_count = opts.requirement_count;
    if (opts.egress_given) {
        request.egress_allow = (const char *const *)opts.egress;
        request.egress_allow_count = opts.egress_count;
    }
    char *code = NULL, *input = NULL;
    char why[600];
    if (opts.code_arg) {
        request.code = opts.code_arg;
        request.code_len = strlen(opts.code_arg);
    } else if (cli_read_file(opts.file, config->max_code_bytes, &code, &request.code_len, why,
                             sizeof why) != 0) {
        rc = cli_usage_error("run", "%s", why);
        goto done;
    } else {
        request.code = code;
    }
    if (opts.input) {
        if (cli_read_file(opts.input, 64u << 20, &input, &request.stdin_len, why, sizeof why)) {
            rc = cli_usage_error("run", "--input: %s", why);
            goto done;
        }
        request.stdin_data = input;
    }
    request.stateful = opts.stateful;
    if (opts.stateful || globals->use_daemon != CLI_DAEMON_NEVER) {
        rc = run_remote(globals, engine, &request, opts.mode,
                        opts.stateful || globals->use_daemon == CLI_DAEMON_ALWAYS);
        if (rc != RUN_HERE)
            goto done;
    }
    request.cancel_fd = cancel_pipe();
    rbx_result result;
    rbx_error err = {0};
    if (rbx_engine_open_storage(engine, &err) != RBX_OK ||
        rbx_execute(engine, &request, on_output, &opts.mode, &result, &err) != RBX_OK) {
        rc = cli_engine_error(&err);
        goto done;
    }
    rc = render(&result, opts.mode);
    rbx_result_free(&result);
done:
    if (request.cancel_fd >= 0)
        close(request.cancel_fd);
    free(code);
    free(input);
    free_options(&opts);
    rbx_engine_free(engine);
    return rc;
}
