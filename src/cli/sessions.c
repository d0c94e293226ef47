/* runbox sessions: list, new, rm, gc, restart, export, import. */
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char sessions_usage[] =
    "usage: runbox sessions COMMAND\n"
    "\n"
    "  list [--json]           the sessions, with creation, last use, disk use, running\n"
    "  new [ID]                create a session (named ID, or a fresh id) and print its id\n"
    "  rm ID [--wait SECONDS]  remove a session and its files (waits for a running\n"
    "                          execution up to SECONDS, default 0: refuse)\n"
    "  gc [--idle SECONDS]     remove sessions idle longer than SECONDS (default 3600)\n"
    "  restart ID [--language L]\n"
    "                          stop the session's kernels (of one language), so that its\n"
    "                          next stateful call starts afresh; its files stay\n"
    "  export ID [--output FILE]\n"
    "                          the session's files and hibernated kernels as a tar\n"
    "                          archive, to FILE or stdout\n"
    "  import ID [FILE]        a new session ID from a tar archive (FILE or stdin) made by\n"
    "                          export: regular files, directories and links (kept as links)\n"
    "\n"
    "export and import move a session to another node: export it from the node that\n"
    "holds it, import it through the load balancer (see deploy/). A hibernated kernel\n"
    "wakes there with its variables if the nodes share <state>/checkpoint.key (it\n"
    "signs the checkpoints export carries); otherwise it starts afresh, saying why.\n"
    "rm and restart reach a kernel held by runbox serve or a runbox daemon (one per\n"
    "configuration) through the state directory's local sockets.\n";

static const char *kernels_word(size_t n)
{
    return n == 1 ? "kernel" : "kernels";
}

/* Stops the session's kernels (of one language) in every runbox process
 * that serves the state directory (runbox serve, each configuration's
 * daemon), then looks that none of them is left. */
static int restart_everywhere(rbx_engine *engine, const char *id, const char *language)
{
    const char *state_dir = rbx_engine_config(engine)->state_dir;
    char **names = cli_local_sockets(state_dir);
    size_t stopped = 0;
    for (size_t i = 0; names && names[i]; i++) {
        json_t *answer =
            cli_local_ask(state_dir, names[i],
                          json_pack("{s:s, s:s, s:s?}", "op", "restart", "session_id", id,
                                    "language", language));
        /* One that said busy stopped its own all the same, and saw
         * another's kernel (of any language): that one is asked in turn. */
        json_int_t n = json_integer_value(json_object_get(answer, "stopped"));
        stopped += n > 0 ? (size_t)n : 0;
        json_decref(answer);
    }
    cli_local_sockets_free(names);
    rbx_session_info info;
    rbx_error err = {0};
    if (rbx_session_info_get(engine, id, &info, &err) != RBX_OK)
        return cli_engine_error(&err);
    for (size_t k = 0; k < info.kernel_count; k++)
        if (!info.kernels[k].hibernated &&
            (!language || !strcmp(info.kernels[k].language, language))) {
            fprintf(stderr,
                    "runbox: the %s kernel of session %s lives in a runbox process (pid %d) "
                    "that serves no socket of %s: stop that process\n",
                    info.kernels[k].language, id, info.kernels[k].owner_pid, state_dir);
            return EXIT_SYSTEM;
        }
    printf("stopped %zu %s\n", stopped, kernels_word(stopped));
    return 0;
}

/* A session with a kernel in another runbox process is removed by the
 * processes that hold its kernels: each stops its own, and the one that
 * holds the last removes the session. */
static int remove_everywhere(rbx_engine *engine, const char *id, double wait)
{
    const char *state_dir = rbx_engine_config(engine)->state_dir;
    char **names = cli_local_sockets(state_dir);
    bool removed = false;
    for (size_t i = 0; !removed && names && names[i]; i++) {
        json_t *answer = cli_local_ask(state_dir, names[i],
                                       json_pack("{s:s, s:s, s:f}", "op", "remove", "session_id",
                                                 id, "wait", wait));
        removed = !strcmp(json_string_value(json_object_get(answer, "type")) ?: "", "removed");
        json_decref(answer);
    }
    cli_local_sockets_free(names);
    rbx_error err = {0};
    if (!removed && rbx_session_remove(engine, id, wait, &err) != RBX_OK)
        return cli_engine_error(&err);
    return 0;
}

