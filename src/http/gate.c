/* The gate: where every connection of every listener (runbox's API, E2B's
 * protocol, and any other the server gets) waits until its request's head
 * is in, and the bounds on what clients can hold.
 *
 * Why: libmicrohttpd runs a thread per connection and its own limit is a
 * plain count, so about 450 clients that sent half a head each held every
 * connection MHD would take, and everyone else (with a token or without)
 * was turned away until they left; reconnecting kept the server down. In
 * the gate a waiting connection costs only its socket: one thread watches
 * them all (epoll), peeking at what arrived without reading it, and hands
 * a connection to its MHD daemon (MHD_add_connection) only once the whole
 * head is there and checked (head.c), so MHD never waits for a head and
 * never answers one with its HTML pages.
 *
 * The bounds, over all listeners together:
 *   - per address (an IPv6 client counts by its /64, which it usually
 *     owns whole): at most max_per_address connections, waiting or
 *     served; past it a new one is refused (429) at once;
 *   - a deadline for the head (header_timeout_s from accept), then the
 *     connection is closed;
 *   - a total cap (max_connections): a new connection past it closes the
 *     one that has waited longest in the gate, so an attacker with many
 *     addresses cannot fill it either: whoever sends a request at once is
 *     served. When every connection is a request being served (none is
 *     waiting), the new one is refused (503).
 * A connection carries one request (every response says Connection:
 * close), so no connection sits idle in MHD between requests: each head
 * passes the gate, and MHD holds only requests being read or answered,
 * which the watchdog (slow bodies), MHD's idle timeout (slow readers) and
 * the per-address cap bound. */
#include "http/http.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define LISTENERS_MAX 4
#define ADDRESS_BUCKETS 4096
/* After an error answer the client's rest is read and dropped for a while
 * (a close with unread data would reset the connection, and the client
 * could lose the answer). */
#define LINGER_US (2 * 1000000)
#define LINGER_BYTES ((size_t)1 << 20)
#define SWEEP_MS 200

/* One client address, as counted: IPv4 whole, IPv6 by its /64. */
typedef struct address_key {
    unsigned char bytes[8];
    unsigned char family;
} address_key;

typedef struct address_count {
    address_key key;
    unsigned count;
    struct address_count *next;
} address_count;

typedef enum entry_kind { ENTRY_LISTENER, ENTRY_WAITING } entry_kind;

typedef struct gate_listener {
    entry_kind kind; /* first: epoll's data names a listener or a connection */
    int fd;
    struct MHD_Daemon *daemon;
    bool paused; /* out of file descriptors: accepting resumes at the next sweep */
} gate_listener;

/* A connection in the gate. */
typedef struct waiting {
    entry_kind kind;
    int fd;
    gate_listener *listener;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    address_key key;
    int64_t deadline_us;
    size_t seen;    /* bytes of the head already looked at */
    bool lingering; /* answered with an error: the rest is read and dropped */
    size_t drained;
    struct waiting *prev, *next; /* oldest first */
} waiting;

struct gate {
    unsigned max_connections, max_per_address;
    int64_t head_timeout_us;
    int epoll_fd, wake_fd;
    pthread_t thread;
    bool started;
    atomic_bool stopping;
    gate_listener listeners[LISTENERS_MAX];
    size_t listener_count;
    waiting *oldest, *newest; /* only the gate's thread touches the list */
    /* Under lock: MHD's threads report their connections' ends. */
    pthread_mutex_t lock;
    address_count *buckets[ADDRESS_BUCKETS];
    unsigned waiting_count, served_count, address_count;
    uint64_t refused_per_address, refused_full, evicted, timed_out, invalid_head;
    char peek[HTTP_HEAD_MAX + 1];
};

static address_key key_of(const struct sockaddr *addr)
{
    address_key key = {.family = (unsigned char)addr->sa_family};
    if (addr->sa_family == AF_INET) {
        memcpy(key.bytes, &((const struct sockaddr_in *)addr)->sin_addr, 4);
    } else if (addr->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)addr)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a6)) {
            key.family = AF_INET;
            memcpy(key.bytes, &a6->s6_addr[12], 4);
        } else {
            memcpy(key.bytes, a6->s6_addr, 8);
        }
    }
    return key;
}

static unsigned bucket_of(const address_key *key)
{
    uint64_t h = 1469598103934665603ULL ^ key->family; /* FNV-1a */
    for (size_t i = 0; i < sizeof key->bytes; i++)
        h = (h ^ key->bytes[i]) * 1099511628211ULL;
    return (unsigned)(h % ADDRESS_BUCKETS);
}

