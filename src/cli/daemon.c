/* runbox daemon: serves a local socket of the state directory
 * (local/local.h) so that stateful calls from the short-lived CLI reach
 * kernels that outlive it. The CLI starts it on demand with every option
 * it got, one daemon per configuration: its socket is named by the digest
 * of its configuration (daemon_options.c), so it serves only CLIs
 * configured as it is. It exits once it has no kernel and no connection
 * left (its kernels are stopped after --kernel-idle), so nothing lingers
 * when stateful sessions, or a configuration, are not in use. */
#include "cli/cli.h"
#include "local/local.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How long it stays with nothing to do, after its last connection. */
#define LINGER_MS 5000

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cli_daemon(cli_globals *globals, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            puts("usage: runbox daemon [options]\n\nServes stateful calls from the CLI "
                 "configured as it is, on the state\ndirectory's socket "
                 "<state>/" LOCAL_DAEMON_PREFIX "<digest of its options>" LOCAL_DAEMON_SUFFIX
                 ". The CLI starts\none on demand with its options; it exits once its last "
                 "kernel is stopped.");
            return 0;
        }
        int rc = cli_global_option(argc, argv, &i, globals, "daemon");
        if (rc == CLI_NOT_GLOBAL)
            return cli_usage_error("daemon", "unexpected argument '%.64s'", argv[i]);
        if (rc)
            return rc;
    }
    int rc = 0;
    rbx_engine *engine = cli_engine(globals, &rc);
    if (!engine)
        return rc;
    rbx_engine_recover(engine);
    const char *state_dir = rbx_engine_config(engine)->state_dir;
    char why[300], name[64];
    cli_daemon_socket_name(engine, name, sizeof name);
    int owner = 0;
    int fd = local_listen_at(state_dir, name, &owner, why, sizeof why);
    if (fd < 0) {
        rbx_engine_free(engine);
        /* Another runbox serves it: the CLI that started this one finds it. */
        if (owner)
            return 0;
        fprintf(stderr, "runbox daemon: %s\n", why);
        return EXIT_SYSTEM;
    }
    local_server *server = local_server_start(engine, fd, true);
    if (!server) {
        fprintf(stderr, "runbox daemon: cannot start serving: %s\n", strerror(errno));
        close(fd);
        rbx_engine_free(engine);
        return EXIT_SYSTEM;
    }
    /* A CLI configured otherwise asks which of its options differ. */
    local_server_set_options(server, cli_daemon_options(globals, rbx_engine_config(engine)));
    cli_start_pool(engine, "daemon");
    /* With prepared sandboxes it waits as long as they are kept warm. */
    const rbx_config *config = rbx_engine_config(engine);
    int64_t linger_ms = LINGER_MS;
    if (!config->pool_off && config->pool_idle_s * 1000 > linger_ms)
        linger_ms = (int64_t)(config->pool_idle_s * 1000);
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* A stop from the CLI (storage unmount) ends the wait at once; a
     * signal's flag is seen within the second. */
    while (!stopping && !local_server_stop_asked(server, 1000)) {
        int64_t since;
        /* Closed in one step with the last look at its connections: a CLI
         * that connects after it is told so and starts the next daemon,
         * where one taken in between would lose its call. A kernel starts
         * only in a call, so none can start once no connection is left. */
        if (local_server_idle(server, &since) && rbx_kernel_count(engine) == 0 &&
            now_ms() - since > linger_ms && local_server_close_if_idle(server, since))
            break;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", state_dir, name);
    unlink(path); /* before the last kernel's session can be used again */
    local_server_stop(server);
    rbx_engine_free(engine);
    return 0;
}