static int list(rbx_engine *engine, bool as_json)
{
    rbx_session_info *infos;
    size_t count;
    rbx_error err = {0};
    if (rbx_session_list(engine, &infos, &count, &err) != RBX_OK)
        return cli_engine_error(&err);
    if (as_json) {
        json_t *array = json_array();
        for (size_t i = 0; i < count; i++) {
            json_t *obj = api_json_of_text(rbx_session_info_to_json(&infos[i]));
            if (obj)
                json_array_append_new(array, obj);
        }
        cli_print_json(array);
    } else {
        printf("%-40s %-20s %12s %-8s %s\n", "SESSION", "LAST USED (UTC)", "DISK BYTES", "STATE",
               "KERNELS");
        for (size_t i = 0; i < count; i++) {
            char when[32];
            time_t t = (time_t)infos[i].last_used_unix;
            struct tm tm;
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", gmtime_r(&t, &tm));
            printf("%-40s %-20s %12llu %-8s", infos[i].id, when,
                   (unsigned long long)infos[i].disk_bytes, infos[i].running ? "running" : "idle");
            /* Each live kernel: language, memory, idle time. */
            for (size_t k = 0; k < infos[i].kernel_count; k++) {
                const rbx_kernel_info *kernel = &infos[i].kernels[k];
                if (kernel->hibernated) {
                    printf(" %s-kernel(hibernated, %.1f MiB on disk, idle %llds)", kernel->language,
                           (double)kernel->checkpoint_bytes / (1 << 20), (long long)kernel->idle_s);
                    continue;
                }
                printf(" %s-kernel(%.1f MiB, idle %llds, pid %d)", kernel->language,
                       (double)kernel->memory_bytes / (1 << 20), (long long)kernel->idle_s,
                       kernel->owner_pid);
            }
            putchar('\n');
        }
    }
    free(infos);
    return 0;
}

static bool takes_id(const char *sub)
{
    return !strcmp(sub, "rm") || !strcmp(sub, "restart") || !strcmp(sub, "export") ||
           !strcmp(sub, "import");
}

static int export_session(rbx_engine *engine, const char *id, const char *file)
{
    if (!file && isatty(1)) {
        fprintf(stderr, "runbox: refusing to write a tar archive to a terminal: redirect "
                        "stdout to a file or use --output FILE\n");
        return EXIT_USAGE;
    }
    int fd = file ? open(file, O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY | O_CLOEXEC, 0600) : 1;
    if (fd < 0) {
        fprintf(stderr, "runbox: cannot write %s: %s\n", file, strerror(errno));
        return EXIT_SYSTEM;
    }
    rbx_error err = {0};
    int rc = rbx_session_export(engine, id, fd, &err) == RBX_OK ? 0 : cli_engine_error(&err);
    if (file && close(fd) != 0 && rc == 0) {
        fprintf(stderr, "runbox: cannot write %s: %s\n", file, strerror(errno));
        rc = EXIT_SYSTEM;
    }
    if (file && rc != 0)
        unlink(file); /* no half archive left to be imported later */
    return rc;
}

static int import_session(rbx_engine *engine, const char *id, const char *file)
{
    if (!file && isatty(0)) {
        fprintf(stderr, "runbox: import reads a tar archive from FILE or stdin, and stdin "
                        "is a terminal: runbox sessions import ID FILE\n");
        return EXIT_USAGE;
    }
    int fd = file ? open(file, O_RDONLY | O_NOCTTY | O_CLOEXEC) : 0;
    if (fd < 0) {
        fprintf(stderr, "runbox: cannot read %s: %s\n", file, strerror(errno));
        return EXIT_USAGE;
    }
    rbx_archive_source from = {.fd = fd};
    rbx_session_import_info info;
    rbx_error err = {0};
    int rc = rbx_session_import(engine, id, &from, &info, &err) == RBX_OK
                 ? (printf("imported %zu file%s (%llu bytes) into session %s\n", info.files,
                           info.files == 1 ? "" : "s", (unsigned long long)info.bytes, id),
                    0)
                 : cli_engine_error(&err);
    if (file)
        close(fd);
    return rc;
}

