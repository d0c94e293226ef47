/* runbox: an execution engine that runs Python, JavaScript and Bash code for
 * AI agents, isolated and bounded, and returns a structured result.
 *
 * The engine is this library; the CLI, HTTP and MCP servers are thin front
 * ends that build an rbx_request, call rbx_execute() and render rbx_result.
 * Every function that can fail fills an rbx_error with a message meant for
 * the person or agent who sent the request. No function exits the process.
 */
#ifndef RUNBOX_H
#define RUNBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RBX_VERSION "0.1.0"
#define RBX_SESSION_ID_MAX 64
/* The longest working directory a kernel may be asked to start in. */
#define RBX_KERNEL_CWD_MAX 1024
/* How many refused destinations a result names. */
#define RBX_EGRESS_REPORT_MAX 8
/* The most destinations a request's egress_allow may list. */
#define RBX_EGRESS_ALLOW_MAX 64

/* Why a call failed before any code ran. Front ends map these to exit
 * codes (CLI: 2) and statuses (HTTP: 400, 404, 409, 500). */
typedef enum rbx_status {
    RBX_OK = 0,
    RBX_EINVAL,  /* the request is malformed: the message says what is accepted */
    RBX_ENOENT,  /* a named session or file does not exist */
    RBX_EBUSY,   /* the session is in use and the caller chose not to wait */
    RBX_ESYSTEM, /* the host failed us (disk, kernel, missing interpreter) */
    RBX_ENOSPC,  /* no room left for it: the sessions' storage or the host's disk is full,
                  * or the server's share of a kernel limit (inotify) is used up */
} rbx_status;

typedef struct rbx_error {
    rbx_status status;
    char message[512];
} rbx_error;

/* Where sessions' files live (see `runbox storage`): AUTO takes a capped
 * btrfs image where the host allows one (root, btrfs, loop devices), else
 * plain directories; BTRFS refuses to start without one; PLAIN never
 * makes one (sessions are then not size-capped). */
typedef enum rbx_storage_choice {
    RBX_STORAGE_AUTO = 0,
    RBX_STORAGE_CHOOSE_BTRFS,
    RBX_STORAGE_CHOOSE_PLAIN,
} rbx_storage_choice;

/* Operator configuration, shared by every front end. Zero or NULL fields
 * take the documented default (rbx_config_defaults()). */
typedef struct rbx_config {
    const char *state_dir;       /* default: /var/lib/runbox as root, else $XDG_STATE_HOME/runbox */
    size_t max_code_bytes;       /* default 1 MiB */
    double default_timeout_s;    /* default 30 */
    double max_timeout_s;        /* default 300 */
    size_t output_cap_bytes;     /* per stream, default 1 MiB */
    bool network_off;            /* executions get no network unless they ask (default: on) */
    bool hibernate_off; /* an idle kernel is stopped, not checkpointed (default: checkpointed
                           where criu works: see runbox check) */
    int64_t hibernate_below_bytes; /* while the host's available memory is below this, the
                                      least recently used idle kernel hibernates; 0: the
                                      default, a tenth of the host's memory; below 0: never */
    uint64_t disk_cap_bytes;     /* size of each session's directory, default 1 GiB */
    rbx_storage_choice storage;  /* default AUTO */
    uint64_t storage_bytes;      /* all sessions together, set when the state directory's
                                    storage is made; default half the host's free space
                                    there, from 512 MiB to 64 GiB */
    uint32_t memory_mb;          /* per execution, default 512 */
    uint32_t max_memory_mb;      /* the most a request may ask for, default 8192 */
    uint32_t pids_max;           /* processes and threads per execution, default 256 */
    uint32_t cpu_weight;         /* CPU share, 1..10000 (cgroup v2 scale), default 100 */
    double cpus;                 /* CPU quota per execution in cores, default 1 */
    double max_cpus;             /* the most a request may ask for, default: the host's cores */
    const char *policy_file;     /* deny patterns checked before code runs; NULL: none */
    uint32_t max_requirements;   /* per execution, default 32 */
    bool allow_requirement_urls; /* let specs name URLs and paths (default: refused) */
    double install_timeout_s;    /* default 300 */
    size_t install_output_cap;   /* installer output kept per stream, default 64 KiB */
    bool install_network_host;   /* installs use the host's network, loopback included (for a
                                    package mirror there); default: the outside only */
    uint64_t envs_cap_bytes;     /* total size of cached environments, default 10 GiB */
    double kernel_idle_s;        /* a stateful session's kernel idle this long is stopped
                                    (its memory returned, its files kept); default 900 */
    uint32_t max_kernels;        /* live kernels per process; default from the host's memory */
    /* Egress, for executions with the network on (see rbx_egress_*): lists
     * of CIDRs, addresses and domain names ("pypi.org", "*.example.com"),
     * separated by commas or spaces. Deny wins over allow; the host's own
     * addresses are always denied. */
    const char *egress_allow;    /* reachable beyond the default (a private mirror) */
    const char *egress_deny;     /* never reachable */
    bool egress_allowlist_only;  /* only egress_allow is reachable (default: the public
                                    internet, never private, link-local, loopback,
                                    multicast or the host's own addresses) */
    bool egress_open;            /* no policy at all: everything the host reaches (for
                                    hosts without nftables, or whose own firewall
                                    does this); requests may still narrow */
    const char *egress_resolver; /* where sandboxes' names are resolved, "ADDR" or
                                    "ADDR:PORT" ("[V6]:PORT"); default: the host's
                                    /etc/resolv.conf */
    const char *egress_file;     /* lines "allow X", "deny X", "default public|none",
                                    "resolver ADDR"; '#' comments; NULL: none */
    /* Prepared sandboxes (rbx_engine_start_pool): how many may exist at
     * once, waiting or being made (0: the default, 8), and the memory the
     * waiting ones may hold together (0: the default, 512 MiB). */
    bool pool_off;
    uint32_t pool_max;
    uint32_t pool_memory_mb;
    double pool_idle_s; /* a language's shelf unused this long shrinks by one (default 30) */
    /* Runtime images (images.h): where they are kept (NULL: the host's
     * store, /var/lib/runbox/images as root, else the user's data
     * directory's runbox/images, whatever the state directory), the one executions get when they name none
     * (NULL: "default" when the store has it, else "host", the host's own
     * /usr), and those a request may name (NULL: any the store has, and
     * host; else a comma-separated list). */
    const char *images_dir;
    const char *image;
    const char *images_allowed;
    /* The criu that checkpoints sandboxes (NULL: the one `make deps`
     * installs, else criu on the PATH; see sandbox/criu.h). */
    const char *criu;
    /* The sessions' storage (mounted, swept) is opened by
     * rbx_engine_open_storage, not by rbx_engine_new: for a CLI that may
     * hand its call to another runbox and need none of it. */
    bool storage_later;
} rbx_config;

