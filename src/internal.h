/* Internal interfaces between the engine's modules. Not installed. */
#ifndef RBX_INTERNAL_H
#define RBX_INTERNAL_H

#include "runbox.h"

#include <pthread.h>
#include <stdarg.h>

#include "sandbox/cgroup.h"
#include <sys/types.h>

/* Inside every sandbox the program runs as RBX_SANDBOX_UID. When runbox
 * runs as root, sandbox uid N maps to host uid RBX_HOST_UID_BASE + N, far
 * from any real account; otherwise it maps to the caller's own uid. */
#define RBX_SANDBOX_UID 1000
#define RBX_HOST_UID_BASE 3000000
/* As root, each sandbox's user namespace is owned by host uid
 * RBX_OWNER_UID_BASE + the id of the thread that made it (unique among
 * live threads): the kernel charges what a namespace's processes hold
 * (inotify instances, queued signals, message queue bytes) to its owner,
 * so every sandbox gets a budget of its own instead of sharing root's. */
#define RBX_OWNER_UID_BASE 3100000

/* A root that sandboxes run on: the host's /usr or an image's tree, with
 * its plan (which paths the sandbox shows) and, as root, its prepared
 * mount namespace. Made once per engine and image, kept until the end. */
#define RBX_ROOTS_MAX 16
#define RBX_ROOT_RUNTIMES_MAX 8
typedef struct rbx_root {
    char image[RBX_IMAGE_NAME_MAX];    /* "host" or the image's name */
    char digest[RBX_IMAGE_DIGEST_MAX]; /* "" for host */
    char tree[4096];                   /* the image's tree; "" for host */
    struct rbx_root_plan *plan;
    struct rbx_template *template; /* NULL: none (not root, or turned off) */
    pthread_mutex_t template_lock;
    /* Per language (the runtime table's order), why its interpreter is not
     * in the image: NULL when it is. Found once: an image never changes. */
    const char *runtime_missing[RBX_ROOT_RUNTIMES_MAX];
} rbx_root;

struct rbx_engine {
    rbx_config config;
    char state_dir[4096];
    char sessions_dir[4200];
    char trash_dir[4200];
    int sessions_fd;      /* sessions_dir (storage.h): every walk starts here */
    int session_trash_fd; /* its .trash/, for sessions on their way in or out */
    int scratch_fd;       /* its .scratch/, executions' scratch space */
    int trash_fd;         /* <state>/trash, for environments */
    enum { RBX_STORAGE_PLAIN, RBX_STORAGE_BTRFS } storage;
    char storage_detail[400]; /* for runbox check */
    bool is_root;
    char images_dir[4200]; /* the image store (images.h) */
    /* The roots sandboxes run on (roots.c): [0] the default image's, then
     * one per other image a request named, made when first named. */
    pthread_mutex_t roots_lock;
    size_t root_count;
    struct rbx_root *roots[RBX_ROOTS_MAX];
    struct rbx_policy *policy;        /* the operator's deny patterns, or NULL */
    struct rbx_egress_policy *egress; /* where the network may lead (egress.h) */
    pthread_mutex_t running_lock;
    struct rbx_running *running; /* executions in progress, for cancellation */
    struct rbx_kernels *kernels; /* stateful sessions' kernels (kernels.h) */
    struct rbx_pool *pool;       /* prepared sandboxes (pool.h), or NULL */
    /* What else holds a session's directory: its kernels, wired in here by
     * the engine so that sessions/ need not know kernels/. */
    struct rbx_session_holders {
        size_t (*stop)(rbx_engine *engine, const char *session_id, const char *language);
        void (*describe)(int session_dirfd, bool session_busy, rbx_session_info *info);
        int (*foreign_owner)(rbx_engine *engine, int session_dirfd);
    } session_holders;
};

/* error.c: fill err and return its status, so callers can write
 * `return rbx_fail(err, RBX_EINVAL, "...")`. */
