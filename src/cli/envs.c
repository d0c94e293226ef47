/* runbox envs: the cached dependency environments. */
#include "cli/cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char envs_usage[] =
    "usage: runbox envs COMMAND\n"
    "\n"
    "  list [--json]            cached environments: size, last use, requirements\n"
    "  gc [--unused SECONDS]    remove environments unused for longer than SECONDS, then\n"
    "                           the least recently used while over the size cap; an\n"
    "                           environment in use is never removed\n";

static int list(rbx_engine *engine, bool as_json)
{
    rbx_env_info *infos;
    size_t count;
    rbx_error err = {0};
    if (rbx_env_list(engine, &infos, &count, &err) != RBX_OK)
        return cli_engine_error(&err);
    json_t *array = json_array();
    for (size_t i = 0; i < count; i++) {
        if (as_json) {
            json_array_append_new(
                array, json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:b}", "environment", infos[i].key,
                                 "runtime", infos[i].runtime, "requirements", infos[i].requirements,
                                 "size_bytes", (json_int_t)infos[i].size_bytes, "created",
                                 (json_int_t)infos[i].created_unix, "last_used",
                                 (json_int_t)infos[i].last_used_unix, "in_use", infos[i].in_use));
            continue;
        }
        char when[32];
        time_t t = (time_t)infos[i].last_used_unix;
        struct tm tm;
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", gmtime_r(&t, &tm));
        printf("%-32s %12llu %s %s%s\n", infos[i].key, (unsigned long long)infos[i].size_bytes,
               when, infos[i].requirements, infos[i].in_use ? " (in use)" : "");
    }
    free(infos);
    if (as_json)
        return cli_print_json(array);
    json_decref(array);
    return 0;
}

int cli_envs(cli_globals *globals, int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(envs_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    const char *sub = argv[1];
    bool as_json = false;
    double unused = -1;
    int rc = 0;
    if (strcmp(sub, "list") && strcmp(sub, "gc"))
        return cli_usage_error("envs", "unknown command '%.64s' (accepted: list, gc)", sub);
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && !strcmp(sub, "list"))
            as_json = true;
        else if (!strcmp(argv[i], "--unused") && !strcmp(sub, "gc") && i + 1 < argc &&
                 (cli_parse_seconds(argv[i + 1], &unused) == 0 || !strcmp(argv[i + 1], "0")))
            unused = strcmp(argv[++i], "0") ? unused : 0;
        else if ((rc = cli_global_option(argc, argv, &i, globals, "envs")) == CLI_NOT_GLOBAL)
            return cli_usage_error("envs", "unexpected argument '%.64s' for '%s'", argv[i], sub);
        else if (rc)
            return rc;
    }
    rbx_engine *engine = cli_engine(globals, &rc);
    if (!engine)
        return rc;
    if (!strcmp(sub, "list")) {
        rc = list(engine, as_json);
    } else {
        size_t removed;
        rbx_error err = {0};
        if (rbx_env_gc(engine, unused, &removed, &err) != RBX_OK)
            rc = cli_engine_error(&err);
        else
            printf("removed %zu environment%s\n", removed, removed == 1 ? "" : "s");
    }
    rbx_engine_free(engine);
    return rc;
}
