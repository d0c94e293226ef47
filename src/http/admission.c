/* Admission: at most max_running executions at once, and a first-come
 * first-served queue of at most max_queue behind them. Deciding never
 * blocks (a full queue is answered with 429 at once); only the execution's
 * own worker thread waits for its turn. */
#include "http/http.h"

void http_admission_init(admission *a, unsigned max_running, unsigned max_queue)
{
    *a = (admission){.max_running = max_running, .max_queue = max_queue};
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->changed, NULL);
}

void http_admission_destroy(admission *a)
{
    pthread_cond_destroy(&a->changed);
    pthread_mutex_destroy(&a->lock);
}

admission_verdict http_admission_enter(admission *a, admission_ticket *ticket)
{
    admission_verdict verdict = ADMIT_FULL;
    *ticket = (admission_ticket){0};
    pthread_mutex_lock(&a->lock);
    if (a->running < a->max_running) {
        a->running++;
        ticket->admitted = true;
        verdict = ADMIT_RUN;
    } else if (a->queued < a->max_queue) {
        a->queued++;
        if (a->tail)
            a->tail->next = ticket;
        else
            a->head = ticket;
        a->tail = ticket;
        verdict = ADMIT_QUEUED;
    }
    pthread_mutex_unlock(&a->lock);
    return verdict;
}

static void unlink_ticket(admission *a, admission_ticket *ticket)
{
    admission_ticket *prev = NULL;
    for (admission_ticket *t = a->head; t; prev = t, t = t->next) {
        if (t != ticket)
            continue;
        if (prev)
            prev->next = t->next;
        else
            a->head = t->next;
        if (a->tail == t)
            a->tail = prev;
        a->queued--;
        return;
    }
}

bool http_admission_wait(admission *a, admission_ticket *ticket, const atomic_int *cancelled)
{
    pthread_mutex_lock(&a->lock);
    while (!ticket->admitted && !atomic_load(cancelled) && !a->closed)
        pthread_cond_wait(&a->changed, &a->lock);
    bool admitted = ticket->admitted;
    if (!admitted)
        unlink_ticket(a, ticket);
    pthread_mutex_unlock(&a->lock);
    return admitted;
}

bool http_admission_wait_while(admission *a, admission_ticket *ticket, bool (*wanted)(void *),
                               void *arg)
{
    pthread_mutex_lock(&a->lock);
    /* wanted() is looked at every 100 ms: its caller has no wake-up to give. */
    while (!ticket->admitted && !a->closed && wanted(arg))
        http_cond_wait_ms(&a->changed, &a->lock, 100);
    bool admitted = ticket->admitted;
    if (!admitted)
        unlink_ticket(a, ticket);
    pthread_mutex_unlock(&a->lock);
    return admitted;
}

void http_admission_wake(admission *a)
{
    pthread_mutex_lock(&a->lock);
    pthread_cond_broadcast(&a->changed);
    pthread_mutex_unlock(&a->lock);
}

void http_admission_close(admission *a)
{
    pthread_mutex_lock(&a->lock);
    a->closed = true;
    pthread_cond_broadcast(&a->changed);
    pthread_mutex_unlock(&a->lock);
}

void http_admission_leave(admission *a)
{
    pthread_mutex_lock(&a->lock);
    admission_ticket *next = a->closed ? NULL : a->head;
    if (next) {
        /* The slot passes straight to the first in line: running stays. */
        a->head = next->next;
        if (!a->head)
            a->tail = NULL;
        a->queued--;
        next->admitted = true;
        pthread_cond_broadcast(&a->changed);
    } else {
        a->running--;
    }
    pthread_mutex_unlock(&a->lock);
}

void http_admission_counts(admission *a, unsigned *running, unsigned *queued)
{
    pthread_mutex_lock(&a->lock);
    *running = a->running;
    *queued = a->queued;
    pthread_mutex_unlock(&a->lock);
}