rbx_status rbx_fail(rbx_error *err, rbx_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

int64_t rbx_now_ms(void); /* monotonic clock */

/* FNV-1a over len bytes, going on from hash (first RBX_DIGEST_START): a
 * digest of configuration, for rbx_engine_fingerprint; not a secret. */
#define RBX_DIGEST_START 14695981039346656037ull
static inline uint64_t rbx_digest_add(uint64_t hash, const void *data, size_t len)
{
    for (size_t i = 0; i < len; i++)
        hash = (hash ^ ((const unsigned char *)data)[i]) * 1099511628211ull;
    return hash;
}
int64_t rbx_now_us(void); /* monotonic clock */

/* How a runtime's kernel driver (src/kernels/) is spoken to: JSON lines,
 * or lines of shell (kernel_wire.h). */
typedef enum rbx_kernel_dialect { RBX_KERNEL_JSON, RBX_KERNEL_BASH } rbx_kernel_dialect;

/* The kernel drivers, embedded when runbox is built (cmake/embed.cmake). */
extern const char rbx_kernel_python[], rbx_kernel_javascript[], rbx_kernel_bash[];
extern const unsigned long rbx_kernel_python_size, rbx_kernel_javascript_size, rbx_kernel_bash_size;

/* runtime.c: the table of languages. */
typedef struct rbx_runtime {
    const char *name; /* canonical */
    const char *aliases[4];
    const char *interpreter; /* absolute path on the host; never looked up on PATH */
    const char *extension;
    /* runbox check: a line that prints the interpreter's version, and the
     * interpreter runbox's bootstrap needs, said when the line fails. */
    const char *version_code;
    const char *needs;
    /* argv after the interpreter: the bootstrap reads the code on fd 3,
     * checks its syntax without running it, reports on fd 4, closes both,
     * then runs it in the same process. */
    const char *argv[7];
    /* Names the failure of a program that exited non-zero, from its stderr:
     * returns an error_type and sets *exception to the language's own error
     * name (malloc'ed) or NULL. */
    const char *(*classify)(int exit_code, const char *text, size_t len, char **exception);

    /* Dependencies (NULL install: the language takes no requirements). An
     * environment is a directory installed by running install (a shell
     * script getting the specs as "$@") with the directory writable at
     * env_inside; executions then see env_subdir of it, read-only, at
     * env_run_at, and run env_interpreter instead when it is set. */
    const char *install;
    const char *env_inside;
    const char *env_subdir;
    const char *env_run_at;
    const char *env_interpreter;
    /* Checks and normalizes one requirement spec into out (NUL-terminated);
     * returns false with a reason in why. */
    bool (*normalize_spec)(const char *spec, bool allow_urls, char *out, size_t size, char *why,
                           size_t why_size);

    /* Stateful sessions: the kernel is the interpreter started with
     * kernel_argv and then the driver's text as its last argument, or, with
     * kernel_greeting, the driver written to its channel first (bash reads
     * its commands there). An interrupt goes to the driver, or with
     * kernel_interrupt_group to its process group (the shell's job). */
    const char *kernel_argv[6];
    const char *kernel_driver;
    const unsigned long *kernel_driver_size;
    rbx_kernel_dialect kernel_dialect;
    bool kernel_greeting;
    bool kernel_interrupt_group;
} rbx_runtime;

const char *rbx_classify_python(int exit_code, const char *text, size_t len, char **exception);
const char *rbx_classify_javascript(int exit_code, const char *text, size_t len, char **exception);
const char *rbx_classify_bash(int exit_code, const char *text, size_t len, char **exception);
bool rbx_spec_python(const char *spec, bool allow_urls, char *out, size_t size, char *why,
                     size_t why_size);
bool rbx_spec_npm(const char *spec, bool allow_urls, char *out, size_t size, char *why,
                  size_t why_size);

const rbx_runtime *rbx_runtime_find(const char *name);
/* The languages' names, ", "-separated, into out. */
void rbx_runtime_names(char *out, size_t size);
/* The error for a language runbox does not have, naming those it has. */
rbx_status rbx_unknown_language(rbx_error *err, const char *language);

/* request.c */
#define RBX_CPUS_MIN 0.01 /* a hundredth of a core: 1 ms of CPU per 100 ms period */
rbx_status rbx_request_validate(const rbx_engine *engine, const rbx_request *request,
                                const rbx_runtime **runtime, double *timeout_s, rbx_error *err);
bool rbx_env_name_valid(const char *name, size_t len);

/* capture.c: keeps the head and the tail of a stream within a cap. */
typedef struct rbx_capture {
    size_t head_cap, tail_cap;
    char *head;
    size_t head_len;
    char *tail;      /* ring buffer */
    size_t tail_len; /* bytes valid in the ring */
    size_t tail_pos; /* next write position */
    uint64_t total;
} rbx_capture;

int rbx_capture_init(rbx_capture *capture, size_t cap);
void rbx_capture_add(rbx_capture *capture, const char *data, size_t len);
/* Returns the kept text as valid UTF-8 (NUL-terminated, *len excludes it),
 * with one marker line where bytes were left out, and frees the buffers. */
char *rbx_capture_finish(rbx_capture *capture, const char *stream_name, uint64_t *dropped,
                         size_t *len);
void rbx_capture_free(rbx_capture *capture);

/* capture.c's UTF-8 helpers (rbx_utf8_sanitize is public: runbox.h). */
/* Length of the longest prefix of data that is valid UTF-8. */
size_t rbx_utf8_valid_prefix(const char *data, size_t len);
/* Length of the longest prefix of data that does not end inside a
 * multi-byte sequence that could still be completed by more bytes. */
size_t rbx_utf8_complete_prefix(const char *data, size_t len);

/* classify.c */
typedef struct rbx_outcome {
    int exit_code;
    int signal;
    bool timed_out;
    bool oom_killed;
    bool cancelled;
    bool syntax_error;
} rbx_outcome;

/* Sets error_type and exception on result from what happened and what the
 * program wrote to stderr (only consulted when the program failed). */
void rbx_classify(const rbx_runtime *runtime, const rbx_outcome *outcome, const char *stderr_text,
                  size_t stderr_len, const char **error_type, char **exception);

/* session.c */
typedef struct rbx_session {
    char id[RBX_SESSION_ID_MAX + 1];
    bool one_off;
    int lock_fd;
    int dir_fd;           /* the session's root directory */
    char work_path[4400]; /* empty for a one-off run */
} rbx_session;

/* Takes the session within wait_s (or until cancel_fd, if not -1, becomes
 * readable), creating it on first use. */
rbx_status rbx_session_acquire(rbx_engine *engine, const char *id, double wait_s, int cancel_fd,
                               rbx_session *session, rbx_error *err);
void rbx_session_release(rbx_engine *engine, rbx_session *session);

/* roots.c. The root a request runs on: its image (NULL: the default),
 * checked against the operator's allow-list and the store, made on first
 * use. RBX_EINVAL names what may be asked for. */
rbx_status rbx_engine_root(rbx_engine *engine, const char *image, rbx_root **root, rbx_error *err);
/* Makes the default root ([0]) when the engine starts. */
rbx_status rbx_roots_init(rbx_engine *engine, rbx_error *err);
void rbx_roots_free(rbx_engine *engine);
/* Whether the runtime's interpreter is in the root (host: always); *why
 * says what is missing. */
bool rbx_root_has_runtime(const rbx_root *root, const rbx_runtime *runtime, char *why,
                          size_t why_size);

/* A descriptor of the root's prepared mount namespace for one sandbox (the
 * caller closes it), or -1 where there is none: the sandbox then builds its
 * root in a copy of the host's namespace. RUNBOX_TEMPLATE=0 turns it off. */
int rbx_root_template_ns(rbx_root *root);
/* Why there is no prepared namespace, or NULL when there is one. */
const char *rbx_root_template_why(rbx_root *root, bool is_root);

/* Names an entry of the sessions' trash: "<kind>-<pid>-<random>". */
void rbx_trash_name(char *out, size_t size, const char *kind);
/* Makes a complete session directory (lock, work/) named temp in the
 * sessions' trash, created at `created`; *dir_out is its fd. The caller
 * renames it into place. Returns 0 or -1 with errno. */
int rbx_session_build(rbx_engine *engine, const char *temp, int64_t created, int *dir_out);

/* Tests only: with RUNBOX_CRASH_AT=name in the environment, the process
 * kills itself (SIGKILL) when it reaches that point, so that a test can
 * check what a crash there leaves behind. */
void rbx_crash_point(const char *name);

/* An O_PATH fd of an existing session's work directory. */
rbx_status rbx_session_work_fd(rbx_engine *engine, const char *id, int *fd, rbx_error *err);

/* execute.c: what every execution's program gets, kernels' too. */
/* The environment: the fixed list, the session's id, extra (NULL: none)
 * and the request's own variables (request NULL: none). */
char **rbx_execution_env(const rbx_request *request, const rbx_session *session, const char *extra);
/* A dependency environment in a sandbox: env_subdir of env_path (dir holds
 * that path) bound read-only at env_run_at, and the runtime's environment
 * interpreter when it has one. */
struct rbx_root_request;
void rbx_runtime_env_bind(const rbx_runtime *runtime, const char *env_path, char *dir,
                          size_t dir_size, struct rbx_root_request *request,
                          const char **interpreter);
void rbx_execution_env_free(char **envp);
/* What a bootstrap reads on fd 3 (runtime.c): envp's entries (NULL: none,
 * the cold start's case), an empty entry, then the code. malloc'ed. */
char *rbx_code_payload(const rbx_request *request, char *const *envp, size_t *len);
/* Whether the request's code may reach outside hosts. */
bool rbx_execution_wants_network(const rbx_engine *engine, const rbx_request *request);
/* The result's egress_denied fields, from what the sandbox's policy refused. */
struct rbx_sandbox;
struct rbx_trace;
void rbx_execution_egress_result(struct rbx_sandbox *sandbox, rbx_result *result,
                                 struct rbx_trace *trace);
struct rbx_cgroup_limits rbx_execution_limits(const rbx_engine *engine, const rbx_request *request);

/* execute.c: executions running in this engine, so a session's can be
 * cancelled (rbx_session_cancel). */
typedef struct rbx_running {
    struct rbx_running *next;
    char session_id[RBX_SESSION_ID_MAX + 1];
    int kill_fd; /* an eventfd the execution's poll loop watches */
} rbx_running;

/* fsutil.c: host-side tree walks that never follow a symbolic link. */
/* Removes name (a file or a whole tree) inside dirfd. */
int rbx_remove_tree(int dirfd, const char *name);
/* Adds up the allocated bytes of the tree at name inside dirfd. */
int rbx_tree_usage(int dirfd, const char *name, uint64_t *bytes);
int rbx_mkdir_p(const char *path, mode_t mode);
/* Makes name below dirfd a directory of runbox's user alone (0700; one an
 * earlier runbox made more open is closed too) and opens it, never through
 * a link. Returns the descriptor, or -1 with errno. */
int rbx_private_dir_at(int dirfd, const char *name);
/* Copies the tree in src_dirfd into dst_dirfd: directories, regular files,
 * symbolic links (as links, never followed) and FIFOs, with their modes
 * (set-id bits dropped), owners and times; sockets and devices are left
 * out. Returns 0 or -1 with errno. */
int rbx_copy_tree(int src_dirfd, int dst_dirfd);
/* Opens path below dirfd only if it is a regular file (never through a
 * link at its end), without blocking whatever it turns out to be: FIFOs,
 * sockets and devices that a sandboxed program made fail with EINVAL. */
int rbx_open_regular(int dirfd, const char *path, int flags);
/* openat2() of path beneath dirfd (O_CLOEXEC added): "..", absolute
 * paths, links (at the end too), magic links and mount crossings fail, so
 * whatever sandboxed code or an archive planted cannot lead it elsewhere. */
int rbx_open_beneath(int dirfd, const char *path, int flags, mode_t mode);
/* Whether a link at path ("a/b/link", relative to the top of a tree) to
 * target stays inside that tree when resolved by its text alone: an
 * absolute target from the top, a relative one from the link's directory.
 * An empty target does not. */
bool rbx_link_stays_inside(const char *path, const char *target);
/* Replaces whatever is at name below dirfd with a new file holding data:
 * a link planted there is removed, never followed. */
int rbx_write_new_file(int dirfd, const char *name, const void *data, size_t len);
/* dirfd's ".lock" (made if need be), locked exclusively for the caller,
 * who unlocks by closing the returned fd; -1 when it cannot be opened.
 * What runbox processes sharing a directory serialise their changes on. */
int rbx_lock_dir(int dirfd);
/* All of len bytes to fd (retrying short writes and EINTR); -1 with errno. */
int rbx_write_all(int fd, const void *data, size_t len);
/* files.c: the directories leading to a session file path, made beneath
 * work (owned by the sandbox's user) when create; an fd of the last one,
 * *name pointing at the path's last component. -1 with errno. */
int rbx_files_open_parent(rbx_engine *engine, int work, const char *path, bool create,
                          const char **name);

/* files.c: whether a session file path is acceptable (relative, no "..",
 * ".", empty or control-character components, bounded length and depth). */
rbx_status rbx_file_path_check(const char *path, rbx_error *err);

/* Starts a host helper program (mkfs, slirp4netns) with stdio on /dev/null
 * and each pass[i] as its fd 3 + i. Returns posix_spawn's error, 0 on success. */
int rbx_spawn_helper(const char *path, char *const argv[], char *const envp[], const int *pass,
                     size_t pass_count, pid_t *pid);

#endif
