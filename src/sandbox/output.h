/* A program's output on its way to the caller: captured within the cap,
 * and passed to the caller's callback in chunks of whole UTF-8 characters,
 * so that each can be rendered as valid text on its own (a character split
 * between two reads is held back until it is complete). */
#ifndef RBX_OUTPUT_H
#define RBX_OUTPUT_H

#include "base/capture.h"
#include "runbox.h"

typedef struct rbx_output {
    rbx_stream stream;
    rbx_capture *capture;
    rbx_output_fn on_output; /* NULL: capture only */
    void *user;
    char carry[4]; /* an unfinished UTF-8 sequence held for the next chunk */
    size_t carry_len;
} rbx_output;

/* Takes a chunk. Returns non-zero when the callback asked to cancel. */
int rbx_output_deliver(rbx_output *output, const char *data, size_t len);
/* At the stream's end: passes on what was held back, whole or not. */
int rbx_output_flush(rbx_output *output);

#endif
