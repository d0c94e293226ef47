/* The reader: one thread reads stdin, cuts it into lines (a line longer
 * than MCP_MAX_LINE is refused and skipped without being held), parses each
 * with jansson, and answers it or hands it on. Tool calls run on workers
 * (calls.c), so this loop is never busy for long: ping and cancel are
 * answered while code runs. */
#include "mcp/mcp.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_CHUNK ((size_t)64 << 10)
/* How long the last messages may take to reach a client that stopped sending. */
#define DRAIN_MS 2000

typedef struct line_reader {
    int fd;
    char *buf;
    size_t len, cap;
    bool skipping; /* inside a line longer than MCP_MAX_LINE */
} line_reader;

static void answer_tools_list(mcp_server *server, const rpc_message *request)
{
    /* One page: no cursor was ever handed out, so any cursor is unknown. */
    if (json_object_get(request->params, "cursor")) {
        rpc_fail(server->output, request->id, RPC_INVALID_PARAMS,
                 "Invalid params: unknown cursor (tools/list has a single page)");
        return;
    }
    /* The tools never change while the server runs. */
    mcp_reply_cacheable(server, request->id, json_pack("{s:O}", "tools", server->tools), 60000);
}

static void answer_tools_call(mcp_server *server, const rpc_message *request)
{
    /* SEP-1303 (2025-11-25): bad arguments are a tool error a model can
     * read and correct; earlier revisions list them as -32602. */
    bool arguments_as_results = strcmp(server->version, MCP_LATEST_VERSION) >= 0;
    mcp_calls_accept(server->calls, request->id, request->params, arguments_as_results);
}

/* Which revisions have a method: 2026-07-28 dropped the handshake, ping,
 * logging/setLevel and resources/subscribe (a subscriptions/listen stream
 * replaces them) and added server/discover. */
enum { HANDSHAKE = 1, STATELESS = 2, BOTH = HANDSHAKE | STATELESS };

static const struct method {
    const char *name;
    bool before_initialize;
    unsigned revisions;
    void (*answer)(mcp_server *server, const rpc_message *request);
} methods[] = {
    {"initialize", true, HANDSHAKE, mcp_answer_initialize},
    {"ping", true, HANDSHAKE, mcp_answer_ping},
    {"server/discover", true, STATELESS, mcp_answer_discover},
    {"tools/list", false, BOTH, answer_tools_list},
    {"tools/call", false, BOTH, answer_tools_call},
    /* Resources, logging and completion (resources.c, logging.c, completion.c). */
    {"resources/list", false, BOTH, mcp_answer_resources_list},
    {"resources/templates/list", false, BOTH, mcp_answer_resource_templates},
    {"resources/read", false, BOTH, mcp_answer_resources_read},
    {"resources/subscribe", false, HANDSHAKE, mcp_answer_resources_subscribe},
    {"resources/unsubscribe", false, HANDSHAKE, mcp_answer_resources_unsubscribe},
    {"subscriptions/listen", false, BOTH, mcp_answer_subscriptions_listen},
    {"logging/setLevel", false, HANDSHAKE, mcp_answer_logging_set_level},
    {"completion/complete", false, BOTH, mcp_answer_completion},
};

static bool stateless(const mcp_server *server)
{
    return server->version && !strcmp(server->version, MCP_STATELESS_VERSION);
}

void mcp_server_go_stateless(mcp_server *server)
{
    server->version = MCP_STATELESS_VERSION;
    mcp_client_set_version(server->client, server->version);
    mcp_output_type_results(server->output);
}

/* A 2026-07-28 request's envelope (envelope.c; its headers were checked
 * by the transport); false when it was refused. */
static bool envelope_ok(mcp_server *server, const rpc_message *request)
{
    char why[300];
    json_t *data;
    int code = mcp_envelope_check(request->method, request->params, NULL, &data, why, sizeof why);
    if (!code)
        return true;
    json_t *response = rpc_error(request->id, code, "%s", why);
    if (data)
        json_object_set_new(json_object_get(response, "error"), "data", data);
    mcp_output_send(server->output, response);
    return false;
}

static void answer_request(mcp_server *server, const rpc_message *request)
{
    if (stateless(server) && !envelope_ok(server, request))
        return;
    unsigned revision = stateless(server) ? STATELESS : HANDSHAKE;
    const struct method *method = NULL;
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (!strcmp(methods[i].name, request->method) && (methods[i].revisions & revision))
            method = &methods[i];
    /* Unknown first: a client probing a newer method (server/discover)
     * before initialize falls back on -32601. */
    if (!method)
        rpc_fail(server->output, request->id, RPC_METHOD_NOT_FOUND, "Method not found: %.64s",
                 request->method);
    else if (request->params && !json_is_object(request->params))
        rpc_fail(server->output, request->id, RPC_INVALID_PARAMS,
                 "Invalid params: \"params\" must be an object");
    else if (!server->version && !method->before_initialize)
        rpc_fail(server->output, request->id, RPC_INVALID_REQUEST,
                 "Invalid Request: not initialized; send initialize first");
    else
        method->answer(server, request);
}

static void take_notification(mcp_server *server, const rpc_message *notification)
{
    /* notifications/initialized needs nothing: requests are served once
     * initialize was answered. Unknown notifications are ignored. */
    if (!strcmp(notification->method, "notifications/cancelled")) {
        json_t *id = json_object_get(notification->params, "requestId");
        if (id)
            mcp_calls_cancel(server->calls, id);
        if (id) /* or it ends a subscriptions/listen stream */
            mcp_client_cancel(mcp_client_of(server->output), id);
    }
}

static bool blank(const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!strchr(" \t\r", text[i]))
            return false;
    return true;
}

