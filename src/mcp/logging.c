/* The server's own events as notifications/message: an execution the
 * engine refused, a stateful session's interpreter that had to start
 * afresh, a session closed. Nothing is sent before logging/setLevel (the
 * spec leaves the default to the server), and then only at the level
 * asked or above. MCP 2026-07-28 drops setLevel: a request opts in to the
 * messages about it with _meta["io.modelcontextprotocol/logLevel"]. Each message's data is
 * an object a host can read: {event, message, and the event's fields}. */
#include "mcp/mcp.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define LOG_LEVEL_KEY "io.modelcontextprotocol/logLevel"

/* RFC 5424's severities, as MCP names them, least severe first. */
static const char *const level_names[] = {"debug", "info",     "notice", "warning",
                                          "error", "critical", "alert",  "emergency"};

int mcp_log_level_of(const char *name)
{
    for (size_t i = 0; name && i < sizeof level_names / sizeof level_names[0]; i++)
        if (!strcmp(level_names[i], name))
            return (int)i;
    return -1;
}

int mcp_log_level_requested(const json_t *meta)
{
    /* An unknown value reads as absent: dropping is the safe direction. */
    return mcp_log_level_of(json_string_value(json_object_get(meta, LOG_LEVEL_KEY)));
}

void mcp_log(mcp_output *output, int request_level, mcp_log_level level, const char *event,
             json_t *fields, const char *fmt, ...)
{
    mcp_client *client = mcp_client_of(output);
    bool asked = (request_level >= 0 && (int)level >= request_level) ||
                 level >= mcp_client_log_level(client);
    if (!client || !asked) {
        json_decref(fields);
        return;
    }
    char text[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    json_t *data = json_is_object(fields) ? fields : json_object();
    json_object_set_new(data, "event", json_string(event));
    json_object_set_new(data, "message", rpc_text(text, strlen(text)));
    json_t *params = json_pack("{s:s, s:s, s:o}", "level", level_names[level], "logger", "runbox",
                               "data", data);
    mcp_output_send(output, rpc_notification("notifications/message", params));
}

void mcp_answer_logging_set_level(mcp_server *server, const rpc_message *request)
{
    const char *name = json_string_value(json_object_get(request->params, "level"));
    int level = mcp_log_level_of(name);
    mcp_client *client = mcp_client_of(server->output);
    if (level < 0 || !client) {
        rpc_fail(server->output, request->id, RPC_INVALID_PARAMS,
                 "Invalid params: \"level\" must be one of debug, info, notice, warning, error, "
                 "critical, alert, emergency");
        return;
    }
    mcp_client_set_log_level(client, (mcp_log_level)level);
    rpc_reply(server->output, request->id, json_object());
}
