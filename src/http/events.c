/* The bounded queue between an execution and its client, and how one
 * event is framed for the wire (an NDJSON line or an SSE message).
 *
 * Backpressure: when the client reads slower than the program writes and
 * the queue is full, the engine's output callback waits, so the program
 * blocks on its own stdout as it would on a slow terminal. The wait ends
 * when stop() says so (run.c: the execution's deadline, which the engine's
 * timeout must still meet, or its cancellation); events that still do not
 * fit are then dropped from the stream (the result event, which always
 * goes through, carries the output). Memory stays bounded by the limit
 * plus one event plus the result. */
#include "http/http.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

int http_queue_init(event_queue *q, size_t limit)
{
    *q = (event_queue){.limit = limit};
    q->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (q->wake_fd < 0)
        return -1;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->room, NULL);
    return 0;
}

void http_queue_destroy(event_queue *q)
{
    pthread_cond_destroy(&q->room);
    pthread_mutex_destroy(&q->lock);
    close(q->wake_fd);
    free(q->data);
}

void http_queue_wake(event_queue *q)
{
    uint64_t one = 1;
    (void)!write(q->wake_fd, &one, sizeof one);
    pthread_mutex_lock(&q->lock);
    pthread_cond_broadcast(&q->room);
    pthread_mutex_unlock(&q->lock);
}

bool http_queue_wait(event_queue *q, int client_fd, int timeout_ms)
{
    struct pollfd fds[2] = {
        {.fd = q->wake_fd, .events = POLLIN},
        /* RDHUP: the client closed its end; HUP and ERR come unasked. */
        {.fd = client_fd, .events = POLLRDHUP},
    };
    int ready = poll(fds, client_fd >= 0 ? 2 : 1, timeout_ms);
    if (ready > 0 && (fds[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
        return false;
    uint64_t count;
    if (ready > 0 && (fds[0].revents & POLLIN))
        (void)!read(q->wake_fd, &count, sizeof count);
    return true;
}

/* Appends under the lock; the buffer only grows to what is pending. */
static bool append(event_queue *q, const char *text, size_t len)
{
    if (q->start > 0 && q->end + len > q->cap) {
        memmove(q->data, q->data + q->start, q->end - q->start);
        q->end -= q->start;
        q->start = 0;
    }
    if (q->end + len > q->cap) {
        size_t cap = q->cap ? q->cap : 4096;
        while (cap < q->end + len)
            cap *= 2;
        char *grown = realloc(q->data, cap);
        if (!grown)
            return false;
        q->data = grown;
        q->cap = cap;
    }
    memcpy(q->data + q->end, text, len);
    q->end += len;
    return true;
}

static void signal_news(event_queue *q)
{
    uint64_t one = 1;
    (void)!write(q->wake_fd, &one, sizeof one);
}

bool http_queue_push(event_queue *q, const char *text, size_t len, bool (*stop)(void *), void *arg)
{
    pthread_mutex_lock(&q->lock);
    bool stopped = false;
    while (q->end - q->start >= q->limit && !(stopped = stop(arg))) {
        /* Re-check stop() (deadline, cancellation) at least every 100 ms. */
        http_cond_wait_ms(&q->room, &q->lock, 100);
    }
    bool added = !stopped && append(q, text, len);
    pthread_mutex_unlock(&q->lock);
    if (added)
        signal_news(q);
    return added;
}

void http_queue_finish(event_queue *q, const char *text, size_t len)
{
    pthread_mutex_lock(&q->lock);
    if (text)
        (void)append(q, text, len);
    q->finished = true;
    pthread_mutex_unlock(&q->lock);
    signal_news(q);
}

size_t http_queue_take(event_queue *q, char *buf, size_t max, bool *finished)
{
    pthread_mutex_lock(&q->lock);
    size_t n = q->end - q->start;
    if (n > max)
        n = max;
    if (n)
        memcpy(buf, q->data + q->start, n);
    q->start += n;
    if (q->start == q->end)
        q->start = q->end = 0;
    *finished = q->finished && q->start == q->end;
    if (n)
        pthread_cond_broadcast(&q->room);
    pthread_mutex_unlock(&q->lock);
    return n;
}

bool http_queue_has_data(event_queue *q)
{
    pthread_mutex_lock(&q->lock);
    bool has = q->end > q->start;
    pthread_mutex_unlock(&q->lock);
    return has;
}

char *http_stream_frame(stream_format format, const char *type, const char *json, size_t *len)
{
    size_t json_len = strlen(json);
    size_t cap = json_len + strlen(type) + 32;
    char *frame = malloc(cap);
    if (!frame)
        return NULL;
    int n = format == STREAM_SSE ? snprintf(frame, cap, "event: %s\ndata: %s\n\n", type, json)
                                 : snprintf(frame, cap, "%s\n", json);
    *len = (size_t)n;
    return frame;
}
