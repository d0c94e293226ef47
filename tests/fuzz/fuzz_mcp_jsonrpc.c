/* One line of the MCP server's stdin: parsed as server.c parses it, sorted
 * by rpc_read into request, notification, response or invalid, and
 * answered with the error replies the server would build from it. Every
 * reply must serialize, and carry back the id exactly as it was sent. */
#include "fuzz.h"

#include "mcp/mcp.h"

/* A reply goes out as one line and the client matches it by id. */
static void check_reply(json_t *reply, const json_t *id)
{
    FUZZ_CHECK(reply);
    char *line = json_dumps(reply, JSON_COMPACT);
    FUZZ_CHECK(line && !strchr(line, '\n'));
    json_t *back = json_loads(line, JSON_ALLOW_NUL, NULL);
    FUZZ_CHECK(back);
    json_t *sent = json_object_get(back, "id");
    FUZZ_CHECK(id ? json_equal(sent, (json_t *)id) : json_is_null(sent));
    FUZZ_CHECK(!strcmp(json_string_value(json_object_get(back, "jsonrpc")), "2.0"));
    json_decref(back);
    free(line);
    json_decref(reply);
}

static void check_kind(rpc_kind kind, json_t *json, const rpc_message *m, const char *why)
{
    FUZZ_CHECK(!m->id || json_is_string(m->id) || json_is_number(m->id));
    json_t *version = json_object_get(json, "jsonrpc");
    if (kind != RPC_INVALID)
        FUZZ_CHECK(json_is_object(json) && !strcmp(json_string_value(version), "2.0"));
    switch (kind) {
    case RPC_REQUEST:
        FUZZ_CHECK(m->method && m->id && m->id == json_object_get(json, "id"));
        FUZZ_CHECK(!m->params || json_is_object(m->params) || json_is_array(m->params));
        break;
    case RPC_NOTIFICATION:
        FUZZ_CHECK(m->method && !m->id && !json_object_get(json, "id"));
        break;
    case RPC_RESPONSE:
        FUZZ_CHECK(!m->method && m->id);
        break;
    case RPC_INVALID:
        FUZZ_CHECK(why[0]);
        break;
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    json_object_seed(1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t error;
    json_t *json = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &error);
    if (!json) {
        check_reply(rpc_error(NULL, RPC_PARSE_ERROR, "Parse error: %s (at byte %d)", error.text,
                              error.position),
                    NULL);
        return 0;
    }
    rpc_message m;
    char why[300] = "";
    rpc_kind kind = rpc_read(json, &m, why, sizeof why);
    check_kind(kind, json, &m, why);
    if (kind == RPC_INVALID)
        check_reply(rpc_error(m.id, RPC_INVALID_REQUEST, "Invalid Request: %s", why), m.id);
    if (kind == RPC_REQUEST) {
        /* The method name is quoted cut at 64 bytes, perhaps inside a character. */
        check_reply(rpc_error(m.id, RPC_METHOD_NOT_FOUND, "Method not found: %.64s", m.method),
                    m.id);
        check_reply(rpc_result(m.id, json_object()), m.id);
    }
    json_decref(json);
    return 0;
}
