/* runbox serve's command line. */
#include "http/http.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char serve_usage[] =
    "usage: runbox serve [--listen ADDR:PORT] [options]\n"
    "\n"
    "The HTTP API: POST /v1/execute, sessions and their files, /healthz, /metrics,\n"
    "/openapi.json, and MCP's Streamable HTTP transport at /mcp. It uses the same\n"
    "state directory, policy and limits as the CLI.\n"
    "\n"
    "options:\n"
    "  --listen ADDR:PORT      where to listen (default 127.0.0.1:8080; port 0 picks a\n"
    "                          free one, printed in the first log line)\n"
    "  --max-running N         executions at once (default 2 x cores)\n"
    "  --max-queue N           executions waiting behind them (default 64); more get 429\n"
    "  --token-file FILE       the bearer token clients must send (also RUNBOX_TOKEN);\n"
    "                          required to listen on anything but loopback\n"
    "  --max-body BYTES        largest request body and upload (default 10485760)\n"
    "  --max-download BYTES    largest file download (default 104857600)\n"
    "  --grace SECONDS         on SIGTERM or SIGINT, how long running executions may\n"
    "                          finish before they are cancelled (default 30)\n"
    "  --client-timeout SECONDS  how long a client may take to send a request\n"
    "                          (headers and body), or stay idle (default 30)\n"
    "  --header-timeout SECONDS  how long a connection may take to send its\n"
    "                          request line and headers (default 10, at most\n"
    "                          --client-timeout)\n"
    "  --max-connections N     connections open at once, over all listeners (default\n"
    "                          1024); past it the one that has waited longest for\n"
    "                          its headers is closed\n"
    "  --max-connections-per-address N  of them from one client address (an IPv6\n"
    "                          client by its /64; default 256); behind a balancer,\n"
    "                          at least --max-running + --max-queue\n"
    "  --mcp-max-sessions N    MCP sessions at /mcp at once (default 256); past it\n"
    "                          the one idle longest is ended\n"
    "  --mcp-max-sessions-per-address N  of them from one client address (default\n"
    "                          32), the same way\n"
    "  --mcp-session-idle SECONDS  an MCP session unused this long ends (default 600)\n"
    "  --e2b-listen ADDR:PORT  also serve E2B's code-interpreter protocol there, for\n"
    "                          the unmodified e2b-code-interpreter SDK (its debug mode\n"
    "                          expects 127.0.0.1:49999); default off\n"
    "\n"
    "Logs go to stderr, one JSON object per line (one per request).\n";

static bool is_option(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(arg, name, n) && (arg[n] == 0 || arg[n] == '=');
}

/* The value of --name=VALUE or --name VALUE; NULL when missing. */
static const char *option_value(int argc, char **argv, int *i)
{
    const char *eq = strchr(argv[*i], '=');
    if (eq)
        return eq + 1;
    return *i + 1 < argc ? argv[++*i] : NULL;
}

/* A whole number in [min, max]. */
static int parse_count(const char *text, unsigned long long min, unsigned long long max,
                       unsigned long long *value)
{
    char *end;
    errno = 0;
    if (!text || !*text || text[0] == '-')
        return -1;
    *value = strtoull(text, &end, 10);
    return errno || *end || *value < min || *value > max ? -1 : 0;
}

