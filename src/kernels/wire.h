/* What runbox speaks with a kernel's driver (src/kernels/): how a call is
 * asked for and how its events come back, in the runtime's dialect. JSON:
 * one request per line ({"id", "code", "env"}), events one per line
 * ({"type": "start"}, {"type": "display", "kind", "data"}, then {"type":
 * "done", ...}). Bash: a few lines of shell per call, the code quoted byte
 * for byte, and "B ID", then "D ID STATUS" or "S ID" back.
 *
 * A call's id is random, so that code of an earlier call cannot name it.
 * When the driver takes a call (its earlier code has ended), it writes the
 * call's mark, RBX_KERNEL_MARK, to its stdout and stderr and says "start"
 * on its channel: what came on each before that belongs to no call. */
#ifndef RBX_KERNEL_WIRE_H
#define RBX_KERNEL_WIRE_H

#include "languages/runtime.h"

#include <jansson.h>

/* The mark that opens a call's stdout and stderr: RS "runbox:" ID RS. */
#define RBX_KERNEL_MARK_FORMAT "\036runbox:%lld\036"
/* Its bytes for the call id into mark (at least 48 bytes); its length. */
size_t rbx_kernel_wire_mark(int64_t id, char *mark, size_t size);
/* A new call's id: random, positive, and exact as a JSON number in
 * JavaScript (below 2^53). */
int64_t rbx_kernel_wire_new_id(void);

/* One call as the driver gets it. */
typedef struct rbx_kernel_wire_call {
    int64_t id; /* the call's number */
    const char *code;
    size_t code_len;
    const char *const *env; /* "NAME=value", set for this call only */
    size_t env_count;
    const char *cwd; /* a fresh kernel's first call: go there first; else NULL */
} rbx_kernel_wire_call;

/* The bytes that ask the driver to run the call; malloc'ed, *len set. */
char *rbx_kernel_wire_request(rbx_kernel_dialect dialect, const rbx_kernel_wire_call *call,
                              size_t *len);

typedef enum rbx_kernel_status {
    RBX_KERNEL_OK,
    RBX_KERNEL_ERROR,       /* an uncaught exception, or a command that failed */
    RBX_KERNEL_SYNTAX,      /* nothing ran */
    RBX_KERNEL_INTERRUPTED, /* it stopped at SIGINT */
    RBX_KERNEL_EXIT,        /* sys.exit(N) and the like: the kernel lives on */
} rbx_kernel_status;

typedef struct rbx_kernel_event {
    enum {
        RBX_KERNEL_EVENT_START, /* the driver took the call */
        RBX_KERNEL_EVENT_DISPLAY,
        RBX_KERNEL_EVENT_DONE,
        RBX_KERNEL_EVENT_OTHER
    } type;
    json_t *output; /* display: {"kind": ..., "data": {...}} (owned) */
    int64_t id;
    rbx_kernel_status status; /* done */
    int exit_code;            /* done: the status of bash's command, or sys.exit's */
    char exception[64];       /* done: the language's error name, or "" */
    int64_t execution_count;  /* done: the driver's count; 0 where it keeps none */
} rbx_kernel_event;

/* Reads one line from the driver; false when it is not one of the above
 * (a driver that user code broke): the caller stops the kernel. */
bool rbx_kernel_wire_parse(rbx_kernel_dialect dialect, const char *line, size_t len,
                           rbx_kernel_event *event);
void rbx_kernel_event_free(rbx_kernel_event *event);

#endif
