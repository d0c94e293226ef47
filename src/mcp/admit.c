/* Admission of a tools/call request, per MCP 2025-11-25: what breaks the
 * CallToolRequest schema (no name, arguments or _meta not objects, a
 * progressToken neither string nor number) and an unknown tool are protocol
 * errors (-32602); arguments that break the tool's inputSchema are a tool
 * error the model can read and correct (SEP-1303), or -32602 for clients
 * of earlier revisions, which listed them among protocol errors. */
#include "mcp/mcp.h"

#include <stdio.h>
#include <string.h>

static void tool_names(const json_t *tools, char *out, size_t size)
{
    size_t i, used = 0;
    json_t *tool;
    out[0] = 0;
    json_array_foreach(tools, i, tool)
    {
        if (used < size)
            used += (size_t)snprintf(out + used, size - used, "%s%s", i ? ", " : "",
                                     json_string_value(json_object_get(tool, "name")));
    }
}

static const json_t *input_schema(const json_t *tools, const char *name)
{
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool)
    {
        if (!strcmp(json_string_value(json_object_get(tool, "name")), name))
            return json_object_get(tool, "inputSchema");
    }
    return NULL;
}

bool mcp_call_admit(mcp_output *output, const json_t *tools, json_t *id, json_t *params,
                    bool arguments_as_results, mcp_call *call)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    json_t *arguments = json_object_get(params, "arguments");
    json_t *meta = json_object_get(params, "_meta");
    json_t *token = json_object_get(meta, "progressToken");
    char why[512];
    if (!name) {
        rpc_fail(output, id, RPC_INVALID_PARAMS, "Invalid params: tools/call needs \"name\"");
        return false;
    }
    if (!(call->tool = mcp_tool_find(name))) {
        tool_names(tools, why, sizeof why);
        rpc_fail(output, id, RPC_INVALID_PARAMS, "Unknown tool: %.64s (tools: %s)", name, why);
        return false;
    }
    if ((arguments && !json_is_object(arguments)) || (meta && !json_is_object(meta)) ||
        (token && !json_is_string(token) && !json_is_number(token))) {
        rpc_fail(output, id, RPC_INVALID_PARAMS,
                 "Invalid params: \"arguments\" and \"_meta\" must be objects, and "
                 "\"_meta.progressToken\" a string or a number");
        return false;
    }
    call->arguments = arguments ? json_incref(arguments) : json_object();
    call->progress_token = json_incref(token);
    call->log_level = mcp_log_level_requested(meta);
    if (mcp_arguments_check(input_schema(tools, name), call->arguments, why, sizeof why))
        return true;
    char message[600];
    snprintf(message, sizeof message, "Invalid arguments for %s: %s", name, why);
    if (arguments_as_results)
        rpc_reply(output, id, mcp_tool_error(message));
    else
        rpc_fail(output, id, RPC_INVALID_PARAMS, "%s", message);
    json_decref(call->arguments);
    json_decref(call->progress_token);
    return false;
}