/* The address's count, made when missing; NULL without memory. Under lock. */
static address_count *count_of(gate *g, const address_key *key, bool make)
{
    address_count **slot = &g->buckets[bucket_of(key)];
    for (address_count *c = *slot; c; c = c->next)
        if (!memcmp(&c->key, key, sizeof *key))
            return c;
    address_count *c = make ? calloc(1, sizeof *c) : NULL;
    if (c) {
        c->key = *key;
        c->next = *slot;
        *slot = c;
        g->address_count++;
    }
    return c;
}

/* One connection fewer for the address. Under lock. */
static void count_down(gate *g, const address_key *key)
{
    address_count **slot = &g->buckets[bucket_of(key)];
    for (address_count *c; (c = *slot); slot = &c->next)
        if (!memcmp(&c->key, key, sizeof *key)) {
            if (--c->count == 0) {
                *slot = c->next;
                free(c);
                g->address_count--;
            }
            return;
        }
}

gate *http_gate_new(const serve_options *options)
{
    gate *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->max_connections = options->max_connections;
    g->max_per_address = options->max_per_address;
    unsigned head_s = options->header_timeout_s < options->client_timeout_s
                          ? options->header_timeout_s
                          : options->client_timeout_s;
    g->head_timeout_us = (int64_t)head_s * 1000000;
    pthread_mutex_init(&g->lock, NULL);
    g->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    g->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event wake = {.events = EPOLLIN, .data.ptr = NULL};
    if (g->epoll_fd < 0 || g->wake_fd < 0 ||
        epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, g->wake_fd, &wake) != 0) {
        http_gate_free(g);
        return NULL;
    }
    return g;
}

bool http_gate_listen(gate *g, int listen_fd, struct MHD_Daemon *daemon)
{
    if (g->listener_count == LISTENERS_MAX)
        return false;
    gate_listener *l = &g->listeners[g->listener_count];
    *l = (gate_listener){.kind = ENTRY_LISTENER, .fd = listen_fd, .daemon = daemon};
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = l};
    if (epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev) != 0)
        return false;
    g->listener_count++;
    return true;
}

/* The error as a whole HTTP response, sent as far as the socket takes it
 * without waiting: the client may be gone, or never read. */
