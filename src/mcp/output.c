/* Where the server's messages go. On stdio, the only writer of the
 * protocol's stdout: every message, from any thread, goes through one queue
 * to one writer thread, so lines never interleave, and a client that reads
 * slowly never stalls an execution, whose progress is sent from inside the
 * engine's poll loop (the output callback). Another transport (runbox
 * serve's /mcp) gives a sink of its own instead, which routes each message
 * to the HTTP stream it belongs to. */
#include "mcp/mcp.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Past this many unwritten bytes progress is dropped, never a response: a
 * client that does not keep up loses live output, not results. */
#define PROGRESS_BACKLOG_MAX ((size_t)4 << 20)

typedef struct line {
    struct line *next;
    char *text; /* one message and its newline */
    size_t len;
} line;

struct mcp_output {
    mcp_sink_fn sink; /* set: the transport takes every message; no writer */
    void *sink_context;
    int fd;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    line *head, *tail;
    line *writing;  /* taken off the queue, being written */
    size_t backlog; /* bytes queued */
    bool started;   /* the writer entered its loop */
    bool stopping;  /* no more messages; the writer ends once the queue is empty */
    bool done;      /* the writer ended */
    bool broken;    /* the client stopped reading: what is left is dropped */
    atomic_bool typed_results; /* MCP 2026-07-28: every result says resultType */
    pthread_t writer;
};

static bool write_all(int fd, const char *data, size_t len)
{
    while (len) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        data += n;
        len -= (size_t)n;
    }
    return true;
}

static void *write_lines(void *arg)
{
    mcp_output *output = arg;
    pthread_mutex_lock(&output->lock);
    output->started = true;
    pthread_cond_broadcast(&output->changed);
    for (;;) {
        while (!output->head && !output->stopping)
            pthread_cond_wait(&output->changed, &output->lock);
        line *next = output->head;
        if (!next)
            break;
        output->head = next->next;
        if (!output->head)
            output->tail = NULL;
        output->writing = next;
        bool broken = output->broken;
        pthread_mutex_unlock(&output->lock);
        bool written = !broken && write_all(output->fd, next->text, next->len);
        if (!broken && !written)
            fprintf(stderr, "runbox mcp: cannot write to stdout (%s); dropping output\n",
                    strerror(errno));
        pthread_mutex_lock(&output->lock);
        output->broken = broken || !written;
        output->backlog -= next->len;
        output->writing = NULL;
        free(next->text);
        free(next);
    }
    output->done = true;
    pthread_cond_broadcast(&output->changed);
    pthread_mutex_unlock(&output->lock);
    return NULL;
}

mcp_output *mcp_output_start(int fd)
{
    mcp_output *output = calloc(1, sizeof *output);
    if (!output)
        return NULL;
    output->fd = fd;
    pthread_mutex_init(&output->lock, NULL);
    pthread_cond_init(&output->changed, NULL);
    if (pthread_create(&output->writer, NULL, write_lines, output) != 0) {
        pthread_mutex_destroy(&output->lock);
        pthread_cond_destroy(&output->changed);
        free(output);
        return NULL;
    }
    /* Fully started before any sandbox is cloned (see mcp_calls_start). */
    pthread_mutex_lock(&output->lock);
    while (!output->started)
        pthread_cond_wait(&output->changed, &output->lock);
    pthread_mutex_unlock(&output->lock);
    return output;
}

mcp_output *mcp_output_to(mcp_sink_fn sink, void *context)
{
    mcp_output *output = calloc(1, sizeof *output);
    if (output)
        *output = (mcp_output){.sink = sink, .sink_context = context, .fd = -1};
    return output;
}

/* Serializes outside the lock; queues unless the message may be dropped. */
static void enqueue(mcp_output *output, json_t *message, bool droppable)
{
    if (output->sink) {
        if (message)
            output->sink(output->sink_context, message, droppable);
        return;
    }
    char *text = message ? json_dumps(message, JSON_COMPACT) : NULL;
    json_decref(message);
    size_t len = text ? strlen(text) : 0;
    char *framed = text ? realloc(text, len + 2) : NULL;
    line *next = framed ? malloc(sizeof *next) : NULL;
    if (!next) {
        free(framed ? framed : text);
        fprintf(stderr, "runbox mcp: out of memory; a message was lost\n");
        return;
    }
    framed[len++] = '\n';
    framed[len] = 0;
    *next = (line){.text = framed, .len = len};
    pthread_mutex_lock(&output->lock);
    bool refused = output->stopping || (droppable && output->backlog > PROGRESS_BACKLOG_MAX);
    if (!refused) {
        if (output->tail)
            output->tail->next = next;
        else
            output->head = next;
        output->tail = next;
        output->backlog += len;
        pthread_cond_broadcast(&output->changed);
    }
    pthread_mutex_unlock(&output->lock);
    if (refused) {
        free(framed);
        free(next);
    }
}

void mcp_output_send(mcp_output *output, json_t *message)
{
    /* MCP 2026-07-28: a result says what it is ("complete", not
     * "input_required": runbox never asks the client anything back). */
    json_t *result = json_object_get(message, "result");
    if (json_is_object(result) && atomic_load(&output->typed_results) &&
        !json_object_get(result, "resultType"))
        json_object_set_new(result, "resultType", json_string("complete"));
    enqueue(output, message, false);
}

void mcp_output_type_results(mcp_output *output)
{
    atomic_store(&output->typed_results, true);
}

void mcp_output_send_progress(mcp_output *output, json_t *message)
{
    enqueue(output, message, true);
}

void mcp_output_stop(mcp_output *output, int drain_ms)
{
    if (output->sink) {
        free(output);
        return;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += drain_ms / 1000;
    deadline.tv_nsec += (long)(drain_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&output->lock);
    output->stopping = true;
    pthread_cond_broadcast(&output->changed);
    int rc = 0;
    while (!output->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&output->changed, &output->lock, &deadline);
    bool done = output->done;
    pthread_mutex_unlock(&output->lock);
    /* A client that stopped reading leaves the writer blocked in write(),
     * which is a cancellation point. */
    if (!done)
        pthread_cancel(output->writer);
    pthread_join(output->writer, NULL);
    if (output->writing) {
        free(output->writing->text);
        free(output->writing);
    }
    for (line *next; (next = output->head);) {
        output->head = next->next;
        free(next->text);
        free(next);
    }
    pthread_mutex_destroy(&output->lock);
    pthread_cond_destroy(&output->changed);
    free(output);
}
