/* The MCP sessions of runbox serve. Each is an MCP server of its own (the
 * same as `runbox mcp`), named by an id of 32 random bytes that the client
 * got from its initialize and sends in Mcp-Session-Id.
 *
 * What a session holds is bounded: at most mcp_max_sessions at once, and
 * mcp_max_per_address from one client address. Past a limit the session in
 * that scope that has been idle longest (no request, stream or call of it
 * open) is ended to make room, as the gate does with waiting connections:
 * an abandoned session costs nothing but its place, and a client that
 * comes back to an ended one gets 404 and initializes again (the spec's
 * way). Only when every session in scope is busy is a new one refused. A
 * session unused for mcp_idle_s ends (the reaper). An idle session holds
 * its tool descriptions and no thread (workers start with calls). */
#include "http/mcp_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

struct mcp_sessions {
    http_server *server;
    mcp_sink_fn sink;                          /* each session's output */
    void (*end_streams)(mcp_session *session); /* when one ends */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    mcp_session *list;
    unsigned count;
    /* 2026-07-28's one-request sessions: counted nowhere, but ended with
     * the server like the others (linked by next too). */
    mcp_session *singles;
    size_t single_count;
    bool stopping;
    pthread_t reaper;
    bool reaper_started;
    uint64_t opened, expired, evicted, refused, deleted;
};

static void log_session(const mcp_session *session, const char *event, const char *reason)
{
    json_t *line = http_log_event(event);
    /* Only the id's head: the log is no place for a bearer of a session. */
    json_object_set_new(line, "mcp_session", json_stringn(session->id, 8));
    json_object_set_new(line, "client", json_string(session->address));
    if (reason)
        json_object_set_new(line, "reason", json_string(reason));
    http_log_emit(line);
}

void mcp_client_address(struct MHD_Connection *connection, char *out, size_t size)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(out, size, "unknown");
    if (!info || !info->client_addr)
        return;
    const struct sockaddr *addr = info->client_addr;
    if (addr->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)addr)->sin_addr, out, (socklen_t)size);
    } else if (addr->sa_family == AF_INET6) {
        /* One client may hold a whole /64: it counts as one address. */
        struct in6_addr prefix = ((const struct sockaddr_in6 *)addr)->sin6_addr;
        if (!IN6_IS_ADDR_V4MAPPED(&prefix))
            memset(prefix.s6_addr + 8, 0, 8);
        inet_ntop(AF_INET6, &prefix, out, (socklen_t)size);
    }
}

/* The last reference is gone: the MCP server stops (its calls cancelled)
 * and everything goes. A call that does not stop keeps the session
 * allocated, since its worker still routes through it. */
static void session_free(mcp_session *session)
{
    if (session->stateless) {
        mcp_sessions *table = session->table;
        pthread_mutex_lock(&table->lock);
        for (mcp_session **at = &table->singles; *at; at = &(*at)->next)
            if (*at == session) {
                *at = session->next;
                table->single_count--;
                break;
            }
        pthread_mutex_unlock(&table->lock);
    }
    if (session->server && !mcp_server_close(session->server)) {
        log_session(session, "mcp_session_stuck", "a tool call did not stop; its memory is kept");
        return;
    }
    if (session->output)
        mcp_output_stop(session->output, 0);
    pthread_mutex_destroy(&session->take_lock);
    pthread_mutex_destroy(&session->lock);
    free(session);
}

void mcp_session_take(mcp_session *session, json_t *message)
{
    pthread_mutex_lock(&session->take_lock);
    mcp_server_take(session->server, message);
    pthread_mutex_unlock(&session->take_lock);
}

void mcp_session_hold(mcp_session *session)
{
    pthread_mutex_lock(&session->table->lock);
    session->refs++;
    pthread_mutex_unlock(&session->table->lock);
}

void mcp_session_release(mcp_session *session)
{
    mcp_sessions *table = session->table;
    pthread_mutex_lock(&table->lock);
    session->last_used_us = http_now_us();
    bool last = --session->refs == 0;
    pthread_cond_broadcast(&table->changed);
    pthread_mutex_unlock(&table->lock);
    if (last)
        session_free(session);
}

/* Takes the session out of the list; the caller holds the lock. */
static bool unlink_session(mcp_sessions *table, mcp_session *session)
{
    for (mcp_session **at = &table->list; *at; at = &(*at)->next)
        if (*at == session) {
            *at = session->next;
            session->next = NULL;
            table->count--;
            return true;
        }
    return false;
}

/* After unlinking: its streams end, then the table's reference goes. */
static void finish_ended(mcp_session *session, const char *reason)
{
    log_session(session, "mcp_session_ended", reason);
    session->table->end_streams(session);
    mcp_session_release(session);
}

void mcp_session_end(mcp_session *session, const char *reason)
{
    mcp_sessions *table = session->table;
    pthread_mutex_lock(&table->lock);
    bool listed = unlink_session(table, session);
    if (listed && !strcmp(reason, "deleted"))
        table->deleted++;
    pthread_mutex_unlock(&table->lock);
    if (listed)
        finish_ended(session, reason);
}

