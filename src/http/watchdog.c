/* Slow clients. MHD's connection timeout is an idle timeout: a client that
 * sends one header byte a second is never idle and could hold its thread
 * for hours (slowloris). The watchdog gives each connection limit_s to
 * bring in a whole request, headers and body (counted again after each
 * request), then shuts its socket down, which ends the connection in
 * MHD's own thread. */
#include "http/http.h"

#include <stdlib.h>

typedef struct client {
    int fd;
    _Atomic int64_t waiting_since_us; /* 0 while a request is being handled */
    struct client *prev, *next;
} client;

struct watchdog {
    pthread_mutex_t lock;
    pthread_cond_t stop;
    bool stopping;
    pthread_t thread;
    client *clients;
    int64_t limit_us;
};

static void sweep(watchdog *w)
{
    int64_t now = http_now_us();
    for (client *c = w->clients; c; c = c->next) {
        int64_t since = atomic_load(&c->waiting_since_us);
        /* MHD closes the socket only after it told us (under this lock)
         * that the connection ended, so the fd is still this client's. */
        if (since && now - since > w->limit_us) {
            shutdown(c->fd, SHUT_RDWR);
            atomic_store(&c->waiting_since_us, 0);
        }
    }
}

static void *watch(void *arg)
{
    watchdog *w = arg;
    pthread_mutex_lock(&w->lock);
    while (!w->stopping) {
        sweep(w);
        http_cond_wait_ms(&w->stop, &w->lock, 500);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

watchdog *http_watchdog_start(unsigned limit_s)
{
    watchdog *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->limit_us = (int64_t)limit_s * 1000000;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->stop, NULL);
    if (pthread_create(&w->thread, NULL, watch, w) != 0) {
        pthread_cond_destroy(&w->stop);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
    }
    return w;
}

void http_watchdog_stop(watchdog *w)
{
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_signal(&w->stop);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->stop);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

static void connection_started(watchdog *w, struct MHD_Connection *connection, void **context)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    client *c = info ? calloc(1, sizeof *c) : NULL;
    *context = c;
    if (!c)
        return;
    c->fd = info->connect_fd;
    atomic_store(&c->waiting_since_us, http_now_us());
    pthread_mutex_lock(&w->lock);
    c->next = w->clients;
    if (c->next)
        c->next->prev = c;
    w->clients = c;
    pthread_mutex_unlock(&w->lock);
}

static void connection_closed(watchdog *w, client *c)
{
    pthread_mutex_lock(&w->lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->clients = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&w->lock);
    free(c);
}

void http_watchdog_connection(watchdog *w, struct MHD_Connection *connection, void **socket_context,
                              enum MHD_ConnectionNotificationCode code)
{
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        connection_started(w, connection, socket_context);
    else if (*socket_context)
        connection_closed(w, *socket_context);
}

void http_watchdog_request(struct MHD_Connection *connection, bool started)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    client *c = info ? info->socket_context : NULL;
    if (c)
        atomic_store(&c->waiting_since_us, started ? 0 : http_now_us());
}
