/* MCP's Streamable HTTP transport at /mcp (revisions 2025-03-26 to
 * 2025-11-25, and the stateless 2026-07-28): the same MCP server as
 * `runbox mcp` (src/mcp), one per MCP session (per request for
 * 2026-07-28), behind HTTP instead of stdio.
 *
 * mcp_sessions.c keeps the sessions: their unguessable ids, the limits per
 * client address and in all, and the idle ones' expiry. mcp_exchange.c is
 * the session's output: each message the MCP server sends is routed to the
 * HTTP response it belongs to (a response, and the progress of its call, to
 * the POST that asked; other notifications to the GET stream). mcp_route.c
 * reads the requests: headers, session, JSON-RPC, and the reply's form. */
#ifndef RBX_HTTP_MCP_H
#define RBX_HTTP_MCP_H

#include "http/http.h"
#include "mcp/mcp.h"

/* 32 random bytes, in hex. */
#define MCP_SESSION_ID_LEN 64

typedef struct mcp_exchange mcp_exchange;

typedef struct mcp_session {
    char id[MCP_SESSION_ID_LEN + 1];
    char address[64]; /* the client's, an IPv6 one by its /64 */
    struct mcp_sessions *table;
    /* MCP 2026-07-28: one request's own, unlisted, gone with its answer. */
    bool stateless;
    mcp_server *server; /* the MCP core, as on stdio */
    mcp_output *output; /* its sink: mcp_exchange.c */
    /* One message at a time into the MCP server, as its reader on stdio
     * takes them: its checks (is this call's id in use?) hold until the
     * message is queued. */
    pthread_mutex_t take_lock;
    pthread_mutex_t lock;    /* the exchanges and the listener */
    mcp_exchange *exchanges; /* POSTs waiting for their response */
    mcp_exchange *listener;  /* the GET stream, when open */
    /* The table's lock guards these. */
    unsigned refs;        /* the table's own while listed, and each exchange's */
    int64_t last_used_us; /* when the last exchange ended */
    struct mcp_session *next;
} mcp_session;

/* mcp_sessions.c (which knows nothing of exchanges: sink is each
 * session's output, end_streams ends a session's streams when it ends) */
mcp_sessions *mcp_sessions_new(http_server *server, mcp_sink_fn sink,
                              void (*end_streams)(mcp_session *session));
/* A new session for address, listed; NULL and err when there is no room
 * (past a limit, the session idle longest in its scope is ended first). */
mcp_session *mcp_session_open(mcp_sessions *table, const char *address, http_error *err);
/* The session with this id, with a reference; NULL when there is none. */
mcp_session *mcp_session_find(mcp_sessions *table, const char *id);
/* A session for one request of MCP 2026-07-28, which has no sessions: not
 * listed nor counted (the request's tool call takes its admission turn like
 * any other), freed when its one exchange ends; NULL and err when the
 * server is stopping or out of memory. */
mcp_session *mcp_session_single(mcp_sessions *table, const char *address, http_error *err);
/* One more reference, for a holder of one. */
void mcp_session_hold(mcp_session *session);
void mcp_session_release(mcp_session *session);
/* Ends the session (DELETE, or a failed initialize): out of the table, its
 * streams end, its calls are cancelled once the last reference goes. */
void mcp_session_end(mcp_session *session, const char *reason);
/* Hands one message to the session's MCP server (mcp_server_take). */
void mcp_session_take(mcp_session *session, json_t *message);
/* The client's address as the limits count it. */
void mcp_client_address(struct MHD_Connection *connection, char *out, size_t size);

/* mcp_exchange.c */
/* The sink of a session's MCP server (mcp_output_to). */
void mcp_exchange_route(void *session, json_t *message, bool droppable);
/* Opens the exchange of a request (id), or the GET stream (id NULL); it
 * takes the caller's reference to session. NULL with err when the id is
 * already waiting for its answer, or there is a GET stream already. */
mcp_exchange *mcp_exchange_open(http_request *req, mcp_session *session, json_t *id,
                                json_t *progress_token, bool sse, http_error *err);
/* The exchange's response: what the MCP server sent and sends, until the
 * answer (or, for the GET stream, until the client leaves or the session
 * ends). header_value, when not NULL, is sent as Mcp-Session-Id. */
enum MHD_Result mcp_exchange_reply(http_request *req, mcp_exchange *exchange,
                                   const char *session_header);
/* The HTTP status of a JSON-RPC error code under MCP 2026-07-28 (400 for
 * what the request got wrong, 404 for an unknown method, else 200). */
unsigned mcp_http_status_of(int code);
/* The session ends: every stream of it ends, no more is routed to them. */
void mcp_exchange_end_all(mcp_session *session);

#endif
