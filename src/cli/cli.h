/* The runbox command line: a thin front end over the engine. */
#ifndef RBX_CLI_H
#define RBX_CLI_H

#include "runbox.h"

#include <jansson.h>
#include <stdio.h>

/* Exit codes of runbox itself (a run without --json exits with the
 * program's own code instead). */
enum { EXIT_USAGE = 2, EXIT_SYSTEM = 1 };

typedef struct cli_globals {
    const char *state_dir;
    const char *policy_file;
    bool install_network_host; /* --install-network host (or RUNBOX_INSTALL_NETWORK=host) */
    double max_cpus;           /* --max-cpus (or RUNBOX_MAX_CPUS); 0: the host's cores */
    rbx_storage_choice storage; /* --storage (or RUNBOX_STORAGE) */
    uint64_t storage_bytes;     /* --storage-size (or RUNBOX_STORAGE_SIZE) */
    char **argv;               /* as runbox was started, for `serve` (serve_elsewhere.c) */
} cli_globals;

/* Where an operator installs the shipped deploy/policy.conf. */
#define CLI_DEFAULT_POLICY "/etc/runbox/policy.conf"

/* The globals from runbox's environment (RUNBOX_STATE_DIR, ...). */
void cli_globals_init(cli_globals *globals, char **argv);
/* Takes argv[*i] (and its value, advancing *i) when it is a global option,
 * before or after the command: returns 0, or CLI_NOT_GLOBAL when it is not
 * one, or EXIT_USAGE after printing what was wrong with it. */
#define CLI_NOT_GLOBAL (-1)
int cli_global_option(int argc, char **argv, int *i, cli_globals *globals, const char *command);

/* Prints "runbox: <message>" and a hint to stderr; returns EXIT_USAGE. */
int cli_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints value as one line of JSON on stdout and releases it; returns an exit code. */
int cli_print_json(json_t *value);
/* "an object", "a string", ...: what a JSON value is, for error messages
 * of the front ends that parse JSON (HTTP, MCP). */
const char *cli_json_type_name(const json_t *value);

/* Maps an engine error to an exit code after printing it. */
int cli_engine_error(const rbx_error *err);
rbx_engine *cli_engine(const cli_globals *globals, int *exit_code);
/* Parses a size: a whole number of bytes, or of K, M, G or T (powers of 1024). */
int cli_parse_size(const char *text, uint64_t *bytes);
/* Parses a number of seconds: finite and > 0. */
int cli_parse_seconds(const char *text, double *seconds);
/* Reads a whole file (or stdin for "-") up to limit bytes. */
int cli_read_file(const char *path, size_t limit, char **data, size_t *len, char *why,
                  size_t why_size);

int cli_run(cli_globals *globals, int argc, char **argv);
int cli_sessions(cli_globals *globals, int argc, char **argv);
int cli_check(cli_globals *globals, int argc, char **argv);
int cli_envs(cli_globals *globals, int argc, char **argv);
int cli_files(cli_globals *globals, int argc, char **argv);
int cli_storage(cli_globals *globals, int argc, char **argv);
int cli_serve(cli_globals *globals, int argc, char **argv); /* src/http/, serve_elsewhere.c */
int cli_mcp(cli_globals *globals, int argc, char **argv);   /* src/mcp/ */

#endif