void rbx_config_defaults(rbx_config *config);

#define RBX_IMAGE_NAME_MAX 64
#define RBX_IMAGE_DIGEST_MAX 72 /* "sha256:" and 64 hex digits */

typedef struct rbx_engine rbx_engine;

/* Creates the state directory if needed. Returns NULL and fills err on failure. */
rbx_engine *rbx_engine_new(const rbx_config *config, rbx_error *err);
/* Opens the sessions' storage of an engine made with storage_later (a
 * no-op once open). */
rbx_status rbx_engine_open_storage(rbx_engine *engine, rbx_error *err);
void rbx_engine_free(rbx_engine *engine);
/* The state directory's session storage, for `runbox storage`. */
typedef struct rbx_storage_info {
    bool capped;          /* a quota per session holds */
    char kind[16];        /* "btrfs" or "plain" */
    char detail[400];     /* in words */
    uint64_t total_bytes; /* what all sessions may take together (0: the host's disk) */
    uint64_t used_bytes;
} rbx_storage_info;

void rbx_storage_info_get(rbx_engine *engine, rbx_storage_info *info);
/* Unmounts the storage's image (after the last session of the state
 * directory stopped running); the engine cannot be used afterwards. The
 * next runbox on the state directory mounts it again. */
rbx_status rbx_storage_unmount(rbx_engine *engine, rbx_error *err);

/* Sweeps what runbox processes that died outright left behind (execution
 * cgroups, scratch space, half-made or half-removed sessions): long-lived
 * front ends call it at start, so that a restart after a crash finds a
 * clean host at once. Other runbox processes' live work is never touched. */
void rbx_engine_recover(rbx_engine *engine);
const rbx_config *rbx_engine_config(const rbx_engine *engine);

/* One execution. Only language and code are required. */
typedef struct rbx_request {
    const char *language; /* a name or alias from the runtime table */
    const char *code;
    size_t code_len;
    const char *session_id; /* NULL: a one-off session, removed afterwards */
    double timeout_s;       /* 0: the configured default */
    const char *const *env; /* "KEY=VALUE" strings added to the allow-list */
    size_t env_count;
    const char *stdin_data; /* NULL: stdin is /dev/null */
    size_t stdin_len;
    int cancel_fd;                   /* -1, or an fd that becomes readable to cancel */
    int network;                     /* -1: the configured default; 0: loopback only; 1: on */
    uint32_t memory_mb;              /* 0: the configured default */
    double cpus;                     /* CPU quota in cores; 0: the configured default */
    const char *const *requirements; /* packages the code needs (PEP 508 / npm specs) */
    size_t requirement_count;
    bool trace; /* report how long each step took (result "trace") */
    /* Run in the session's kernel: a live interpreter that keeps its state
     * (variables, imports, the working directory) from call to call. A
     * stateful request without a session gets a new one, which it keeps. */
    bool stateful;
    /* Stateful only: where a kernel that this call starts has its working
     * directory (an absolute path inside the sandbox, such as
     * /home/user/project); a kernel already running keeps its own. NULL:
     * the session's directory, /home/user. */
    const char *kernel_cwd;
    /* Narrows the operator's egress policy for this execution: only these
     * destinations (CIDRs, addresses, domain names) and only where the
     * operator allows them. NULL: the operator's policy as it is; a list
     * of none (egress_allow_count 0, egress_allow not NULL): nothing. */
    const char *const *egress_allow;
    size_t egress_allow_count;
    /* The root image it runs on, by name (runbox images list), or "host"
     * for the host's own /usr; NULL: the operator's default. */
    const char *image;
} rbx_request;

