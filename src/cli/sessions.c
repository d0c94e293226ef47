/* runbox sessions: list, new, rm, gc. */
#include "cli/cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char sessions_usage[] =
    "usage: runbox sessions COMMAND\n"
    "\n"
    "  list [--json]           the sessions, with creation, last use, disk use, running\n"
    "  new                     create a session and print its id\n"
    "  rm ID [--wait SECONDS]  remove a session and its files (waits for a running\n"
    "                          execution up to SECONDS, default 0: refuse)\n"
    "  gc [--idle SECONDS]     remove sessions idle longer than SECONDS (default 3600)\n";

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
            json_t *obj = json_object();
            json_object_set_new(obj, "session_id", json_string(infos[i].id));
            json_object_set_new(obj, "created", json_integer(infos[i].created_unix));
            json_object_set_new(obj, "last_used", json_integer(infos[i].last_used_unix));
            json_object_set_new(obj, "disk_bytes", json_integer((json_int_t)infos[i].disk_bytes));
            json_object_set_new(obj, "running", json_boolean(infos[i].running));
            json_array_append_new(array, obj);
        }
        cli_print_json(array);
    } else {
        printf("%-40s %-20s %12s %s\n", "SESSION", "LAST USED (UTC)", "DISK BYTES", "STATE");
        for (size_t i = 0; i < count; i++) {
            char when[32];
            time_t t = (time_t)infos[i].last_used_unix;
            struct tm tm;
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", gmtime_r(&t, &tm));
            printf("%-40s %-20s %12llu %s\n", infos[i].id, when,
                   (unsigned long long)infos[i].disk_bytes, infos[i].running ? "running" : "idle");
        }
    }
    free(infos);
    return 0;
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
        } else if (argv[i][0] != '-' && !strcmp(sub, "rm") && !id) {
            id = argv[i];
        } else if ((rc = cli_global_option(argc, argv, &i, globals, "sessions")) !=
                   CLI_NOT_GLOBAL) {
            if (rc)
                return rc;
        } else {
            return cli_usage_error("sessions", "unexpected argument '%.64s' for '%s'", argv[i],
                                   sub);
        }
    }
    if (strcmp(sub, "list") && strcmp(sub, "new") && strcmp(sub, "rm") && strcmp(sub, "gc"))
        return cli_usage_error("sessions", "unknown command '%.64s' (accepted: list, new, rm, gc)",
                               sub);
    if (!strcmp(sub, "rm") && !id)
        return cli_usage_error("sessions", "rm needs a session id");
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
        rbx_session_id_new(fresh);
        if (rbx_session_create(engine, fresh, &err) != RBX_OK)
            rc = cli_engine_error(&err);
        else
            puts(fresh);
    } else if (!strcmp(sub, "rm")) {
        if (rbx_session_remove(engine, id, seconds > 0 ? seconds : 0, &err) != RBX_OK)
            rc = cli_engine_error(&err);
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
