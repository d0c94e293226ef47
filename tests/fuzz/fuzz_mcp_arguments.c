/* The params of a tools/call request, admitted as calls.c admits them:
 * the tool looked up, the CallToolRequest shape checked, and the arguments
 * checked against the real inputSchema that tools/list shows a model.
 * This file stands in for mcp/output.c (the stdout writer), so every reply
 * admission sends is seen here instead of written. */
#include "fuzz.h"

#include "mcp/mcp.h"

struct mcp_output {
    json_t *replies; /* what admission sent, in order */
};

void mcp_output_send(mcp_output *output, json_t *message)
{
    json_array_append_new(output->replies, message);
}

void mcp_output_send_progress(mcp_output *output, json_t *message)
{
    mcp_output_send(output, message);
}

static json_t *tools;

/* A refused call gets exactly one reply, to its own id: a protocol error,
 * or (arguments_as_results) a tool result with isError. */
static void check_refusal(const mcp_output *out, const json_t *id, bool as_result)
{
    FUZZ_CHECK(json_array_size(out->replies) == 1);
    json_t *reply = json_array_get(out->replies, 0);
    FUZZ_CHECK(json_equal(json_object_get(reply, "id"), (json_t *)id));
    json_t *result = json_object_get(reply, "result");
    json_t *error = json_object_get(reply, "error");
    FUZZ_CHECK(!result != !error);
    if (result)
        FUZZ_CHECK(as_result && json_is_true(json_object_get(result, "isError")));
    else
        FUZZ_CHECK(json_integer_value(json_object_get(error, "code")) == RPC_INVALID_PARAMS);
    char *line = json_dumps(reply, JSON_COMPACT);
    FUZZ_CHECK(line);
    free(line);
}

static const json_t *schema_of(const char *name)
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

/* Arguments let through meet the schema's own words: nothing unknown when
 * it is closed, every required one there, strings free of NUL. */
static void check_admitted(const mcp_call *call, const json_t *schema)
{
    FUZZ_CHECK(call->tool && schema && json_is_object(call->arguments));
    FUZZ_CHECK(!call->progress_token || json_is_string(call->progress_token) ||
               json_is_number(call->progress_token));
    json_t *properties = json_object_get(schema, "properties");
    bool closed = json_is_false(json_object_get(schema, "additionalProperties"));
    size_t i;
    json_t *required;
    json_array_foreach(json_object_get(schema, "required"), i, required)
        FUZZ_CHECK(json_object_get(call->arguments, json_string_value(required)));
    const char *key;
    json_t *value;
    json_object_foreach(call->arguments, key, value)
    {
        json_t *property = json_object_get(properties, key);
        FUZZ_CHECK(property || !closed);
        const char *type = json_string_value(json_object_get(property, "type"));
        if (type && !strcmp(type, "string"))
            FUZZ_CHECK(json_is_string(value) &&
                       strlen(json_string_value(value)) == json_string_length(value));
        if (type && !strcmp(type, "array"))
            FUZZ_CHECK(json_is_array(value));
        if (type && !strcmp(type, "boolean"))
            FUZZ_CHECK(json_is_boolean(value));
    }
}

static void admit(json_t *params, bool as_result)
{
    mcp_output out = {json_array()};
    json_t *id = json_integer(42);
    mcp_call call = {0};
    if (mcp_call_admit(&out, tools, id, params, as_result, &call)) {
        FUZZ_CHECK(json_array_size(out.replies) == 0);
        check_admitted(&call, schema_of(call.tool->name));
        json_decref(call.arguments);
        json_decref(call.progress_token);
    } else {
        check_refusal(&out, id, as_result);
    }
    json_decref(id);
    json_decref(out.replies);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    json_object_seed(1);
    rbx_config config;
    rbx_config_defaults(&config);
    tools = mcp_tools_describe(&config);
    return tools ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *params = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!params)
        return 0;
    /* Both protocol revisions: bad arguments as a tool error or as -32602. */
    admit(params, true);
    admit(params, false);
    json_decref(params);
    return 0;
}
