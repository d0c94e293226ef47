/* Output capture: a stream's head and tail kept within a cap, and UTF-8
 * text made whole (rbx_utf8_sanitize itself is public: runbox.h). */
#ifndef RBX_BASE_CAPTURE_H
#define RBX_BASE_CAPTURE_H

#include <stdint.h>
#include <stddef.h>

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

#endif