void mcp_server_take(mcp_server *server, json_t *json)
{
    rpc_message message;
    char why[300];
    switch (rpc_read(json, &message, why, sizeof why)) {
    case RPC_INVALID:
        rpc_fail(server->output, message.id, RPC_INVALID_REQUEST, "Invalid Request: %s", why);
        break;
    case RPC_REQUEST:
        answer_request(server, &message);
        break;
    case RPC_NOTIFICATION:
        take_notification(server, &message);
        break;
    case RPC_RESPONSE:
        break; /* runbox sends no requests, so it awaits no responses */
    }
}

static void take_line(mcp_server *server, const char *text, size_t len)
{
    if (blank(text, len))
        return;
    json_error_t error;
    /* NUL in a string parses, so the check of arguments can name it. */
    json_t *json = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &error);
    if (!json) {
        rpc_fail(server->output, NULL, RPC_PARSE_ERROR, "Parse error: %s (at byte %d)", error.text,
                 error.position);
        return;
    }
    mcp_server_take(server, json);
    json_decref(json);
}

/* Takes every complete line from the buffer; keeps the unfinished one
 * unless it is already too long. */
static void take_lines(mcp_server *server, line_reader *reader, size_t scanned)
{
    size_t start = 0;
    char *newline;
    while ((newline = memchr(reader->buf + scanned, '\n', reader->len - scanned))) {
        size_t end = (size_t)(newline - reader->buf);
        if (reader->skipping)
            rpc_fail(server->output, NULL, RPC_INVALID_REQUEST,
                     "Invalid Request: a message longer than %zu bytes was skipped", MCP_MAX_LINE);
        else
            take_line(server, reader->buf + start, end - start);
        reader->skipping = false;
        start = scanned = end + 1;
    }
    reader->len -= start;
    memmove(reader->buf, reader->buf + start, reader->len);
    if (reader->len > MCP_MAX_LINE)
        reader->skipping = true;
    if (reader->skipping)
        reader->len = 0; /* the long line's bytes are not kept */
}

static bool make_room(line_reader *reader)
{
    if (reader->cap - reader->len >= READ_CHUNK)
        return true;
    size_t cap = reader->cap ? reader->cap * 2 : READ_CHUNK;
    if (cap < reader->len + READ_CHUNK)
        cap = reader->len + READ_CHUNK;
    char *grown = realloc(reader->buf, cap);
    if (!grown)
        return false;
    reader->buf = grown;
    reader->cap = cap;
    return true;
}

/* Reads what stdin has; false once it ended, failed, or stop_fd fired. */
static bool read_input(mcp_server *server, line_reader *reader, int stop_fd)
{
    struct pollfd fds[2] = {{.fd = reader->fd, .events = POLLIN},
                            {.fd = stop_fd, .events = POLLIN}};
    if (poll(fds, 2, -1) < 0)
        return errno == EINTR;
    if (fds[1].revents)
        return false;
    if (!fds[0].revents)
        return true;
    if (!make_room(reader)) {
        fprintf(stderr, "runbox mcp: out of memory reading a message; skipping it\n");
        reader->skipping = true;
        reader->len = 0;
        return make_room(reader);
    }
    ssize_t n = read(reader->fd, reader->buf + reader->len, READ_CHUNK);
    if (n < 0)
        return errno == EINTR || errno == EAGAIN;
    if (n == 0) {
        /* A last message may lack its newline. */
        if (reader->len && !reader->skipping)
            take_line(server, reader->buf, reader->len);
        return false;
    }
    size_t scanned = reader->len;
    reader->len += (size_t)n;
    take_lines(server, reader, scanned);
    return true;
}

mcp_server *mcp_server_open(rbx_engine *engine, mcp_output *output)
{
    mcp_server *server = calloc(1, sizeof *server);
    if (!server)
        return NULL;
    *server = (mcp_server){.engine = engine, .output = output};
    server->tools = mcp_tools_describe(rbx_engine_config(engine));
    /* The client's state (subscriptions, log level: client.c), which the
     * workers' notifications read, lives from before them to after. */
    server->client = server->tools ? mcp_client_start(output) : NULL;
    server->calls = server->client ? mcp_calls_start(engine, output, server->tools) : NULL;
    if (!server->calls) {
        mcp_client_stop(server->client);
        json_decref(server->tools);
        free(server);
        return NULL;
    }
    return server;
}

bool mcp_server_close(mcp_server *server)
{
    /* Running calls are cancelled (their responses suppressed). */
    if (!mcp_calls_stop(server->calls))
        return false;
    mcp_client_stop(server->client); /* after the workers, which notify it */
    json_decref(server->tools);
    free(server);
    return true;
}

int mcp_serve(rbx_engine *engine, int in_fd, int out_fd, int stop_fd)
{
    mcp_output *output = mcp_output_start(out_fd);
    mcp_server *server = output ? mcp_server_open(engine, output) : NULL;
    if (!server) {
        fprintf(stderr, "runbox mcp: cannot start: out of memory or threads\n");
        if (output)
            mcp_output_stop(output, 0);
        return 1;
    }
    fprintf(stderr, "runbox mcp: runbox %s serving MCP %s on stdio\n", RBX_VERSION,
            MCP_LATEST_VERSION);
    line_reader reader = {.fd = in_fd};
    while (read_input(server, &reader, stop_fd))
        ;
    free(reader.buf);
    /* The client is gone or asked us to stop: running calls are cancelled
     * (their responses suppressed), then what is queued is written. A call
     * that does not stop leaves the server allocated: the process exits. */
    if (mcp_server_close(server))
        mcp_output_stop(output, DRAIN_MS);
    fprintf(stderr, "runbox mcp: stopped\n");
    return 0;
}
