/* runbox storage: where the state directory keeps sessions' files. */
#include "cli/cli.h"
#include "local/local.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char storage_usage[] =
    "usage: runbox storage [show [--json] | unmount]\n"
    "\n"
    "  show [--json]   the layout: a btrfs image with a quota per session (as root, where\n"
    "                  the host has btrfs), or plain directories (not size-capped); its\n"
    "                  size and use\n"
    "  unmount         unmount the image (it stays mounted once made, so that runs do\n"
    "                  not pay for it); refused while code runs in a session. The next\n"
    "                  runbox on this state directory mounts it again\n";

/* Runbox daemons hold the storage open: each (one per configuration) is
 * asked to go first, its kernels with it, then all are waited for until
 * their processes have gone, together (N daemons take as long as the
 * slowest, at most 15 s). runbox serve is left alone: the unmount then
 * fails, saying the storage is busy. */
static void stop_daemons(const char *state_dir)
{
    char **names = cli_local_sockets(state_dir);
    size_t count = 0;
    while (names && names[count])
        count++;
    pid_t *stopping = calloc(count + 1, sizeof *stopping);
    for (size_t i = 0; stopping && i < count; i++)
        stopping[i] = cli_local_ask_stop(state_dir, names[i]);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (size_t i = 0; stopping && i < count; i++) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long spent = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (stopping[i] > 0 && spent < 15000)
            cli_local_wait_gone(stopping[i], (int)(15000 - spent));
    }
    free(stopping);
    cli_local_sockets_free(names);
}

int cli_storage(cli_globals *globals, int argc, char **argv)
{
    const char *sub = argc >= 2 && argv[1][0] != '-' ? argv[1] : "show";
    bool as_json = false;
    int rc = 0;
    for (int i = argc >= 2 && argv[1][0] != '-' ? 2 : 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(storage_usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json") && !strcmp(sub, "show")) {
            as_json = true;
        } else if ((rc = cli_global_option(argc, argv, &i, globals, "storage")) == CLI_NOT_GLOBAL) {
            return cli_usage_error("storage", "unexpected argument '%.64s'", argv[i]);
        } else if (rc) {
            return rc;
        }
    }
    if (strcmp(sub, "show") && strcmp(sub, "unmount"))
        return cli_usage_error("storage", "unknown command '%.64s' (accepted: show, unmount)", sub);
    rbx_engine *engine = cli_engine(globals, &rc);
    if (!engine)
        return rc;
    rbx_error err = {0};
    if (!strcmp(sub, "unmount")) {
        stop_daemons(rbx_engine_config(engine)->state_dir);
        if (rbx_storage_unmount(engine, &err) != RBX_OK)
            rc = cli_engine_error(&err);
    } else {
        rbx_storage_info info;
        rbx_storage_info_get(engine, &info);
        if (as_json)
            rc = cli_print_json(json_pack(
                "{s:s, s:b, s:s, s:I, s:I, s:s}", "layout", info.kind, "capped", info.capped,
                "detail", info.detail, "total_bytes", (json_int_t)info.total_bytes, "used_bytes",
                (json_int_t)info.used_bytes, "state_dir", rbx_engine_config(engine)->state_dir));
        else
            printf("%s\n", info.detail);
        if (!as_json && info.capped)
            printf("%llu MiB of %llu MiB used\n", (unsigned long long)(info.used_bytes >> 20),
                   (unsigned long long)(info.total_bytes >> 20));
    }
    rbx_engine_free(engine);
    return rc;
}