static int parse_option(int argc, char **argv, int *i, serve_options *o)
{
    const char *arg = argv[*i];
    unsigned long long n;
    double seconds;
    if (is_option(arg, "--listen")) {
        if (!(o->listen = option_value(argc, argv, i)) || !*o->listen)
            return cli_usage_error("serve", "--listen needs ADDR:PORT, e.g. 127.0.0.1:8080");
    } else if (is_option(arg, "--e2b-listen")) {
        if (!(o->e2b_listen = option_value(argc, argv, i)) || !*o->e2b_listen)
            return cli_usage_error("serve", "--e2b-listen needs ADDR:PORT, e.g. 127.0.0.1:49999");
    } else if (is_option(arg, "--max-running")) {
        if (parse_count(option_value(argc, argv, i), 1, 100000, &n))
            return cli_usage_error("serve", "--max-running needs a whole number from 1");
        o->max_running = (unsigned)n;
    } else if (is_option(arg, "--max-queue")) {
        if (parse_count(option_value(argc, argv, i), 0, 1000000, &n))
            return cli_usage_error("serve", "--max-queue needs a whole number from 0");
        o->max_queue = (unsigned)n;
    } else if (is_option(arg, "--token-file")) {
        if (!(o->token_file = option_value(argc, argv, i)) || !*o->token_file)
            return cli_usage_error("serve", "--token-file needs a file");
    } else if (is_option(arg, "--max-body") || is_option(arg, "--max-download")) {
        bool body = is_option(arg, "--max-body");
        if (parse_count(option_value(argc, argv, i), 1, (size_t)1 << 40, &n))
            return cli_usage_error("serve", "%s needs a number of bytes from 1",
                                   body ? "--max-body" : "--max-download");
        *(body ? &o->max_body : &o->max_download) = (size_t)n;
    } else if (is_option(arg, "--grace")) {
        const char *value = option_value(argc, argv, i);
        if (!value || (strcmp(value, "0") && cli_parse_seconds(value, &seconds)))
            return cli_usage_error("serve", "--grace needs a number of seconds (0 or more)");
        o->grace_s = strcmp(value, "0") ? seconds : 0;
    } else if (is_option(arg, "--header-timeout")) {
        if (parse_count(option_value(argc, argv, i), 1, 86400, &n))
            return cli_usage_error("serve", "--header-timeout needs whole seconds from 1");
        o->header_timeout_s = (unsigned)n;
    } else if (is_option(arg, "--max-connections-per-address")) {
        if (parse_count(option_value(argc, argv, i), 1, 1000000, &n))
            return cli_usage_error("serve",
                                   "--max-connections-per-address needs a whole number from 1");
        o->max_per_address = (unsigned)n;
    } else if (is_option(arg, "--max-connections")) {
        if (parse_count(option_value(argc, argv, i), 16, 1000000, &n))
            return cli_usage_error("serve", "--max-connections needs a whole number from 16");
        o->max_connections = (unsigned)n;
    } else if (is_option(arg, "--mcp-max-sessions-per-address")) {
        if (parse_count(option_value(argc, argv, i), 1, 100000, &n))
            return cli_usage_error("serve",
                                   "--mcp-max-sessions-per-address needs a whole number from 1");
        o->mcp_max_per_address = (unsigned)n;
    } else if (is_option(arg, "--mcp-max-sessions")) {
        if (parse_count(option_value(argc, argv, i), 1, 100000, &n))
            return cli_usage_error("serve", "--mcp-max-sessions needs a whole number from 1");
        o->mcp_max_sessions = (unsigned)n;
    } else if (is_option(arg, "--mcp-session-idle")) {
        if (parse_count(option_value(argc, argv, i), 1, 7 * 86400, &n))
            return cli_usage_error("serve", "--mcp-session-idle needs whole seconds from 1");
        o->mcp_idle_s = (unsigned)n;
    } else if (is_option(arg, "--client-timeout")) {
        if (parse_count(option_value(argc, argv, i), 1, 86400, &n))
            return cli_usage_error("serve", "--client-timeout needs whole seconds from 1");
        o->client_timeout_s = (unsigned)n;
    } else {
        return cli_usage_error("serve", "unknown option '%.64s'", arg);
    }
    return 0;
}

int http_options_parse(int argc, char **argv, serve_options *o, cli_globals *globals)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    *o = (serve_options){
        .listen = "127.0.0.1:8080",
        .max_running = (unsigned)(cores > 0 ? 2 * cores : 2),
        .max_queue = 64,
        .max_body = (size_t)10 << 20,
        .max_download = (size_t)100 << 20,
        .grace_s = 30,
        .client_timeout_s = 30,
        .header_timeout_s = 10,
        .max_connections = 1024,
        .max_per_address = 256,
        .mcp_max_sessions = 256,
        .mcp_max_per_address = 32,
        .mcp_idle_s = 600,
    };
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(serve_usage, stdout);
            return 0;
        }
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-')
            return cli_usage_error("serve", "unexpected argument '%.64s'", argv[i]);
        int rc = cli_global_option(argc, argv, &i, globals, "serve");
        if (rc == CLI_NOT_GLOBAL)
            rc = parse_option(argc, argv, &i, o);
        if (rc)
            return rc;
    }
    return -1;
}
