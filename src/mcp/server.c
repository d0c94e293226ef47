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
    rpc_reply(server->output, request->id, json_pack("{s:O}", "tools", server->tools));
}

static void answer_tools_call(mcp_server *server, const rpc_message *request)
{
    /* SEP-1303 (2025-11-25): bad arguments are a tool error a model can
     * read and correct; earlier revisions list them as -32602. */
    bool arguments_as_results = strcmp(server->version, MCP_LATEST_VERSION) >= 0;
    mcp_calls_accept(server->calls, request->id, request->params, arguments_as_results);
}

static const struct method {
    const char *name;
    bool before_initialize;
    void (*answer)(mcp_server *server, const rpc_message *request);
} methods[] = {
    {"initialize", true, mcp_answer_initialize},
    {"ping", true, mcp_answer_ping},
    {"tools/list", false, answer_tools_list},
    {"tools/call", false, answer_tools_call},
    /* Resources, logging and completion (resources.c, logging.c, completion.c). */
    {"resources/list", false, mcp_answer_resources_list},
    {"resources/templates/list", false, mcp_answer_resource_templates},
    {"resources/read", false, mcp_answer_resources_read},
    {"resources/subscribe", false, mcp_answer_resources_subscribe},
    {"resources/unsubscribe", false, mcp_answer_resources_unsubscribe},
    {"subscriptions/listen", false, mcp_answer_subscriptions_listen},
    {"logging/setLevel", false, mcp_answer_logging_set_level},
    {"completion/complete", false, mcp_answer_completion},
};

static void answer_request(mcp_server *server, const rpc_message *request)
{
    const struct method *method = NULL;
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (!strcmp(methods[i].name, request->method))
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

int mcp_serve(rbx_engine *engine, int in_fd, int out_fd, int stop_fd)
{
    mcp_server server = {.engine = engine};
    server.tools = mcp_tools_describe(rbx_engine_config(engine));
    server.output = server.tools ? mcp_output_start(out_fd) : NULL;
    mcp_client *client = server.output ? mcp_client_start(server.output) : NULL;
    server.calls = client ? mcp_calls_start(engine, server.output, server.tools) : NULL;
    if (!server.calls) {
        fprintf(stderr, "runbox mcp: cannot start: out of memory or threads\n");
        mcp_client_stop(client);
        if (server.output)
            mcp_output_stop(server.output, 0);
        json_decref(server.tools);
        return 1;
    }
    fprintf(stderr, "runbox mcp: runbox %s serving MCP %s on stdio\n", RBX_VERSION,
            MCP_LATEST_VERSION);
    line_reader reader = {.fd = in_fd};
    while (read_input(&server, &reader, stop_fd))
        ;
    free(reader.buf);
    /* The client is gone or asked us to stop: running calls are cancelled
     * (their responses suppressed), then what is queued is written. */
    mcp_calls_stop(server.calls);
    mcp_client_stop(client); /* after the workers, which notify it */
    mcp_output_stop(server.output, DRAIN_MS);
    json_decref(server.tools);
    fprintf(stderr, "runbox mcp: stopped\n");
    return 0;
}
