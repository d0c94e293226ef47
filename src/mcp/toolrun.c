/* What a tool call does: turn its arguments into one engine call and its
 * outcome into a CallToolResult. Per the MCP spec, what a model can act on
 * is a tool error (isError: true, the message as text): code that failed,
 * and requests the engine refused (RBX_EINVAL, RBX_ENOENT, RBX_EBUSY, and
 * RBX_ENOSPC: the model can free space by closing sessions). Only
 * a failure of the host (RBX_ESYSTEM) is a protocol error (-32603). */
#include "api/form.h"
#include "mcp/mcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A stateful call's rich outputs as content blocks a model can see:
 * images as images, the rest as their text (Markdown, else plain). */
static void add_rich_outputs(json_t *content, json_t *structured)
{
    size_t i;
    json_t *output;
    json_array_foreach(json_object_get(structured, "results"), i, output)
    {
        json_t *data = json_object_get(output, "data");
        static const char *const images[] = {"image/png", "image/jpeg", "image/gif"};
        bool shown = false;
        for (size_t m = 0; m < 3 && !shown; m++) {
            const char *b64 = json_string_value(json_object_get(data, images[m]));
            if (b64) {
                json_array_append_new(content, json_pack("{s:s, s:s, s:s}", "type", "image", "data",
                                                         b64, "mimeType", images[m]));
                shown = true;
            }
        }
        const char *text = json_string_value(json_object_get(data, "text/markdown"));
        text = text ? text : json_string_value(json_object_get(data, "text/plain"));
        if (!shown && text)
            json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", text));
    }
}

/* structuredContent, the same object as a JSON text block, and the rich
 * outputs of a stateful call. */
static json_t *tool_result(json_t *structured, bool is_error)
{
    char *text = json_dumps(structured, JSON_COMPACT);
    json_t *content = json_pack("[{s:s, s:s}]", "type", "text", "text", text ? text : "{}");
    free(text);
    add_rich_outputs(content, structured);
    return json_pack("{s:o, s:o, s:b}", "content", content, "structuredContent", structured,
                     "isError", is_error);
}

json_t *mcp_tool_error(const char *message)
{
    return json_pack("{s:[{s:s, s:o}], s:b}", "content", "type", "text", "text",
                     rpc_text(message, strlen(message)), "isError", 1);
}

/* A refusal is also the server's event, for a client that asked for logs. */
static void log_refusal(mcp_output *output, const mcp_call *call, const rbx_error *err)
{
    const char *session_id = json_string_value(json_object_get(call->arguments, "session_id"));
    json_t *fields = json_pack("{s:s}", "tool", call->tool->name);
    if (session_id)
        json_object_set_new(fields, "session_id", json_string(session_id));
    mcp_log(output, call->log_level, err->status == RBX_ESYSTEM ? MCP_LOG_ERROR : MCP_LOG_WARNING,
            "execution_refused", fields, "%s refused: %s", call->tool->name, err->message);
}

static json_t *engine_failure(const mcp_call *call, const rbx_error *err)
{
    if (err->status == RBX_ESYSTEM) {
        fprintf(stderr, "runbox mcp: %s: %s\n", call->tool->name, err->message);
        return rpc_error(call->id, RPC_INTERNAL_ERROR, "Internal error: %s", err->message);
    }
    return rpc_result(call->id, mcp_tool_error(err->message));
}

static const char *text_argument(const mcp_call *call, const char *name)
{
    return json_string_value(json_object_get(call->arguments, name));
}

/* The requirements array as the engine takes it (the strings stay owned
 * by the arguments). */
static const char **requirement_list(const mcp_call *call, size_t *count)
{
    json_t *array = json_object_get(call->arguments, "requirements");
    *count = json_array_size(array);
    const char **list = calloc(*count + 1, sizeof *list);
    for (size_t i = 0; list && i < *count; i++)
        list[i] = json_string_value(json_array_get(array, i));
    return list;
}

/* egress_allow as the engine takes it: NULL when the argument is left out
 * (the operator's policy), an empty list for [] (nothing reachable). The
 * strings stay owned by the arguments. */
static bool egress_list(const mcp_call *call, rbx_request *request, const char ***list)
{
    json_t *array = json_object_get(call->arguments, "egress_allow");
    *list = NULL;
    if (!json_is_array(array))
        return true;
    size_t count = json_array_size(array);
    if (!(*list = calloc(count + 1, sizeof **list)))
        return false;
    for (size_t i = 0; i < count; i++)
        (*list)[i] = json_string_value(json_array_get(array, i));
    request->egress_allow = *list;
    request->egress_allow_count = count;
    return true;
}