int cli_sessions(cli_globals *globals, int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(sessions_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    const char *sub = argv[1];
    const char *id = NULL;
    bool as_json = false;
    double seconds = -1;
    const char *language = NULL;
    const char *file = NULL;
    int rc = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(sessions_usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json") && !strcmp(sub, "list")) {
            as_json = true;
        } else if ((!strcmp(argv[i], "--idle") && !strcmp(sub, "gc")) ||
                   (!strcmp(argv[i], "--wait") && !strcmp(sub, "rm"))) {
            if (i + 1 >= argc || cli_parse_seconds(argv[i + 1], &seconds) != 0)
                return cli_usage_error("sessions", "%s needs a number of seconds above 0", argv[i]);
            i++;
        } else if (argv[i][0] != '-' && (takes_id(sub) || !strcmp(sub, "new")) && !id) {
            id = argv[i];
        } else if (argv[i][0] != '-' && !strcmp(sub, "import") && id && !file) {
            file = argv[i];
        } else if (!strcmp(argv[i], "--output") && !strcmp(sub, "export")) {
            if (i + 1 >= argc || !argv[i + 1][0])
                return cli_usage_error("sessions", "--output needs a file name");
            file = argv[++i];
        } else if (!strcmp(argv[i], "--language") && !strcmp(sub, "restart")) {
            if (i + 1 >= argc || !rbx_runtime_canonical(argv[i + 1]))
                return cli_usage_error("sessions", "--language needs python, javascript, typescript or bash");
            language = rbx_runtime_canonical(argv[++i]);
        } else if ((rc = cli_global_option(argc, argv, &i, globals, "sessions")) !=
                   CLI_NOT_GLOBAL) {
            if (rc)
                return rc;
        } else {
            return cli_usage_error("sessions", "unexpected argument '%.64s' for '%s'", argv[i],
                                   sub);
        }
    }
    if (strcmp(sub, "list") && strcmp(sub, "new") && strcmp(sub, "gc") && !takes_id(sub))
        return cli_usage_error("sessions",
                               "unknown command '%.64s' (accepted: list, new, rm, gc, restart, "
                               "export, import)",
                               sub);
    if (takes_id(sub) && !id)
        return cli_usage_error("sessions", "%s needs a session id", sub);
    if (id && !rbx_session_id_valid(id))
        return cli_usage_error("sessions",
                               "invalid session id: it must match " RBX_SESSION_ID_PATTERN);
    rbx_engine *engine = cli_engine(globals, &rc);
    if (!engine)
        return rc;
    rbx_error err = {0};
    if (!strcmp(sub, "list")) {
        rc = list(engine, as_json);
    } else if (!strcmp(sub, "new")) {
        char fresh[RBX_SESSION_ID_MAX + 1];
        if (id)
            snprintf(fresh, sizeof fresh, "%s", id);
        else
            rbx_session_id_new(fresh);
        if (rbx_session_create(engine, fresh, &err) != RBX_OK)
            rc = cli_engine_error(&err);
        else
            puts(fresh);
    } else if (!strcmp(sub, "rm")) {
        /* A kernel held elsewhere: that process removes the session. */
        double wait = seconds > 0 ? seconds : 0;
        if (rbx_session_remove(engine, id, wait, &err) != RBX_OK)
            rc = err.status == RBX_EBUSY ? remove_everywhere(engine, id, wait)
                                         : cli_engine_error(&err);
    } else if (!strcmp(sub, "restart")) {
        rc = restart_everywhere(engine, id, language);
    } else if (!strcmp(sub, "export")) {
        rc = export_session(engine, id, file);
    } else if (!strcmp(sub, "import")) {
        rc = import_session(engine, id, file);
    } else {
        size_t removed;
        if (rbx_session_gc(engine, seconds >= 0 ? seconds : 3600, &removed, &err) != RBX_OK)
            rc = cli_engine_error(&err);
        else
            printf("removed %zu idle session%s\n", removed, removed == 1 ? "" : "s");
    }
    rbx_engine_free(engine);
    return rc;
}