static void send_error(int fd, const http_error *err)
{
    char response[1024];
    size_t len = http_error_response(err, response, sizeof response);
    if (len)
        (void)!send(fd, response, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void unlink_waiting(gate *g, waiting *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        g->oldest = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        g->newest = w->prev;
}

/* Closes a connection in the gate. What it sent and nobody read (a part
 * of a head: at most HTTP_HEAD_MAX + 1 bytes) is read first, so that the
 * client sees the connection end (FIN), not a reset. */
static void close_waiting(gate *g, int fd)
{
    epoll_ctl(g->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
    for (int i = 0; i < 4 && recv(fd, g->peek, sizeof g->peek, MSG_DONTWAIT) > 0; i++)
        continue; /* bounded: a client that keeps sending cannot keep the gate here */
    close(fd);
}

/* The connection leaves the gate: closed here, or handed to MHD. */
static void leave(gate *g, waiting *w, bool close_it)
{
    unlink_waiting(g, w);
    if (close_it)
        close_waiting(g, w->fd);
    pthread_mutex_lock(&g->lock);
    g->waiting_count--;
    count_down(g, &w->key);
    pthread_mutex_unlock(&g->lock);
    free(w);
}

/* Answers a bad head, then reads and drops what the client still sends
 * until it closes or the linger time is over. */
static void refuse_head(gate *g, waiting *w, const http_error *err)
{
    send_error(w->fd, err);
    shutdown(w->fd, SHUT_WR);
    w->lingering = true;
    w->deadline_us = http_now_us() + LINGER_US;
    pthread_mutex_lock(&g->lock);
    g->invalid_head++;
    pthread_mutex_unlock(&g->lock);
}

static void linger(gate *g, waiting *w)
{
    char drop[16384];
    ssize_t n;
    while ((n = recv(w->fd, drop, sizeof drop, MSG_DONTWAIT)) > 0)
        if ((w->drained += (size_t)n) > LINGER_BYTES)
            break;
    if (n == 0 || w->drained > LINGER_BYTES || (n < 0 && errno != EAGAIN && errno != EINTR))
        leave(g, w, true);
}

/* Looks at what arrived (without reading it): a whole head goes to MHD, a
 * bad one is answered, a closed connection goes. */
static void look(gate *g, waiting *w, bool hung_up)
{
    if (w->lingering) {
        linger(g, w);
        return;
    }
    ssize_t n = recv(w->fd, g->peek, sizeof g->peek, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR) && !hung_up)
        return;
    if (n <= 0 || ((size_t)n == w->seen && hung_up)) {
        leave(g, w, true); /* gone before its head was in */
        return;
    }
    w->seen = (size_t)n;
    size_t head_len = 0;
    http_error err;
    switch (http_head_check(g->peek, (size_t)n, &head_len, &err)) {
    case HEAD_INCOMPLETE:
        if (hung_up)
            leave(g, w, true);
        return;
    case HEAD_INVALID:
        refuse_head(g, w, &err);
        return;
    case HEAD_COMPLETE:
        break;
    }
    epoll_ctl(g->epoll_fd, EPOLL_CTL_DEL, w->fd, NULL);
    int fd = w->fd;
    struct sockaddr_storage addr = w->addr;
    socklen_t addr_len = w->addr_len;
    struct MHD_Daemon *daemon = w->listener->daemon;
    leave(g, w, false);
    /* MHD owns the socket now, and closes it when it cannot take it. */
    MHD_add_connection(daemon, fd, (const struct sockaddr *)&addr, addr_len);
}

/* Room for one more: the connection that has waited longest goes. */
static bool evict_oldest(gate *g)
{
    waiting *w = g->oldest;
    if (!w)
        return false;
    leave(g, w, true);
    pthread_mutex_lock(&g->lock);
    g->evicted++;
    pthread_mutex_unlock(&g->lock);
    return true;
}

typedef enum { LET_IN, PER_ADDRESS, FULL } door_verdict;

/* Counts the new connection in, or says why not. */
static door_verdict let_in(gate *g, const address_key *key)
{
    pthread_mutex_lock(&g->lock);
    address_count *c = count_of(g, key, true);
    door_verdict verdict = !c                              ? FULL
                           : c->count >= g->max_per_address ? PER_ADDRESS
                           : g->waiting_count + g->served_count >= g->max_connections ? FULL
                                                                                      : LET_IN;
    if (verdict == LET_IN) {
        c->count++;
        g->waiting_count++;
    } else {
        if (c && c->count == 0) { /* made for this look only */
            c->count = 1;
            count_down(g, key);
        }
        if (verdict == PER_ADDRESS)
            g->refused_per_address++;
    }
    pthread_mutex_unlock(&g->lock);
    return verdict;
}

static void refuse_connection(gate *g, int fd, door_verdict why)
{
    http_error err;
    if (why == PER_ADDRESS) {
        http_error_set(&err, MHD_HTTP_TOO_MANY_REQUESTS, "too_many_connections",
                       "this address has %u connections open, the most one address may "
                       "(--max-connections-per-address): close some, or wait for them",
                       g->max_per_address);
    } else {
        http_error_set(&err, MHD_HTTP_SERVICE_UNAVAILABLE, "server_busy",
                       "the server has %u connections, the most it takes "
                       "(--max-connections), and all of them are requests being served: "
                       "try again shortly",
                       g->max_connections);
        pthread_mutex_lock(&g->lock);
        g->refused_full++;
        pthread_mutex_unlock(&g->lock);
    }
    send_error(fd, &err);
    close(fd);
}

static void admit(gate *g, gate_listener *l, int fd, const struct sockaddr_storage *addr,
                  socklen_t addr_len)
{
    address_key key = key_of((const struct sockaddr *)addr);
    door_verdict verdict = let_in(g, &key);
    while (verdict == FULL && evict_oldest(g))
        verdict = let_in(g, &key);
    if (verdict != LET_IN) {
        refuse_connection(g, fd, verdict);
        return;
    }
    waiting *w = calloc(1, sizeof *w);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = w};
    if (w) {
        *w = (waiting){.kind = ENTRY_WAITING, .fd = fd, .listener = l, .addr = *addr,
                       .addr_len = addr_len, .key = key,
                       .deadline_us = http_now_us() + g->head_timeout_us, .prev = g->newest};
        if (g->newest)
            g->newest->next = w;
        else
            g->oldest = w;
        g->newest = w;
    }
    if (!w || epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        if (w) {
            leave(g, w, true);
            return;
        }
        close(fd);
        pthread_mutex_lock(&g->lock);
        g->waiting_count--;
        count_down(g, &key);
        pthread_mutex_unlock(&g->lock);
        return;
    }
    look(g, w, false); /* the head is often there already */
}

static void accept_all(gate *g, gate_listener *l)
{
    for (;;) {
        struct sockaddr_storage addr;
        socklen_t addr_len = sizeof addr;
        int fd = accept4(l->fd, (struct sockaddr *)&addr, &addr_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            admit(g, l, fd, &addr, addr_len);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if ((errno == EMFILE || errno == ENFILE) && evict_oldest(g))
            continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS) {
            /* Nothing to close: stop looking at this listener until the
             * next sweep, instead of spinning on it. */
            struct epoll_event ev = {.events = 0, .data.ptr = l};
            epoll_ctl(g->epoll_fd, EPOLL_CTL_MOD, l->fd, &ev);
            l->paused = true;
        }
        return;
    }
}

/* Heads past their deadline and lingering answers past theirs are closed;
 * paused listeners accept again. */
static void sweep(gate *g)
{
    int64_t now = http_now_us();
    for (waiting *w = g->oldest, *next; w; w = next) {
        next = w->next;
        if (now < w->deadline_us)
            continue;
        if (!w->lingering) {
            pthread_mutex_lock(&g->lock);
            g->timed_out++;
            pthread_mutex_unlock(&g->lock);
        }
        leave(g, w, true);
    }
    for (size_t i = 0; i < g->listener_count; i++) {
        gate_listener *l = &g->listeners[i];
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = l};
        if (l->paused && epoll_ctl(g->epoll_fd, EPOLL_CTL_MOD, l->fd, &ev) == 0)
            l->paused = false;
    }
}