/* Fills the request with its defaults (notably cancel_fd = -1). */
void rbx_request_init(rbx_request *request);

/* RBX_DISPLAY: a rich output of a stateful call, as the JSON text of
 * {"kind": "display_data" | "execute_result", "data": {MIME: ...}}. */
typedef enum rbx_stream { RBX_STDOUT = 1, RBX_STDERR = 2, RBX_DISPLAY = 3 } rbx_stream;

/* Called for each chunk of output as the program produces it, on the thread
 * that called rbx_execute(). Returning non-zero cancels the execution (for
 * example because the client that wanted the output went away). */
typedef int (*rbx_output_fn)(void *user, rbx_stream stream, const char *data, size_t len);

typedef struct rbx_result {
    bool success;      /* exit code 0, no timeout, not killed */
    char *output;      /* stdout, valid UTF-8, head and tail kept past the cap */
    size_t output_len; /* may contain NUL bytes: use the length */
    char *error;       /* stderr, plus runbox's own message for a timeout or limit */
    size_t error_len;
    int exit_code; /* 128+N when killed by signal N; 124 on timeout */
    int64_t duration_ms;
    char session_id[RBX_SESSION_ID_MAX + 1];
    const char *language;           /* canonical name: python, javascript, bash */
    char image[RBX_IMAGE_NAME_MAX]; /* the image it ran on ("host": the host's /usr) */
    const char *image_note;         /* why it ran on "host" when it named no image and the
                                       operator chose none (no default image), or NULL */
    const char *error_type;         /* NULL on success, else SyntaxError, TimeoutError, ... */
    char *exception;                /* the language's own error name (ZeroDivisionError), or NULL */
    bool timed_out;
    bool cancelled;
    uint64_t truncated_stdout; /* bytes dropped from the middle of each stream */
    uint64_t truncated_stderr;
    int64_t cpu_ms;
    int64_t peak_memory_kb;
    int signal;         /* the signal that ended the program, or 0 */
    const char *limits; /* what enforced the limits: "cgroup-v1", "cgroup-v2", "rlimits" */
    double cpus;        /* the CPU quota enforced, in cores; 0 when none could be (rlimits) */
    bool network;       /* whether the code could reach outside hosts */
    bool pooled;        /* served by a prepared sandbox (rbx_engine_start_pool) */
    /* Connection attempts (packets) the egress policy refused, and the
     * first few destinations: "ADDR:PORT", "[V6]:PORT", or a domain name
     * that the policy kept from resolving. */
    uint64_t egress_denied;
    size_t egress_denied_count;
    char egress_denied_to[RBX_EGRESS_REPORT_MAX][128];
    bool has_install;     /* the execution had requirements: the install_* fields apply */
    char install_env[64]; /* the environment's name */
    bool install_reused;  /* it existed already: nothing was installed */
    int64_t install_ms;   /* how long finding or installing it took */
    char *trace;          /* with request.trace: {"validate_us": N, ...} as JSON, else NULL */
    /* Stateful calls. */
    bool stateful;
    char *results;              /* the rich outputs, a JSON array of {"kind", "data"}; NULL: [] */
    uint64_t truncated_results; /* bytes of rich outputs left out past the cap */
    int64_t execution_count;    /* calls the kernel has run, this one included */
    bool kernel_restarted;      /* the kernel was (or had to be) started afresh: state is gone */
    bool kernel_restored;       /* the kernel had hibernated and was restored for this call */
    int64_t restore_ms;         /* ... which took this long */
    char restart_reason[360];   /* with kernel_restarted, why, where runbox knows ("": not) */
} rbx_result;

/* Runs one request. Returns RBX_OK when the request was valid and a result
 * was produced, whatever the code did (a syntax error, a timeout and a crash
 * are results). On any other status, err says why and result is empty. */
rbx_status rbx_execute(rbx_engine *engine, const rbx_request *request, rbx_output_fn on_output,
                       void *user, rbx_result *result, rbx_error *err);

void rbx_result_free(rbx_result *result);

/* The result as one line of JSON (no trailing newline); caller frees. */
char *rbx_result_to_json(const rbx_result *result);
/* The same object with "type":"result" first: the last streaming event. */
char *rbx_result_event_to_json(const rbx_result *result);

/* One streaming event, {"type":"stdout","data":"..."}, as a line of JSON
 * (no trailing newline); invalid UTF-8 becomes U+FFFD. Caller frees. */
char *rbx_event_to_json(rbx_stream stream, const char *data, size_t len);

/* Runtimes: the languages runbox knows, by canonical name. */
size_t rbx_runtime_count(void);
const char *rbx_runtime_name(size_t index);
/* Resolves a name or alias (case-insensitive); NULL when unknown. */
const char *rbx_runtime_canonical(const char *name);

/* runbox check: what this host lets runbox guarantee. */
typedef struct rbx_check_item {
    char name[32];
    bool ok;
    bool essential; /* without it runbox cannot run code safely at all */
    char detail[400];
} rbx_check_item;

