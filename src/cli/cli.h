/* The runbox command line: a thin front end over the engine. */
#ifndef RBX_CLI_H
#define RBX_CLI_H

#include "runbox.h"
#include "api/form.h"

#include <jansson.h>
#include <stdio.h>

/* Exit codes of runbox itself (a run without --json exits with the
 * program's own code instead). */
enum { EXIT_USAGE = 2, EXIT_SYSTEM = 1 };

typedef struct cli_globals {
    const char *state_dir;
    const char *policy_file;
    bool install_network_host;  /* --install-network host (or RUNBOX_INSTALL_NETWORK=host) */
    double max_cpus;            /* --max-cpus (or RUNBOX_MAX_CPUS); 0: the host's cores */
    rbx_storage_choice storage; /* --storage (or RUNBOX_STORAGE) */
    uint64_t storage_bytes;     /* --storage-size (or RUNBOX_STORAGE_SIZE) */
    double kernel_idle_s;       /* --kernel-idle (or RUNBOX_KERNEL_IDLE); 0: the default */
    bool hibernate_off;         /* --hibernate off (or RUNBOX_HIBERNATE=off) */
    int64_t hibernate_below;    /* --hibernate-below (or RUNBOX_HIBERNATE_BELOW): bytes, -1
                                   for 0 (never), 0 when not given (the default) */
    uint32_t max_kernels;       /* --max-kernels (or RUNBOX_MAX_KERNELS); 0: the default */
    int32_t pool;               /* --pool (or RUNBOX_POOL): prepared sandboxes, 0 off,
                                   -1 the default */
    uint64_t pool_memory_bytes; /* --pool-memory (or RUNBOX_POOL_MEMORY); 0: the default */
    double pool_idle_s;         /* --pool-idle (or RUNBOX_POOL_IDLE); 0: the default */
    /* --use-daemon (or RUNBOX_USE_DAEMON): whether `runbox run` sends a
     * one-off run to the runbox process serving the state directory (its
     * prepared sandboxes): when one runs (auto), starting one (always), or
     * never. */
    enum { CLI_DAEMON_AUTO, CLI_DAEMON_ALWAYS, CLI_DAEMON_NEVER } use_daemon;
    char **argv; /* as runbox was started, for `serve` (serve_elsewhere.c) */
    /* The egress policy of executions with the network on (rbx_config's
     * egress_*): --egress-allow, --egress-deny, --egress-default,
     * --egress-resolver, --egress-file (or RUNBOX_EGRESS_ALLOW, ...). */
    const char *egress_allow;
    const char *egress_deny;
    bool egress_allowlist_only;     /* --egress-default none */
    bool egress_open;               /* --egress-default open */
    const char *egress_default_bad; /* RUNBOX_EGRESS_DEFAULT's value when it was neither
                                       public nor none: refused, not ignored */
    const char *egress_resolver;
    const char *egress_file;
    /* Runtime images: --images DIR (or RUNBOX_IMAGES), the store;
     * --default-image NAME (RUNBOX_DEFAULT_IMAGE); --allow-images LIST
     * (RUNBOX_ALLOW_IMAGES), those requests may name. */
    const char *images_dir;
    const char *default_image;
    const char *images_allowed;
    const char *criu; /* RUNBOX_CRIU: the criu for checkpoints (runbox check) */
} cli_globals;

/* Where an operator installs the shipped deploy/policy.conf. */
#define CLI_DEFAULT_POLICY "/etc/runbox/policy.conf"
/* The egress policy file read when none is named and it exists. */
#define CLI_DEFAULT_EGRESS "/etc/runbox/egress"

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

/* Maps an engine error to an exit code after printing it. */
int cli_engine_error(const rbx_error *err);
rbx_engine *cli_engine(const cli_globals *globals, int *exit_code);
/* The engine without its sessions' storage, opened by
 * rbx_engine_open_storage where the command needs it: `run` hands most
 * calls to a server or daemon, which need none of it from the CLI. */
