/* Worker threads kept for the next job (rbx_workers in runbox.h). */
#include "runbox.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

typedef struct job {
    void (*run)(void *arg);
    void *arg;
    struct job *next;
} job;

struct rbx_workers {
    pthread_mutex_t lock;
    pthread_cond_t work;    /* a job was queued for the waiting, or stopping */
    pthread_cond_t stopped; /* a thread ended */
    unsigned max_idle;
    int idle_ms;
    unsigned threads; /* alive, running a job or waiting */
    unsigned idle;    /* waiting for a job */
    /* Jobs handed to waiting threads and not yet taken: never more than
     * idle, so no job waits for a thread that is busy with another. */
    job *queue, *queue_tail;
    unsigned queued;
    bool stopping;
};

rbx_workers *rbx_workers_new(unsigned max_idle, int idle_ms)
{
    rbx_workers *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&w->work, &attr);
    pthread_condattr_destroy(&attr);
    pthread_cond_init(&w->stopped, NULL);
    w->max_idle = max_idle;
    w->idle_ms = idle_ms;
    return w;
}

/* With the lock held: the next queued job, or NULL after idle_ms without
 * one (or when stopping, or when enough others wait). */
static job *next_job(rbx_workers *w)
{
    if (w->stopping || w->idle >= w->max_idle)
        return NULL;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += w->idle_ms / 1000;
    until.tv_nsec += (long)(w->idle_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    w->idle++;
    int rc = 0;
    while (!w->queue && !w->stopping && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&w->work, &w->lock, &until);
    w->idle--;
    /* A job queued for the waiting is taken even at the timeout: it was
     * counted on a waiting thread, this one or another that took it. */
    job *j = w->queue;
    if (j) {
        w->queue = j->next;
        if (!w->queue)
            w->queue_tail = NULL;
        w->queued--;
    }
    return j;
}

/* What a thread starts with: its workers and its first job. */
typedef struct start {
    rbx_workers *w;
    job first;
} start;

static void *work(void *arg)
{
    start *s = arg;
    rbx_workers *w = s->w;
    job current = s->first;
    free(s);
    for (;;) {
        current.run(current.arg);
        pthread_mutex_lock(&w->lock);
        job *next = next_job(w);
        if (!next) {
            w->threads--;
            pthread_cond_broadcast(&w->stopped);
            pthread_mutex_unlock(&w->lock); /* nothing of w is touched after */
            return NULL;
        }
        pthread_mutex_unlock(&w->lock);
        current = *next;
        free(next);
    }
}

int rbx_workers_run(rbx_workers *w, void (*run)(void *arg), void *arg)
{
    pthread_mutex_lock(&w->lock);
    if (!w->stopping && w->idle > w->queued) {
        job *j = malloc(sizeof *j);
        if (j) {
            *j = (job){.run = run, .arg = arg};
            if (w->queue_tail)
                w->queue_tail->next = j;
            else
                w->queue = j;
            w->queue_tail = j;
            w->queued++;
            pthread_cond_signal(&w->work);
            pthread_mutex_unlock(&w->lock);
            return 0;
        }
    }
    w->threads++;
    pthread_mutex_unlock(&w->lock);
    start *s = malloc(sizeof *s);
    int rc = ENOMEM;
    if (s) {
        *s = (start){.w = w, .first = {.run = run, .arg = arg}};
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_t thread;
        rc = pthread_create(&thread, &attr, work, s);
        pthread_attr_destroy(&attr);
        if (rc != 0)
            free(s);
    }
    if (rc != 0) {
        pthread_mutex_lock(&w->lock);
        w->threads--;
        pthread_cond_broadcast(&w->stopped);
        pthread_mutex_unlock(&w->lock);
    }
    return rc;
}

void rbx_workers_free(rbx_workers *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_broadcast(&w->work);
    while (w->threads > 0)
        pthread_cond_wait(&w->stopped, &w->lock);
    pthread_mutex_unlock(&w->lock);
    pthread_cond_destroy(&w->work);
    pthread_cond_destroy(&w->stopped);
    pthread_mutex_destroy(&w->lock);
    free(w);
}