#define RBX_CHECK_MAX 24
/* Probes the host (namespaces, cgroups, seccomp, network, disk, runtimes,
 * and one real sandboxed run); returns how many items were filled. */
size_t rbx_check(rbx_engine *engine, rbx_check_item *items, size_t max);

/* Sessions. */
/* A session's live kernel, as any runbox process on the state directory
 * sees it. */
typedef struct rbx_kernel_info {
    char language[16];
    int owner_pid; /* the runbox process that holds it */
    int64_t started_unix;
    int64_t idle_s; /* since its last call ended */
    uint64_t memory_bytes;
    bool busy; /* a call runs in the session */
    bool hibernated;             /* checkpointed to disk, no process left; woken by the next call */
    uint64_t checkpoint_bytes;   /* the checkpoint's size, when hibernated */
    int64_t checkpoint_ms;       /* how long it took */
} rbx_kernel_info;

#define RBX_SESSION_KERNELS_MAX 4

typedef struct rbx_session_info {
    char id[RBX_SESSION_ID_MAX + 1];
    int64_t created_unix;
    int64_t last_used_unix;
    uint64_t disk_bytes;
    bool running;
    size_t kernel_count;
    rbx_kernel_info kernels[RBX_SESSION_KERNELS_MAX];
} rbx_session_info;

/* A session as one line of JSON (the fields every front end lists:
 * session_id, created, last_used, disk_bytes, running, kernels). */
char *rbx_session_info_to_json(const rbx_session_info *info);

/* What a session id may be, for messages and schemas. */
#define RBX_SESSION_ID_PATTERN "[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
/* True when id matches RBX_SESSION_ID_PATTERN. */
bool rbx_session_id_valid(const char *id);
/* Writes a fresh random id (id must hold RBX_SESSION_ID_MAX + 1 bytes). */
void rbx_session_id_new(char *id);
/* Creates the session if it does not exist. */
rbx_status rbx_session_create(rbx_engine *engine, const char *id, rbx_error *err);
rbx_status rbx_session_info_get(rbx_engine *engine, const char *id, rbx_session_info *info,
                                rbx_error *err);
/* Lists sessions; *infos is malloc'ed, caller frees. The storage is
 * committed once for the whole listing, so that each session's disk use
 * counts what was just written. */
rbx_status rbx_session_list(rbx_engine *engine, rbx_session_info **infos, size_t *count,
                            rbx_error *err);
/* The ids of the sessions, in no order, and nothing else looked at (a
 * listing of 10,000 sessions opens each and measures its disk use);
 * *ids is malloc'ed, caller frees. */
typedef char rbx_session_id[RBX_SESSION_ID_MAX + 1];
rbx_status rbx_session_ids(rbx_engine *engine, rbx_session_id **ids, size_t *count,
                           rbx_error *err);
/* Removes a session and its files, never following a link out of it. When
 * the session is running: wait up to wait_s seconds, then RBX_EBUSY. Its
 * kernels and processes are stopped first. */
rbx_status rbx_session_remove(rbx_engine *engine, const char *id, double wait_s, rbx_error *err);

/* Moving a session to another node (transfer.c, transfer_import.c).
 * Export writes the session's files to out_fd as a tar archive (links as
 * links, whatever they point to; holes as holes; FIFOs, sockets and
 * devices left out), holding the session so no execution writes
 * meanwhile; a session past what a move carries (transfer.h) is refused
 * with the reason import would give. Import makes a new session (EBUSY if
 * id exists) from a tar archive, in memory (data, len) or read from fd:
 * whatever export writes; directories, regular files and links only, no
 * member below a link, set-id bits dropped, within the session's disk cap;
 * anything else is refused with EINVAL (or ENOSPC), at the first member
 * past a limit before anything is made, and the new session is removed
 * whole. */
rbx_status rbx_session_export(rbx_engine *engine, const char *id, int out_fd, rbx_error *err);
/* Whether session id exists here: one stat, whatever its size (unlike
 * rbx_session_info_get, which measures its disk use). */
bool rbx_session_exists(rbx_engine *engine, const char *id);
typedef struct rbx_archive_source {
    const void *data; /* the archive in memory, or NULL: read from fd */
    size_t len;
    int fd;
} rbx_archive_source;
typedef struct rbx_session_import_info {
    size_t files;
    uint64_t bytes;
} rbx_session_import_info;
rbx_status rbx_session_import(rbx_engine *engine, const char *id, const rbx_archive_source *from,
                              rbx_session_import_info *info, rbx_error *err);
/* Removes sessions idle longer than idle_s; skips running ones. */
rbx_status rbx_session_gc(rbx_engine *engine, double idle_s, size_t *removed, rbx_error *err);
/* The session's work directory on the host (for front ends that move files). */
rbx_status rbx_session_dir(rbx_engine *engine, const char *id, char *path, size_t size,
                           rbx_error *err);