static json_t *execute(rbx_engine *engine, mcp_output *output, mcp_call *call)
{
    rbx_request request;
    rbx_request_init(&request);
    request.language = call->tool->language;
    json_t *code = json_object_get(call->arguments, call->tool->code_argument);
    request.code = json_string_value(code);
    request.code_len = json_string_length(code);
    request.session_id = text_argument(call, "session_id");
    request.image = text_argument(call, "image");
    request.timeout_s = json_number_value(json_object_get(call->arguments, "timeout"));
    request.cpus = json_number_value(json_object_get(call->arguments, "cpus"));
    request.stateful = json_is_true(json_object_get(call->arguments, "stateful"));
    request.cancel_fd = call->cancel_fd;
    const char **requirements = requirement_list(call, &request.requirement_count);
    const char **egress = NULL;
    if (!requirements || !egress_list(call, &request, &egress)) {
        free(requirements);
        return rpc_error(call->id, RPC_INTERNAL_ERROR, "Internal error: out of memory");
    }
    request.requirements = requirements;
    mcp_progress progress;
    mcp_progress_init(&progress, output, call, rbx_engine_config(engine)->output_cap_bytes);
    /* The session's files before, to tell what the execution changed
     * (NULL when nobody needs to know). */
    mcp_snapshot *before = mcp_changes_before(engine, output, request.session_id, true);
    rbx_result result;
    rbx_error err = {0};
    rbx_status status =
        rbx_execute(engine, &request, mcp_progress_on_output, &progress, &result, &err);
    free(requirements);
    free(egress);
    if (status != RBX_OK) {
        mcp_snapshot_free(before);
        log_refusal(output, call, &err);
        return engine_failure(call, &err);
    }
    json_t *links = mcp_changes_report(engine, output, result.session_id, before);
    if (result.kernel_restarted)
        mcp_log(output, call->log_level, MCP_LOG_WARNING, "kernel_restarted",
                json_pack("{s:s, s:s}", "session_id", result.session_id, "language",
                          call->tool->language),
                "the %s interpreter of session %s had to start afresh: variables from earlier "
                "calls are gone",
                call->tool->language, result.session_id);
    char *json = rbx_result_to_json(&result);
    bool success = result.success;
    rbx_result_free(&result);
    json_t *structured = json ? json_loads(json, JSON_ALLOW_NUL, NULL) : NULL;
    free(json);
    if (!structured) {
        json_decref(links);
        return rpc_error(call->id, RPC_INTERNAL_ERROR, "Internal error: cannot render the result");
    }
    json_t *tool = tool_result(structured, !success);
    json_array_extend(json_object_get(tool, "content"), links);
    json_decref(links);
    return rpc_result(call->id, tool);
}

static json_t *list_sessions(rbx_engine *engine, const mcp_call *call)
{
    rbx_session_info *infos;
    size_t count;
    rbx_error err = {0};
    if (rbx_session_list(engine, &infos, &count, &err) != RBX_OK)
        return engine_failure(call, &err);
    json_t *sessions = json_array();
    for (size_t i = 0; i < count; i++) {
        json_t *session = api_json_of_text(rbx_session_info_to_json(&infos[i]));
        if (session)
            json_array_append_new(sessions, session);
    }
    free(infos);
    return rpc_result(call->id, tool_result(json_pack("{s:o}", "sessions", sessions), false));
}

/* Closing stops what runs in the session, again every half second: an
 * execution that was waiting for the session, or whose sandbox was still
 * starting, takes its turn after the first is stopped. */
#define CLOSE_WAIT_S 10.0
#define CLOSE_RETRY_S 0.5

static json_t *close_session(rbx_engine *engine, mcp_output *output, const mcp_call *call)
{
    const char *id = text_argument(call, "session_id");
    rbx_error err = {0};
    if (!rbx_session_id_valid(id))
        return rpc_result(
            call->id, mcp_tool_error("invalid session id: it must match " RBX_SESSION_ID_PATTERN));
    rbx_status status = RBX_EBUSY;
    mcp_snapshot *before = mcp_changes_before(engine, output, id, false);
    for (double waited = 0; status == RBX_EBUSY && waited < CLOSE_WAIT_S; waited += CLOSE_RETRY_S) {
        rbx_session_cancel(engine, id);
        status = rbx_session_remove(engine, id, CLOSE_RETRY_S, &err);
    }
    if (status != RBX_OK) {
        mcp_snapshot_free(before);
        return engine_failure(call, &err);
    }
    /* Its files are gone: subscribers hear of it, and the list changed. */
    json_decref(mcp_changes_report(engine, output, id, before));
    mcp_log(output, call->log_level, MCP_LOG_INFO, "session_closed", json_pack("{s:s}", "session_id", id),
            "session %s closed: its files are gone", id);
    json_t *structured = json_pack("{s:s, s:b}", "session_id", id, "closed", 1);
    return rpc_result(call->id, tool_result(structured, false));
}

json_t *mcp_tool_run(rbx_engine *engine, mcp_output *output, mcp_call *call)
{
    switch (call->tool->kind) {
    case MCP_TOOL_EXECUTE:
        return execute(engine, output, call);
    case MCP_TOOL_LIST_SESSIONS:
        return list_sessions(engine, call);
    case MCP_TOOL_CLOSE_SESSION:
        return close_session(engine, output, call);
    }
    return rpc_error(call->id, RPC_INTERNAL_ERROR, "Internal error: unknown tool kind");
}
