/* completion/complete for the one place MCP lets a server complete what
 * runbox has: the arguments of its resource template. session_id
 * completes to the sessions whose id starts with what was typed; path to
 * the files of the session named in context.arguments (one listing).
 * Tools' arguments (a language, a session id) are not completable in MCP
 * (completion refs are prompts and resource templates only); runbox has
 * no prompts, so a prompt ref, like any other template, gets no values:
 * an empty answer, which hosts show as "no suggestions". */
#include "mcp/mcp.h"

#include <stdlib.h>
#include <string.h>

#define COMPLETION_MAX 100 /* the spec's cap on values per response */

typedef struct suggestions {
    json_t *values;
    size_t total;
} suggestions;

static void offer(suggestions *found, const char *value, const char *typed)
{
    if (strncmp(value, typed, strlen(typed)) != 0)
        return;
    found->total++;
    if (json_array_size(found->values) < COMPLETION_MAX)
        json_array_append_new(found->values, rpc_text(value, strlen(value)));
}

static void complete_session_id(rbx_engine *engine, const char *typed, suggestions *found)
{
    rbx_session_id *ids;
    size_t count;
    rbx_error err = {0};
    if (rbx_session_ids(engine, &ids, &count, &err) != RBX_OK)
        return;
    for (size_t i = 0; i < count; i++)
        offer(found, ids[i], typed);
    free(ids);
}

static void complete_path(rbx_engine *engine, const json_t *context, const char *typed,
                          suggestions *found)
{
    const char *id =
        json_string_value(json_object_get(json_object_get(context, "arguments"), "session_id"));
    if (!id || !rbx_session_id_valid(id))
        return;
    mcp_snapshot *snapshot = mcp_snapshot_list(engine, id);
    size_t count;
    const mcp_file *files = mcp_snapshot_files(snapshot, &count);
    for (size_t i = 0; i < count; i++)
        offer(found, files[i].path, typed);
    mcp_snapshot_free(snapshot);
}

void mcp_answer_completion(mcp_server *server, const rpc_message *request)
{
    json_t *ref = json_object_get(request->params, "ref");
    json_t *argument = json_object_get(request->params, "argument");
    json_t *context = json_object_get(request->params, "context");
    const char *type = json_string_value(json_object_get(ref, "type"));
    const char *name = json_string_value(json_object_get(argument, "name"));
    const char *typed = json_string_value(json_object_get(argument, "value"));
    if (!type || !name || !typed || (context && !json_is_object(context))) {
        rpc_fail(server->output, request->id, RPC_INVALID_PARAMS,
                 "Invalid params: completion/complete needs \"ref\" ({type, uri or name}) and "
                 "\"argument\" ({name, value}), strings; \"context\" is an object");
        return;
    }
    if (strcmp(type, "ref/resource") != 0 && strcmp(type, "ref/prompt") != 0) {
        rpc_fail(server->output, request->id, RPC_INVALID_PARAMS,
                 "Invalid params: ref.type must be ref/resource or ref/prompt");
        return;
    }
    suggestions found = {.values = json_array()};
    const char *uri = json_string_value(json_object_get(ref, "uri"));
    if (!strcmp(type, "ref/resource") && uri && !strcmp(uri, MCP_RESOURCE_TEMPLATE)) {
        if (!strcmp(name, "session_id"))
            complete_session_id(server->engine, typed, &found);
        else if (!strcmp(name, "path"))
            complete_path(server->engine, context, typed, &found);
    }
    json_t *result = json_pack("{s:{s:o, s:I, s:b}}", "completion", "values", found.values,
                               "total", (json_int_t)found.total, "hasMore",
                               found.total > COMPLETION_MAX);
    rpc_reply(server->output, request->id, result);
}