/* Runtime images (src/images.c). */
typedef struct rbx_image_info {
    char name[RBX_IMAGE_NAME_MAX];
    char digest[RBX_IMAGE_DIGEST_MAX];
    uint64_t size_bytes;
    int64_t created_unix;
    char source[512];    /* "mmdebstrap trixie", or the archive it was imported from */
    char packages[4096]; /* Debian packages it was built with, comma-separated; "" imported */
    char node[128];      /* the official Node.js it was built with, or "" (Debian's, or none) */
    bool is_default;     /* what executions get when they name no image */
    bool allowed;        /* requests may name it (--allow-images) */
    unsigned languages;  /* bit i: it has language i's interpreter (rbx_runtime_name(i)) */
} rbx_image_info;

/* The store's images, by name. */
rbx_status rbx_image_list(rbx_engine *engine, rbx_image_info **infos, size_t *count,
                          rbx_error *err);
/* The images a request may name: the store's that the operator allows, by
 * name, then "host" (the host's own /usr: no digest, size or date) when it
 * is allowed. */
rbx_status rbx_image_list_nameable(rbx_engine *engine, rbx_image_info **infos, size_t *count,
                                   rbx_error *err);
/* As JSON (free() it): the fields of `runbox images list --json` and GET /v1/images. */
char *rbx_image_info_to_json(const rbx_image_info *info);
/* Builds an image with mmdebstrap (root only): Debian suite's essential
 * packages and `packages` (comma- or space-separated), plus, with `from`,
 * the packages that image was built with. Its output goes to log_fd. */
rbx_status rbx_image_build(rbx_engine *engine, const char *name, const char *packages,
                           const char *from, const char *suite, const char *mirror, int log_fd,
                           rbx_image_info *info, rbx_error *err);
/* Imports a root filesystem tar, an OCI layout directory, or a tar of one
 * (docker save, skopeo oci-archive); refused archives leave nothing. */
rbx_status rbx_image_import(rbx_engine *engine, const char *name, const char *source,
                            bool drop_setid, rbx_image_info *info, rbx_error *err);
/* Removes the name; the tree goes when no other name uses it. */
rbx_status rbx_image_remove(rbx_engine *engine, const char *name, rbx_error *err);
/* The image executions get when they name none ("host" when none). */
const char *rbx_engine_default_image(rbx_engine *engine);

/* Cached dependency environments. */
typedef struct rbx_env_info {
    char key[64];
    char runtime[16];
    char requirements[1024]; /* space-separated, normalized */
    uint64_t size_bytes;
    int64_t created_unix;
    int64_t last_used_unix;
    bool in_use;
} rbx_env_info;

rbx_status rbx_env_list(rbx_engine *engine, rbx_env_info **infos, size_t *count, rbx_error *err);
/* Removes environments unused for longer than unused_s (negative: none for
 * that reason), then the least recently used while the total is over the
 * configured cap; never one in use. */
rbx_status rbx_env_gc(rbx_engine *engine, double unused_s, size_t *removed, rbx_error *err);

/* Stops the session's kernels in this process (those of language, or all
 * with NULL): their state is gone, their files stay; the next stateful
 * call starts a fresh one. RBX_EBUSY when another runbox process holds
 * one (the message names it). *stopped counts those stopped. */
rbx_status rbx_session_restart(rbx_engine *engine, const char *id, const char *language,
                               size_t *stopped, rbx_error *err);
/* Hibernates the session's idle kernels in this process (checkpointed to
 * its directory, their processes ended: the next stateful call of each
 * language restores it); those that cannot be are stopped, and their next
 * call says kernel_restarted. *hibernated counts the first. The caller
 * lets no call into the session meanwhile (E2B's pause). */
void rbx_session_hibernate(rbx_engine *engine, const char *id, size_t *hibernated);
/* Live kernels of this engine. */
size_t rbx_kernel_count(rbx_engine *engine);

/* Prepared sandboxes: long-lived front ends (serve, mcp, the daemon) start
 * the pool, and one-off executions are then served from it when it has a
 * sandbox of the right kind ready (a cold start otherwise). Returns false
 * with why when it is off or cannot run here; executions start cold then. */
bool rbx_engine_start_pool(rbx_engine *engine, char *why, size_t why_size);

typedef struct rbx_pool_stats {
    bool enabled;
    size_t ready;               /* prepared and waiting */
    size_t preparing;           /* being made now */
    size_t serving;             /* taken by an execution, or being destroyed after it */
    size_t target;              /* what the pool aims to keep ready, over all its shelves */
    size_t max;                 /* the operator's cap on prepared sandboxes */
    size_t env_shelves;         /* dependency environments the pool keeps sandboxes for */
    uint64_t idle_memory_bytes; /* what the waiting sandboxes hold (their cgroups) */
    uint64_t memory_cap_bytes;
    uint64_t taken, missed, prepared, failed, retired;
    char last_failure[256]; /* why the last preparation failed, "" if none */
    /* Executions' cgroups kept when they ended cleanly, and given to a
     * later execution (any execution's, pooled or not). */
    uint64_t cgroups_kept, cgroups_reused;
    /* The same of their scratch spaces (kept only as they were made). */
    uint64_t scratch_kept, scratch_reused;
} rbx_pool_stats;

void rbx_engine_pool_stats(rbx_engine *engine, rbx_pool_stats *stats);

