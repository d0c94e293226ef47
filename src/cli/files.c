/* runbox files: moving files in and out of a session from the command line
 * (the local counterpart of the HTTP file routes). */
#include "cli/cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FILES_MAX_BYTES (100u << 20)

static const char files_usage[] =
    "usage: runbox files COMMAND SESSION [PATH]\n"
    "\n"
    "  list SESSION [--json]   the session's files\n"
    "  put SESSION PATH        write standard input to PATH in the session\n"
    "  get SESSION PATH        write PATH from the session to standard output\n"
    "  rm SESSION PATH         remove PATH (a file, a link, or a directory tree)\n"
    "\n"
    "PATH is relative to the session directory; '..', absolute paths and paths\n"
    "through symbolic links are refused. Files are at most 100 MiB.\n";

static int list(rbx_engine *engine, const char *id, bool as_json)
{
    rbx_file_info *files;
    size_t count;
    rbx_error err = {0};
    if (rbx_file_list(engine, id, &files, &count, &err) != RBX_OK)
        return cli_engine_error(&err);
    json_t *array = json_array();
    for (size_t i = 0; i < count; i++) {
        if (as_json)
            json_array_append_new(array,
                                  json_pack("{s:s, s:s, s:I, s:I}", "path", files[i].path, "type",
                                            files[i].type, "size", (json_int_t)files[i].size,
                                            "modified", (json_int_t)files[i].modified_unix));
        else
            printf("%-10s %12llu %s\n", files[i].type, (unsigned long long)files[i].size,
                   files[i].path);
    }
    free(files);
    if (as_json)
        return cli_print_json(array);
    json_decref(array);
    return 0;
}

static int put(rbx_engine *engine, const char *id, const char *path)
{
    char *data;
    size_t len;
    char why[300];
    if (cli_read_file("-", FILES_MAX_BYTES, &data, &len, why, sizeof why) != 0)
        return cli_usage_error("files", "%s", why);
    rbx_error err = {0};
    int rc = rbx_file_put(engine, id, path, data, len, &err) == RBX_OK ? 0 : cli_engine_error(&err);
    free(data);
    return rc;
}

static int get(rbx_engine *engine, const char *id, const char *path)
{
    char *data;
    size_t len;
    rbx_error err = {0};
    if (rbx_file_get(engine, id, path, FILES_MAX_BYTES, &data, &len, &err) != RBX_OK)
        return cli_engine_error(&err);
    int rc = fwrite(data, 1, len, stdout) == len && fflush(stdout) == 0 ? 0 : EXIT_SYSTEM;
    free(data);
    return rc;
}

int cli_files(cli_globals *globals, int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(files_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    const char *sub = argv[1];
    bool needs_path = strcmp(sub, "list") != 0;
    if (strcmp(sub, "list") && strcmp(sub, "put") && strcmp(sub, "get") && strcmp(sub, "rm"))
        return cli_usage_error("files", "unknown command '%.64s' (accepted: list, put, get, rm)",
                               sub);
    const char *words[2] = {NULL, NULL};
    size_t count = 0;
    bool as_json = false, options_done = false;
    int rc = 0;
    for (int i = 2; i < argc; i++) {
        const char *arg = argv[i];
        if (options_done || arg[0] != '-') {
            if (count == (needs_path ? 2u : 1u))
                return cli_usage_error("files", "'%s' takes SESSION%s", sub,
                                       needs_path ? " PATH" : "");
            words[count++] = arg;
        } else if (!strcmp(arg, "--")) {
            options_done = true; /* a path may begin with '-' */
        } else if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            fputs(files_usage, stdout);
            return 0;
        } else if (!strcmp(arg, "--json") && !needs_path) {
            as_json = true;
        } else if ((rc = cli_global_option(argc, argv, &i, globals, "files")) == CLI_NOT_GLOBAL) {
            return cli_usage_error("files", "unexpected argument '%.64s' for '%s'", arg, sub);
        } else if (rc) {
            return rc;
        }
    }
    if (count != (needs_path ? 2u : 1u))
        return cli_usage_error("files", "'%s' takes SESSION%s", sub, needs_path ? " PATH" : "");
    const char *id = words[0], *path = words[1];
    if (!rbx_session_id_valid(id))
        return cli_usage_error("files",
                               "invalid session id: it must match " RBX_SESSION_ID_PATTERN);
    rbx_engine *engine = cli_engine(globals, &rc);
    if (!engine)
        return rc;
    rbx_error err = {0};
    if (!strcmp(sub, "list"))
        rc = list(engine, id, as_json);
    else if (!strcmp(sub, "put"))
        rc = put(engine, id, path);
    else if (!strcmp(sub, "get"))
        rc = get(engine, id, path);
    else if (rbx_file_delete(engine, id, path, &err) != RBX_OK)
        rc = cli_engine_error(&err);
    rbx_engine_free(engine);
    return rc;
}