static void *run(void *arg)
{
    gate *g = arg;
    struct epoll_event events[256];
    int64_t next_sweep = http_now_us() + SWEEP_MS * 1000;
    while (!atomic_load(&g->stopping)) {
        int n = epoll_wait(g->epoll_fd, events, 256, SWEEP_MS);
        for (int i = 0; i < n; i++) {
            entry_kind *kind = events[i].data.ptr;
            if (!kind)
                continue; /* the wake-up: the loop's condition says why */
            if (*kind == ENTRY_LISTENER)
                accept_all(g, (gate_listener *)kind);
            else
                look(g, (waiting *)kind, events[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR));
        }
        if (http_now_us() >= next_sweep) {
            sweep(g);
            next_sweep = http_now_us() + SWEEP_MS * 1000;
        }
    }
    return NULL;
}

bool http_gate_start(gate *g)
{
    g->started = pthread_create(&g->thread, NULL, run, g) == 0;
    return g->started;
}

void http_gate_stop(gate *g)
{
    if (!g || !g->started)
        return;
    atomic_store(&g->stopping, true);
    uint64_t one = 1;
    (void)!write(g->wake_fd, &one, sizeof one);
    pthread_join(g->thread, NULL);
    g->started = false;
    for (size_t i = 0; i < g->listener_count; i++) {
        epoll_ctl(g->epoll_fd, EPOLL_CTL_DEL, g->listeners[i].fd, NULL);
        close(g->listeners[i].fd);
    }
    g->listener_count = 0;
    while (g->oldest)
        leave(g, g->oldest, true);
}

void http_gate_free(gate *g)
{
    if (!g)
        return;
    http_gate_stop(g);
    for (size_t b = 0; b < ADDRESS_BUCKETS; b++)
        for (address_count *c = g->buckets[b], *next; c; c = next) {
            next = c->next;
            free(c);
        }
    if (g->epoll_fd >= 0)
        close(g->epoll_fd);
    if (g->wake_fd >= 0)
        close(g->wake_fd);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

void http_gate_connection(gate *g, struct MHD_Connection *connection,
                          enum MHD_ConnectionNotificationCode code)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!info || !info->client_addr)
        return;
    address_key key = key_of(info->client_addr);
    pthread_mutex_lock(&g->lock);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        address_count *c = count_of(g, &key, true);
        if (c) {
            c->count++;
            g->served_count++;
        }
    } else if (count_of(g, &key, false)) {
        count_down(g, &key);
        g->served_count--;
    }
    pthread_mutex_unlock(&g->lock);
}

void http_gate_stats(gate *g, gate_stats *stats)
{
    pthread_mutex_lock(&g->lock);
    *stats = (gate_stats){.waiting = g->waiting_count,
                          .served = g->served_count,
                          .addresses = g->address_count,
                          .refused_per_address = g->refused_per_address,
                          .refused_full = g->refused_full,
                          .evicted = g->evicted,
                          .timed_out = g->timed_out,
                          .invalid_head = g->invalid_head};
    pthread_mutex_unlock(&g->lock);
}