/* A digest of everything in the engine's configuration that changes what an
 * execution does (limits, policy, egress, storage...), as hex: a one-off
 * run from the CLI goes to a daemon's prepared sandboxes only when both
 * would run it alike. */
void rbx_engine_fingerprint(const rbx_engine *engine, char out[17]);

/* Stops every execution of this engine running in the session (it ends
 * as cancelled) and kills its processes; returns how many there were. */
size_t rbx_session_cancel(rbx_engine *engine, const char *id);
/* E2B's pause (paused true): stops every execution of this engine running
 * in the session (it ends as cancelled) and pauses its processes: to disk
 * where they can be checkpointed, else frozen in memory; either way they
 * keep their memory, descriptors and terminals but run nothing until
 * resumed (false: E2B's resume); one that can be neither is stopped.
 * Returns how many processes were paused (or resumed). */
size_t rbx_session_pause(rbx_engine *engine, const char *id, bool paused);

/* Processes: programs that run beside a session's executions, for as long
 * as they like (E2B's commands and terminals). Each is a sandbox of its own,
 * isolated as an execution is (namespaces, the read-only root, a cgroup
 * with the execution limits, seccomp, the sandbox's user), whose home is
 * the session's directory; it does not hold the session while it runs, so
 * executions and other processes run in the session meanwhile. Stdin is a
 * stream, or the process has a pseudo-terminal. It ends when its program
 * does (the rest of its sandbox with it), when it is killed, or when its
 * session is removed or cancelled; at most RBX_PROCESSES_MAX run per
 * session. */
#define RBX_PROCESSES_MAX 16
#define RBX_PROCESS_ARGS_MAX 256
#define RBX_PROCESS_TERMINAL_MAX 1000 /* columns or rows */

typedef struct rbx_process rbx_process;

typedef struct rbx_process_request {
    const char *session_id; /* required: it must exist */
    /* argv[0] is the program: an absolute path inside the sandbox, or a
     * name looked up in PATH there. */
    const char *const *argv;
    size_t argc;
    const char *const *env; /* "KEY=VALUE" added to the execution's fixed list */
    size_t env_count;
    const char *cwd;     /* absolute, inside the sandbox; NULL: /home/user */
    uint16_t cols, rows; /* a terminal of this size; 0, 0: none (pipes) */
    bool stdin_open;     /* without a terminal: stdin is a stream, else /dev/null */
    const char *tag;     /* the caller's name for it, listed; NULL: none */
    /* As rbx_request's: */
    const char *image;
    int network;
    const char *const *egress_allow;
    size_t egress_allow_count;
    uint32_t memory_mb;
    double cpus;
} rbx_process_request;

void rbx_process_request_init(rbx_process_request *request);

typedef enum rbx_process_event_kind {
    RBX_PROCESS_STDOUT,
    RBX_PROCESS_STDERR,
    RBX_PROCESS_TERMINAL, /* what the terminal showed */
    RBX_PROCESS_END,      /* the last event */
    /* Its sandbox paused: frozen until resumed, when it goes on and its
     * output with it (a watch that ends here can be made again then). */
    RBX_PROCESS_FROZEN,
} rbx_process_event_kind;

typedef struct rbx_process_event {
    rbx_process_event_kind kind;
    const char *data; /* output: its bytes, as they came */
    size_t len;
    /* RBX_PROCESS_END: */
    bool exited;    /* the program exited (else a signal ended it) */
    int exit_code;  /* its status when exited, else -1 */
    int signal;     /* the signal that ended it, or 0 */
    bool killed;    /* its sandbox was killed: by a signal asked for, or its session went */
    const char *error; /* why it ended other than by itself, or NULL */
    /* RBX_PROCESS_FROZEN: paused to disk (hibernated), not in memory. */
    bool on_disk;
} rbx_process_event;

/* Called on the process's own thread, in order, for every event after the
 * watch began. It must not block (copy and return); returning
 * RBX_PROCESS_HOLD takes the event but asks for no more output until
 * rbx_process_resume: the process's output waits in its pipe (and the
 * program blocks on it, as on a terminal nobody reads) - until then, or
 * until its sandbox is gone, when what is left is delivered anyway.
 * Returning another non-zero value ends the watch (no END then). */
typedef int (*rbx_process_fn)(void *user, const rbx_process_event *event);
#define RBX_PROCESS_HOLD 2

/* Starts a process; returns once its program runs (or failed to: then
 * err, nothing runs, and *process is NULL). on_event (may be NULL) watches
 * it from its first output. *process is a reference: rbx_process_free. */
rbx_status rbx_process_start(rbx_engine *engine, const rbx_process_request *request,
                             rbx_process_fn on_event, void *user, rbx_process **process,
                             rbx_error *err);
/* A running process of the session by its number; RBX_ENOENT when none
 * (ended ones are gone). A reference: rbx_process_free. */
rbx_status rbx_process_find(rbx_engine *engine, const char *session_id, uint32_t pid,
                            rbx_process **process, rbx_error *err);
/* Its number: small, unique in this engine, never reused while it runs. */
uint32_t rbx_process_pid(const rbx_process *process);
/* One more watcher, from now on; RBX_ENOENT once it has ended. *watch
 * identifies it for rbx_process_unwatch. */
