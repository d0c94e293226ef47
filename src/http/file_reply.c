/* A file's bytes as a response body, for files a sandbox can change while
 * they are sent. libmicrohttpd's own file responses (MHD_create_response_
 * from_fd) send with sendfile(), which returns 0 once the file is shorter
 * than the length announced; libmicrohttpd 0.9.75 takes that as "try
 * again" and spins a thread at full CPU, on a connection that never ends.
 * Here each piece is read with pread() at its place, and a file found
 * shorter than announced ends the response with an error: the connection
 * closes short of Content-Length, which the client sees as a cut
 * download. A file that grew is sent as long as announced, no more. */
#include "http/http.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define FILE_BLOCK (64 * 1024)

typedef struct file_body {
    int fd;
    uint64_t size;        /* announced in Content-Length */
    uint64_t *bytes_sent; /* the request's count, for the access log */
} file_body;

/* MHD's content reader; never returns 0, which would mean "nothing yet"
 * and have libmicrohttpd call again at once. */
static ssize_t read_file(void *cls, uint64_t pos, char *buf, size_t max)
{
    file_body *body = cls;
    if (pos >= body->size)
        return MHD_CONTENT_READER_END_OF_STREAM;
    size_t want = body->size - pos < max ? (size_t)(body->size - pos) : max;
    ssize_t n;
    do
        n = pread(body->fd, buf, want, (off_t)pos);
    while (n < 0 && errno == EINTR);
    if (n <= 0) /* shrunk since it was opened, or unreadable */
        return MHD_CONTENT_READER_END_WITH_ERROR;
    *body->bytes_sent += (uint64_t)n;
    return n;
}

static void free_file(void *cls)
{
    file_body *body = cls;
    close(body->fd);
    free(body);
}

struct MHD_Response *http_file_response(int fd, uint64_t size, uint64_t *bytes_sent)
{
    file_body *body = malloc(sizeof *body);
    if (!body)
        return NULL;
    *body = (file_body){.fd = fd, .size = size, .bytes_sent = bytes_sent};
    struct MHD_Response *response =
        MHD_create_response_from_callback(size, FILE_BLOCK, read_file, body, free_file);
    if (!response)
        free(body);
    return response;
}
