/* runbox mcp: the command. The protocol's stdin and stdout move to private
 * descriptors (close-on-exec) before anything else runs, and fds 0 and 1
 * become /dev/null and stderr: no library call and no child process can
 * read the protocol's input or write into its output. */
#include "mcp/mcp.h"
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static const char mcp_usage[] =
    "usage: runbox mcp\n"
    "\n"
    "A Model Context Protocol server on stdio (MCP " MCP_LATEST_VERSION ", also 2025-06-18,\n"
    "2025-03-26 and 2024-11-05): newline-delimited JSON-RPC 2.0 on stdin and stdout,\n"
    "logs on stderr. An MCP host starts it as {\"command\": \"runbox\", \"args\": [\"mcp\"]}.\n"
    "\n"
    "Tools: execute_python, execute_javascript, execute_bash, list_sessions,\n"
    "close_session. Resources: each session's files, as\n"
    "runbox://sessions/{session_id}/files/{path}, with subscriptions; logs of the\n"
    "server's events after logging/setLevel. Up to 8 calls run at once; later ones\n"
    "wait. The server ends when stdin closes or on SIGTERM, SIGINT or SIGHUP, after\n"
    "cancelling running calls.\n";

/* The write end of the pipe that stops the server on SIGTERM, SIGINT or
 * SIGHUP, so that running executions are cancelled on the way out. */
static int stop_write_fd = -1;

static void on_stop_signal(int sig)
{
    (void)sig;
    (void)!write(stop_write_fd, "x", 1);
}

/* A handler, not SIG_IGN: an ignored SIGPIPE would be inherited by the
 * programs runbox runs, and a write to a gone client must give EPIPE. */
static void on_sigpipe(int sig)
{
    (void)sig;
}

static int stop_pipe(void)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    stop_write_fd = fds[1];
    struct sigaction sa = {.sa_handler = on_stop_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = on_sigpipe;
    sigaction(SIGPIPE, &sa, NULL);
    return fds[0];
}

static int take_stdio(int *in_fd, int *out_fd)
{
    *in_fd = fcntl(0, F_DUPFD_CLOEXEC, 3);
    *out_fd = fcntl(1, F_DUPFD_CLOEXEC, 3);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (*in_fd < 0 || *out_fd < 0 || null < 0)
        return -1;
    int log_fd = fcntl(2, F_GETFD) >= 0 ? 2 : null;
    int rc = dup2(null, 0) < 0 || dup2(log_fd, 1) < 0 ? -1 : 0;
    close(null);
    return rc;
}

int cli_mcp(cli_globals *globals, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(mcp_usage, stdout);
            return 0;
        }
        int taken = cli_global_option(argc, argv, &i, globals, "mcp");
        if (taken == CLI_NOT_GLOBAL)
            return cli_usage_error("mcp", "unexpected argument '%.64s'", argv[i]);
        if (taken)
            return taken;
    }
    int in_fd = -1, out_fd = -1;
    if (take_stdio(&in_fd, &out_fd) != 0) {
        fprintf(stderr, "runbox mcp: cannot take over stdin and stdout: %s\n", strerror(errno));
        return EXIT_SYSTEM;
    }
    int rc;
    rbx_engine *engine = cli_engine(globals, &rc);
    if (engine)
        rbx_engine_recover(engine); /* what a killed predecessor left goes now */
    if (engine)
        cli_start_pool(engine, "mcp");
    int stop_fd = engine ? stop_pipe() : -1;
    if (engine && stop_fd < 0) {
        fprintf(stderr, "runbox mcp: cannot create a pipe: %s\n", strerror(errno));
        rc = EXIT_SYSTEM;
    } else if (engine) {
        rc = mcp_serve(engine, in_fd, out_fd, stop_fd);
    }
    rbx_engine_free(engine);
    close(in_fd);
    close(out_fd);
    if (stop_fd >= 0) {
        close(stop_fd);
        close(stop_write_fd);
    }
    return rc;
}