rbx_status rbx_process_watch(rbx_process *process, rbx_process_fn on_event, void *user,
                             uint64_t *watch, rbx_error *err);
/* After it returns, on_event is not called any more for that watch. */
void rbx_process_unwatch(rbx_process *process, uint64_t watch);
/* The watch that held the output (RBX_PROCESS_HOLD) takes it again. */
void rbx_process_resume(rbx_process *process, uint64_t watch);
/* Processes of this engine now, over all sessions: those running, those
 * frozen and those hibernated to disk (a paused E2B sandbox's), counted
 * in one look. */
void rbx_processes_count(rbx_engine *engine, size_t *running, size_t *frozen,
                         size_t *hibernated);
/* Input: to its stdin (when open) or its terminal; blocks while the
 * program does not read, up to a few seconds (then RBX_EBUSY). */
rbx_status rbx_process_write(rbx_process *process, const void *data, size_t len, rbx_error *err);
rbx_status rbx_process_close_stdin(rbx_process *process, rbx_error *err);
/* SIGKILL kills its whole sandbox (and returns once it is gone, within a
 * few seconds); other signals (SIGTERM, SIGINT,
 * SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2) go to the program. */
rbx_status rbx_process_signal(rbx_process *process, int sig, rbx_error *err);
rbx_status rbx_process_resize(rbx_process *process, uint16_t cols, uint16_t rows, rbx_error *err);
/* Waits for its end, up to timeout_s (negative: no limit); true when it ended. */
bool rbx_process_wait(rbx_process *process, double timeout_s);
void rbx_process_free(rbx_process *process);

typedef struct rbx_process_info {
    uint32_t pid;
    char **argv; /* NULL-terminated */
    char **env;  /* its request's own "KEY=VALUE", NULL-terminated */
    char *cwd;   /* as asked, or NULL */
    char *tag;   /* or NULL */
    bool terminal;
} rbx_process_info;

/* The session's running processes, by number; *infos is malloc'ed:
 * rbx_process_infos_free. */
rbx_status rbx_process_list(rbx_engine *engine, const char *session_id, rbx_process_info **infos,
                            size_t *count, rbx_error *err);
void rbx_process_infos_free(rbx_process_info *infos, size_t count);

/* Session files, for front ends that move files in and out. Paths are
 * relative to the session directory; "..", absolute paths and paths
 * through symbolic links are refused (RBX_EINVAL), checked by the kernel
 * while it resolves them. */
typedef struct rbx_file_info {
    char path[1100];
    const char *type; /* "file", "directory", "link" or "other" */
    uint64_t size;
    int64_t modified_unix;
} rbx_file_info;

/* Writes a file (atomically: a reader never sees half of it), creating the
 * directories leading to it. The session must exist. */
rbx_status rbx_file_put(rbx_engine *engine, const char *session_id, const char *path,
                        const void *data, size_t len, rbx_error *err);
/* Reads a regular file of at most max bytes; *data is malloc'ed (and
 * NUL-terminated for convenience). */
rbx_status rbx_file_get(rbx_engine *engine, const char *session_id, const char *path, size_t max,
                        char **data, size_t *len, rbx_error *err);
/* Lists the session's files, depth first; *files is malloc'ed. */
rbx_status rbx_file_list(rbx_engine *engine, const char *session_id, rbx_file_info **files,
                         size_t *count, rbx_error *err);
/* Removes a file, a link (not what it points to) or a directory tree. */
rbx_status rbx_file_delete(rbx_engine *engine, const char *session_id, const char *path,
                           rbx_error *err);

/* Session files as E2B's envd shows them (file_tree.c, file_watch.c):
 * details, directories, moves, metadata and watches. Paths as above; ""
 * names the session directory itself where a directory is wanted (stat,
 * list, watch). Links are described, moved and removed, never followed. */
#define RBX_FILE_META_MAX 32     /* metadata pairs kept per file */
#define RBX_FILE_META_KEY_MAX 128
#define RBX_FILE_META_VALUE_MAX 4096

typedef struct rbx_file_entry {
    char path[1100]; /* relative to the session directory ("" for itself) */
    char type;       /* 'f' regular file, 'd' directory, 'l' link, 'o' anything else */
    uint64_t size;
    uint32_t mode;     /* st_mode (type and permission bits) */
    int64_t uid, gid;  /* as the sandbox sees them */
    int64_t modified_s;
    long modified_ns;
    char *link_target; /* a link's text, never followed (malloc'ed); NULL otherwise */
    /* The file's user.e2b.* extended attributes (E2B's envd keeps a file's
     * metadata there, so programs in the sandbox see and set the same). */
    size_t meta_count;
    char *meta_keys[RBX_FILE_META_MAX], *meta_values[RBX_FILE_META_MAX];
} rbx_file_entry;

/* Frees what an entry holds (not the entry). */
void rbx_file_entry_clear(rbx_file_entry *entry);
/* Frees what entries hold, then the array itself. */
void rbx_file_entries_free(rbx_file_entry *entries, size_t count);
/* The entry at path (a link is described, not followed). */
rbx_status rbx_file_stat(rbx_engine *engine, const char *session_id, const char *path,
                         rbx_file_entry *entry, rbx_error *err);