/* Compares ids in a time that does not tell how much of a guess was right. */
static bool same_id(const char *a, const char *b)
{
    unsigned char diff = 0;
    for (size_t i = 0; i < MCP_SESSION_ID_LEN; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

mcp_session *mcp_session_find(mcp_sessions *table, const char *id)
{
    if (strlen(id) != MCP_SESSION_ID_LEN)
        return NULL;
    pthread_mutex_lock(&table->lock);
    mcp_session *found = NULL;
    for (mcp_session *session = table->list; session; session = session->next)
        if (same_id(session->id, id))
            found = session;
    if (found)
        found->refs++;
    pthread_mutex_unlock(&table->lock);
    return found;
}

/* The session idle longest among those of address (NULL: all); the caller
 * holds the lock. Idle: only the table holds it. */
static mcp_session *idlest(mcp_sessions *table, const char *address)
{
    mcp_session *found = NULL;
    for (mcp_session *session = table->list; session; session = session->next)
        if (session->refs == 1 && (!address || !strcmp(session->address, address)) &&
            (!found || session->last_used_us < found->last_used_us))
            found = session;
    return found;
}

static unsigned count_of(mcp_sessions *table, const char *address)
{
    unsigned n = 0;
    for (mcp_session *session = table->list; session; session = session->next)
        n += !strcmp(session->address, address);
    return n;
}

/* Makes room for one more session of address; the caller holds the lock.
 * Evicted sessions are handed back, to be ended outside it. */
static bool make_room(mcp_sessions *table, const char *address, mcp_session **evicted,
                      http_error *err)
{
    const serve_options *o = &table->server->options;
    *evicted = NULL;
    mcp_session *victim = NULL;
    if (count_of(table, address) >= o->mcp_max_per_address) {
        if (!(victim = idlest(table, address))) {
            http_error_set(err, MHD_HTTP_TOO_MANY_REQUESTS, "too_many_sessions",
                           "this client has %u MCP sessions, all of them busy (at most %u per "
                           "address): end one with DELETE /mcp, or retry later",
                           o->mcp_max_per_address, o->mcp_max_per_address);
            return false;
        }
    } else if (table->count >= o->mcp_max_sessions && !(victim = idlest(table, NULL))) {
        http_error_set(err, MHD_HTTP_SERVICE_UNAVAILABLE, "too_many_sessions",
                       "the server has %u MCP sessions, all of them busy; retry later",
                       o->mcp_max_sessions);
        return false;
    }
    if (victim) {
        unlink_session(table, victim);
        table->evicted++;
        *evicted = victim;
    }
    return true;
}

static bool random_id(char *out)
{
    unsigned char bytes[MCP_SESSION_ID_LEN / 2];
    size_t got = 0;
    while (got < sizeof bytes) {
        ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
        if (n <= 0)
            return false;
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof bytes; i++)
        snprintf(out + 2 * i, 3, "%02x", bytes[i]);
    return true;
}

/* A tool call that runs code takes a turn of the server's admission, as
 * POST /v1/execute does: --max-running at once, --max-queue waiting, then
 * refused. */
static bool call_wanted(void *arg)
{
    mcp_call *call = arg;
    return !atomic_load(&call->cancelled);
}

static bool take_turn(void *context, mcp_call *call)
{
    admission *a = context;
    admission_ticket ticket = {0};
    switch (http_admission_enter(a, &ticket)) {
    case ADMIT_RUN:
        return true;
    case ADMIT_QUEUED:
        return http_admission_wait_while(a, &ticket, call_wanted, call);
    case ADMIT_FULL:
        break;
    }
    return false;
}

static void give_back_turn(void *context)
{
    http_admission_leave(context);
}

static mcp_session *session_new(mcp_sessions *table, const char *address)
{
    mcp_session *session = calloc(1, sizeof *session);
    if (!session)
        return NULL;
    session->table = table;
    snprintf(session->address, sizeof session->address, "%s", address);
    pthread_mutex_init(&session->lock, NULL);
    pthread_mutex_init(&session->take_lock, NULL);
    if (!random_id(session->id) ||
        !(session->output = mcp_output_to(table->sink, session)) ||
        !(session->server = mcp_server_open(table->server->engine, session->output))) {
        session_free(session);
        return NULL;
    }
    mcp_turns turns = {take_turn, give_back_turn, &table->server->admission};
    mcp_calls_share(session->server->calls, &turns);
    return session;
}

mcp_session *mcp_session_open(mcp_sessions *table, const char *address, http_error *err)
{
    mcp_session *session = session_new(table, address);
    if (!session) {
        http_error_set(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "system_error",
                       "out of memory for another MCP session");
        return NULL;
    }
    mcp_session *evicted;
    pthread_mutex_lock(&table->lock);
    bool room = !table->stopping && make_room(table, address, &evicted, err);
    if (room) {
        /* The table's reference, and the caller's. */
        session->refs = 2;
        session->last_used_us = http_now_us();
        session->next = table->list;
        table->list = session;
        table->count++;
        table->opened++;
    } else {
        table->refused++;
        if (table->stopping)
            http_error_set(err, MHD_HTTP_SERVICE_UNAVAILABLE, "shutting_down",
                           "runbox is shutting down");
    }
    pthread_mutex_unlock(&table->lock);
    if (room && evicted)
        finish_ended(evicted, "evicted");
    if (!room) {
        session_free(session);
        return NULL;
    }
    log_session(session, "mcp_session_opened", NULL);
    return session;
}

mcp_session *mcp_session_single(mcp_sessions *table, const char *address, http_error *err)
{
    mcp_session *session = session_new(table, address);
    bool stopping = false;
    if (session) {
        session->stateless = true;
        session->refs = 1; /* the caller's: no table holds it */
        mcp_server_go_stateless(session->server);
        pthread_mutex_lock(&table->lock);
        stopping = table->stopping;
        if (!stopping) {
            session->next = table->singles;
            table->singles = session;
            table->single_count++;
        }
        pthread_mutex_unlock(&table->lock);
        if (stopping) {
            session->stateless = false; /* never linked */
            session_free(session);
            session = NULL;
        }
    }
    if (!session) {
        if (stopping)
            http_error_set(err, MHD_HTTP_SERVICE_UNAVAILABLE, "shutting_down",
                           "runbox is shutting down");
        else
            http_error_set(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "system_error",
                           "out of memory for an MCP request");
        return NULL;
    }
    return session;
}

/* Ends the sessions unused for mcp_idle_s, once a second. */
static void *reap(void *arg)
{
    mcp_sessions *table = arg;
    int64_t idle_us = (int64_t)table->server->options.mcp_idle_s * 1000000;
    pthread_mutex_lock(&table->lock);
    while (!table->stopping) {
        http_cond_wait_ms(&table->changed, &table->lock, 1000);
        int64_t now = http_now_us();
        mcp_session *expired = NULL;
        for (mcp_session **at = &table->list; *at;) {
            mcp_session *session = *at;
            if (session->refs == 1 && now - session->last_used_us >= idle_us) {
                *at = session->next;
                table->count--;
                table->expired++;
                session->next = expired;
                expired = session;
            } else {
                at = &session->next;
            }
        }
        pthread_mutex_unlock(&table->lock);
        for (mcp_session *next; expired; expired = next) {
            next = expired->next;
            expired->next = NULL;
            finish_ended(expired, "expired");
        }
        pthread_mutex_lock(&table->lock);
    }
    pthread_mutex_unlock(&table->lock);
    return NULL;
}

mcp_sessions *mcp_sessions_new(http_server *server, mcp_sink_fn sink,
                              void (*end_streams)(mcp_session *session))
{
    mcp_sessions *table = calloc(1, sizeof *table);
    if (!table)
        return NULL;
    table->server = server;
    table->sink = sink;
    table->end_streams = end_streams;
    pthread_mutex_init(&table->lock, NULL);
    pthread_cond_init(&table->changed, NULL);
    if (pthread_create(&table->reaper, NULL, reap, table) != 0) {
        http_mcp_sessions_free(table);
        return NULL;
    }
    table->reaper_started = true;
    return table;
}

void http_mcp_sessions_end_all(mcp_sessions *table)
{
    pthread_mutex_lock(&table->lock);
    table->stopping = true;
    mcp_session *all = table->list;
    table->list = NULL;
    table->count = 0;
    /* The one-request sessions' streams end too (their calls are
     * cancelled as each is freed): held meanwhile, since an answer may
     * free one at any moment. */
    size_t singles = 0;
    mcp_session **held = calloc(table->single_count + 1, sizeof *held);
    for (mcp_session *s = table->singles; held && s; s = s->next) {
        s->refs++;
        held[singles++] = s;
    }
    pthread_cond_broadcast(&table->changed);
    pthread_mutex_unlock(&table->lock);
    for (mcp_session *next; all; all = next) {
        next = all->next;
        all->next = NULL;
        finish_ended(all, "shutdown");
    }
    for (size_t i = 0; i < singles; i++) {
        table->end_streams(held[i]);
        mcp_session_release(held[i]);
    }
    free(held);
}

void http_mcp_sessions_free(mcp_sessions *table)
{
    if (!table)
        return;
    http_mcp_sessions_end_all(table);
    if (table->reaper_started)
        pthread_join(table->reaper, NULL);
    pthread_cond_destroy(&table->changed);
    pthread_mutex_destroy(&table->lock);
    free(table);
}

void http_mcp_sessions_stats(mcp_sessions *table, mcp_sessions_stats *stats)
{
    pthread_mutex_lock(&table->lock);
    *stats = (mcp_sessions_stats){.open = table->count,
                                  .opened = table->opened,
                                  .expired = table->expired,
                                  .evicted = table->evicted,
                                  .refused = table->refused,
                                  .deleted = table->deleted};
    pthread_mutex_unlock(&table->lock);
}