rbx_engine *cli_engine_storage_later(const cli_globals *globals, int *exit_code);
/* Long-lived commands (serve, mcp, daemon) keep prepared sandboxes; a pool
 * that cannot start is said on stderr, and executions start cold. */
void cli_start_pool(rbx_engine *engine, const char *command);
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
int cli_images(cli_globals *globals, int argc, char **argv);
int cli_files(cli_globals *globals, int argc, char **argv);
int cli_storage(cli_globals *globals, int argc, char **argv);
int cli_daemon(cli_globals *globals, int argc, char **argv);

/* local_client.c: the local sockets (local/local.h), from the CLI. */
/* Connects to runbox serve's socket; -1 when none serves the state
 * directory. It serves the CLI only when configured alike: a message with
 * "config" from a CLI configured otherwise is declined. */
int cli_serve_connect(const char *state_dir);
/* Connects to the `runbox daemon` of engine's configuration (globals',
 * from which engine was made); with start, starts it when none runs.
 * -1 with why on failure. */
int cli_daemon_connect(const cli_globals *globals, const rbx_engine *engine, bool start,
                       char *why, size_t why_size);
/* The names of the state directory's sockets that may serve: runbox
 * serve's first, then each daemon's (NULL-terminated; or NULL, out of
 * memory). Commands that reach every holder of kernels (sessions rm and
 * restart, storage unmount) ask each. */
char **cli_local_sockets(const char *state_dir);
void cli_local_sockets_free(char **names);
/* One message (stolen) to the socket name, and the first line of its
 * answer; NULL when nobody serves it or it said nothing. */
json_t *cli_local_ask(const char *state_dir, const char *name, json_t *message);
/* Asks the daemon at the socket name to stop: its pid when it said it
 * stops or is closing already, else 0 (nobody serves name, or runbox
 * serve, which refuses). */
pid_t cli_local_ask_stop(const char *state_dir, const char *name);
/* Whether pid has gone, waiting at most timeout_ms: a daemon stops its
 * kernels after it stops listening, so its socket's end says too little. */
bool cli_local_wait_gone(pid_t pid, int timeout_ms);
/* The pid of the process at the other end of a local socket, or 0. */
int cli_local_peer_pid(int fd);
/* Sends one message (stolen) as a line. */
int cli_local_send(int fd, json_t *message);
/* One line of the answer, or NULL at its end. */
json_t *cli_local_read(FILE *in);
/* Prints an {"type": "error"} answer; returns the exit code for it. */
int cli_local_error(json_t *event);
int cli_serve(cli_globals *globals, int argc, char **argv); /* src/http/, serve_elsewhere.c */

/* daemon_options.c: what a `runbox daemon` is started with. */
/* Every option that makes the CLI's engine, as argv after "runbox daemon"
 * (a JSON array of strings, "--state-dir", state_dir first); NULL when
 * one is not UTF-8 text or memory ran out. */
json_t *cli_daemon_options(const cli_globals *globals, const rbx_config *config);
/* The name of the socket of the daemon configured as engine is: a digest
 * of everything in its configuration that a daemon is given. */
void cli_daemon_socket_name(const rbx_engine *engine, char *out, size_t size);
/* Which options differ between two such lists, for a message:
 * "--policy (/etc/p here, not given there), ..."; "" when none. */
void cli_daemon_options_differ(json_t *mine, json_t *theirs, char *out, size_t size);
/* The pid of the runbox process that holds the session's kernel of the
 * language, or 0 when none does. */
int cli_kernel_holder(rbx_engine *engine, const char *session_id, const char *language);
/* A stateful call refused because the session's kernel lives in another
 * runbox process, configured otherwise: says so on stderr, naming the
 * options that differ and how to go on; returns the exit code. */
int cli_kernel_elsewhere_error(const cli_globals *globals, rbx_engine *engine,
                               const char *session_id, const char *language);
int cli_mcp(cli_globals *globals, int argc, char **argv);   /* src/mcp/ */

#endif