/* What the directory at path holds, depth levels down (1: its own
 * entries), parents before their contents; RBX_EINVAL when path is not a
 * directory or holds more than can be listed at once. */
rbx_status rbx_file_list_depth(rbx_engine *engine, const char *session_id, const char *path,
                               unsigned depth, rbx_file_entry **entries, size_t *count,
                               rbx_error *err);
/* Makes the directory and those leading to it; *made is false when it was
 * there already (RBX_EINVAL when something else is). */
rbx_status rbx_file_mkdir(rbx_engine *engine, const char *session_id, const char *path,
                          bool *made, rbx_error *err);
/* Renames from to to (replacing a file there), making to's directories. */
rbx_status rbx_file_move(rbx_engine *engine, const char *session_id, const char *from,
                         const char *to, rbx_error *err);
/* rbx_file_put with metadata (keys of token characters, lowercased;
 * values of printable ASCII), kept on the file before it appears. */
rbx_status rbx_file_put_meta(rbx_engine *engine, const char *session_id, const char *path,
                             const void *data, size_t len, const char *const *keys,
                             const char *const *values, size_t meta_count, rbx_error *err);
/* A regular file of at most max bytes, opened for reading (*fd, *size). */
rbx_status rbx_file_open_read(rbx_engine *engine, const char *session_id, const char *path,
                              uint64_t max, int *fd, uint64_t *size, rbx_error *err);

/* Watching a directory of a session (inotify): what changes in it, and
 * with recursive in the directories below it, made later ones included. */
typedef struct rbx_file_watch rbx_file_watch;
typedef enum rbx_file_change {
    RBX_FILE_CREATED = 1,
    RBX_FILE_WRITTEN,
    RBX_FILE_REMOVED,
    RBX_FILE_RENAMED, /* moved away from this name (the new name is CREATED) */
    RBX_FILE_CHMODDED,
} rbx_file_change;
typedef struct rbx_file_event {
    const char *name; /* relative to the watched directory */
    rbx_file_change change;
} rbx_file_event;

rbx_status rbx_file_watch_open(rbx_engine *engine, const char *session_id, const char *path,
                               bool recursive, rbx_file_watch **watch, rbx_error *err);
/* Readable (poll) when events wait. */
int rbx_file_watch_fd(const rbx_file_watch *watch);
/* Hands each waiting event to each (without blocking); returns how many.
 * *gone becomes true once the watched directory itself is gone. */
size_t rbx_file_watch_take(rbx_file_watch *watch, void (*each)(void *arg, const rbx_file_event *e),
                           void *arg, bool *gone);
/* The entry of a name an event gave, as rbx_file_stat describes it; it
 * needs only the watch (a producer thread may outlive its engine's use). */
rbx_status rbx_file_watch_stat(rbx_file_watch *watch, const char *name, rbx_file_entry *entry,
                               rbx_error *err);
void rbx_file_watch_close(rbx_file_watch *watch);

/* SHA-256 of data (Nettle, loaded on first use); RBX_ESYSTEM when it
 * cannot be loaded. */
rbx_status rbx_sha256(const void *data, size_t len, unsigned char out[32], rbx_error *err);

/* Worker threads kept for the next job.
 *
 * A server ran two threads per execution, each made for it and ended
 * after: the HTTP execution's (http/execution.c) and the prepared
 * sandbox's keeper (pool/pool.c). Making a thread and ending it cost
 * about 50 us of a core each time: the clone, its stack's pages given back
 * on its exit and faulted in again by the next one. A job given here runs
 * on a thread that has finished an earlier job and waits for the next one,
 * when there is one; else on a new thread. A thread left without a job for
 * idle_ms ends, so an idle server holds none of them.
 *
 * A job learns nothing of its thread: it says itself when it is over (the
 * caller waits for that, not for the thread). Threads carry nothing from
 * one job to the next that a job may change and not restore: a job that
 * changes its thread's namespaces, signal mask or credentials restores
 * them before it returns (the engine's do). The engine's pool uses them,
 * and a front end may, for its per-request work (src/base/workers.c). */
typedef struct rbx_workers rbx_workers;

/* At most max_idle threads wait for work, each for idle_ms at most. NULL
 * when out of memory. */
rbx_workers *rbx_workers_new(unsigned max_idle, int idle_ms);
/* Runs job(arg) on a waiting thread, or a new one: 0, or an errno value
 * when no thread could be made (the job did not run). */
int rbx_workers_run(rbx_workers *w, void (*job)(void *arg), void *arg);
/* Ends the waiting threads and frees w once they have stopped touching it.
 * Every job given must be over first. NULL is allowed. */
void rbx_workers_free(rbx_workers *w);

/* Text as JSON must carry it: a malloc'ed, NUL-terminated copy of data with
 * every invalid UTF-8 sequence replaced by U+FFFD (*out_len excludes the
 * NUL). What results hold is already so; front ends use it for text of
 * their own (a client's bytes quoted in an error). */
char *rbx_utf8_sanitize(const char *data, size_t len, size_t *out_len);

#ifdef __cplusplus
}
#endif
#endif
