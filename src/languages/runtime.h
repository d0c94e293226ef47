/* The table of languages (runtime.c): each one's interpreter, bootstrap,
 * error names, requirement specs, dependency environments and kernel. */
#ifndef RBX_LANGUAGES_RUNTIME_H
#define RBX_LANGUAGES_RUNTIME_H

#include "runbox.h"

#include <stdbool.h>
#include <stddef.h>

/* TypeScript's stripper as a file of the image (images/node_dist.c puts it
 * there): Node.js's own (amaro: SWC compiled to WebAssembly), its
 * WebAssembly read from amaro.wasm rather than decoded from the 3.8 MB
 * base64 string that Node.js's built-in copy is. Parsing that string
 * literal was 30 of the 48 ms that the first stripped line cost a fresh
 * node; the bootstrap and the kernel load this copy where it is, and use
 * module.stripTypeScriptTypes where it is not (a host's Node.js). The
 * kernel driver (kernels/javascript_kernel.js) names the same path. */
#define RBX_TYPESCRIPT_STRIPPER_DIR "/usr/lib/runbox/typescript"

/* How a runtime's kernel driver (src/kernels/) is spoken to: JSON lines,
 * or lines of shell (kernels/wire.h). */
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
    /* What an interpreter older than needs prints when it refuses the
     * bootstrap's options (NULL: nothing to look for); the result then says
     * what the language needs. */
    const char *too_old;
    /* Address space the interpreter reserves at start and never uses, in
     * MiB: where rlimits stand in for a cgroup, the memory limit is raised
     * by it (Node.js 24's V8 reserves its code range: at 512 MiB of
     * RLIMIT_DATA it cannot start). */
    unsigned reserved_mb;
    /* argv after the interpreter: the bootstrap reads the code on fd 3,
     * checks its syntax without running it, reports on fd 4, closes both,
     * then runs it in the same process. */
    const char *argv[7];
    /* The bootstrap keeps its report open after "R": the program's rich
     * outputs come there as display events, one JSON line each
     * (execution/shown.h), as a kernel's do on its channel. */
    bool results_channel;
    /* fd 3 carries the counted payload (execution/given.h), not the
     * delimited one: the bootstrap reads it in blocks. */
    bool payload_counted;
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

/* A dependency environment in a sandbox: env_subdir of env_path (dir holds
 * that path) bound read-only at env_run_at, and the runtime's environment
 * interpreter when it has one. */
struct rbx_root_request;
void rbx_runtime_env_bind(const rbx_runtime *runtime, const char *env_path, char *dir,
                          size_t dir_size, struct rbx_root_request *request,
                          const char **interpreter);

#endif
