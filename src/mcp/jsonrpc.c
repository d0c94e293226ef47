/* JSON-RPC 2.0 as MCP uses it: one object per line, no batches (MCP
 * 2025-06-18 removed them), ids that are strings or numbers and come back
 * exactly as sent, with their type. */
#include "runbox.h"
#include "mcp/mcp.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *rpc_text(const char *data, size_t len)
{
    size_t clean_len;
    char *clean = rbx_utf8_sanitize(data, len, &clean_len);
    json_t *text = clean ? json_stringn(clean, clean_len) : NULL;
    free(clean);
    return text ? text : json_string("");
}

static bool id_valid(const json_t *id)
{
    return json_is_string(id) || json_is_number(id);
}

static rpc_kind invalid(char *why, size_t why_size, const char *text)
{
    snprintf(why, why_size, "%s", text);
    return RPC_INVALID;
}

/* A message with a method: a request when it has an id, else a notification. */
static rpc_kind read_call(json_t *json, rpc_message *message, char *why, size_t why_size)
{
    json_t *method = json_object_get(json, "method");
    if (!json_is_string(method))
        return invalid(why, why_size, "\"method\" must be a string");
    message->method = json_string_value(method);
    message->params = json_object_get(json, "params");
    if (json_is_null(message->params))
        message->params = NULL; /* some clients send null for "no params" */
    if (message->params && !json_is_object(message->params) && !json_is_array(message->params))
        return invalid(why, why_size, "\"params\" must be an object");
    json_t *id = json_object_get(json, "id");
    if (!id)
        return RPC_NOTIFICATION;
    if (json_is_null(id))
        return invalid(why, why_size,
                       "\"id\" must be a string or an integer (a null id is not a request; "
                       "leave the id out for a notification)");
    if (!id_valid(id))
        return invalid(why, why_size, "\"id\" must be a string or an integer");
    return RPC_REQUEST;
}

rpc_kind rpc_read(json_t *json, rpc_message *message, char *why, size_t why_size)
{
    *message = (rpc_message){0};
    if (json_is_array(json))
        return invalid(why, why_size,
                       "batches are not supported (MCP 2025-06-18 removed JSON-RPC batching); "
                       "send one message per line");
    if (!json_is_object(json))
        return invalid(why, why_size, "a message must be a JSON object");
    json_t *id = json_object_get(json, "id");
    if (id_valid(id))
        message->id = id; /* an error about the rest of the message still names it */
    const char *version = json_string_value(json_object_get(json, "jsonrpc"));
    if (!version || strcmp(version, "2.0") != 0)
        return invalid(why, why_size, "\"jsonrpc\" must be \"2.0\"");
    if (json_object_get(json, "method"))
        return read_call(json, message, why, why_size);
    if (message->id && (json_object_get(json, "result") || json_object_get(json, "error")))
        return RPC_RESPONSE;
    return invalid(why, why_size, "a message needs a \"method\" (or is a response to a request)");
}

json_t *rpc_result(json_t *id, json_t *result)
{
    json_t *response = json_object();
    json_object_set_new(response, "jsonrpc", json_string("2.0"));
    json_object_set(response, "id", id ? id : json_null());
    json_object_set_new(response, "result", result ? result : json_object());
    return response;
}

__attribute__((format(printf, 3, 0))) static json_t *error_message(json_t *id, int code,
                                                                   const char *fmt, va_list ap)
{
    char text[1024];
    vsnprintf(text, sizeof text, fmt, ap);
    json_t *error = json_object();
    json_object_set_new(error, "code", json_integer(code));
    /* Texts quote what the client sent, perhaps cut inside a character. */
    json_object_set_new(error, "message", rpc_text(text, strlen(text)));
    json_t *response = json_object();
    json_object_set_new(response, "jsonrpc", json_string("2.0"));
    json_object_set(response, "id", id ? id : json_null());
    json_object_set_new(response, "error", error);
    return response;
}

json_t *rpc_error(json_t *id, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    json_t *response = error_message(id, code, fmt, ap);
    va_end(ap);
    return response;
}

json_t *rpc_notification(const char *method, json_t *params)
{
    json_t *notification = json_object();
    json_object_set_new(notification, "jsonrpc", json_string("2.0"));
    json_object_set_new(notification, "method", json_string(method));
    json_object_set_new(notification, "params", params);
    return notification;
}

void rpc_reply(mcp_output *output, json_t *id, json_t *result)
{
    mcp_output_send(output, rpc_result(id, result));
}

void rpc_fail(mcp_output *output, json_t *id, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    json_t *response = error_message(id, code, fmt, ap);
    va_end(ap);
    mcp_output_send(output, response);
}
