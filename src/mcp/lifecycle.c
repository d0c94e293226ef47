/* The MCP lifecycle: initialize negotiates the protocol revision and tells
 * the client what runbox is and how its tools fit together; ping is
 * answered at any time, before initialize too. */
#include "mcp/mcp.h"

#include <stdio.h>
#include <string.h>

/* Newest first: a client asking for another revision gets the newest, and
 * decides whether it can speak it. */
static const char *const supported_versions[] = {MCP_LATEST_VERSION, "2025-06-18", "2025-03-26",
                                                 "2024-11-05"};

static const char *negotiate(const char *requested)
{
    for (size_t i = 0; i < sizeof supported_versions / sizeof supported_versions[0]; i++)
        if (!strcmp(requested, supported_versions[i]))
            return supported_versions[i];
    return MCP_LATEST_VERSION;
}

static json_t *instructions(const rbx_config *config)
{
    char text[1500];
    snprintf(text, sizeof text,
             "runbox runs code in an isolated sandbox on this machine: execute_python, "
             "execute_javascript (Node.js) and execute_bash. Each call returns its stdout, "
             "stderr, exit code and a classified error. Files in /home/user persist between "
             "calls that pass the same session_id (a name you choose, e.g. \"analysis\"). By "
             "default every call starts a fresh process; with stateful: true, calls of one "
             "language in one session share a live interpreter, so variables, imports and the "
             "working directory persist, and the last expression's value and plots come back "
             "(plots as images). Call close_session when a session's files are no longer needed; "
             "list_sessions shows the sessions that exist. Per call: %g s unless timeout says "
             "otherwise (at most %g s), %u MiB of memory, %g MiB of output per stream (head "
             "and tail kept), network access %s. Up to %d calls run at once.",
             config->default_timeout_s, config->max_timeout_s, (unsigned)config->memory_mb,
             (double)config->output_cap_bytes / (1 << 20), config->network_off ? "off" : "on",
             MCP_MAX_CALLS);
    return json_string(text);
}

/* Tools that never change; sessions' files as resources, which change
 * (resources.c, client.c); the server's events as logs (logging.c); the
 * resource template's arguments completed (completion.c). */
static json_t *capabilities(void)
{
    return json_pack("{s:{s:b}, s:{s:b, s:b}, s:{}, s:{}}", "tools", "listChanged", 0,
                     "resources", "subscribe", 1, "listChanged", 1, "logging", "completions");
}

static bool object_or_absent(const json_t *value)
{
    return !value || json_is_object(value);
}

static void log_client(const json_t *client, const char *version)
{
    const char *name = json_string_value(json_object_get(client, "name"));
    const char *client_version = json_string_value(json_object_get(client, "version"));
    fprintf(stderr, "runbox mcp: client %.64s %.32s, protocol %s\n", name ? name : "(unnamed)",
            client_version ? client_version : "", version);
}

void mcp_answer_initialize(mcp_server *server, const rpc_message *request)
{
    json_t *params = request->params;
    const char *requested = json_string_value(json_object_get(params, "protocolVersion"));
    json_t *client = json_object_get(params, "clientInfo");
    if (!requested || !object_or_absent(json_object_get(params, "capabilities")) ||
        !object_or_absent(client)) {
        rpc_fail(server->output, request->id, RPC_INVALID_PARAMS,
                 "Invalid params: initialize needs \"protocolVersion\" (a string), "
                 "\"capabilities\" and \"clientInfo\" (objects)");
        return;
    }
    if (server->version) {
        rpc_fail(server->output, request->id, RPC_INVALID_REQUEST,
                 "Invalid Request: already initialized (protocol %s)", server->version);
        return;
    }
    server->version = negotiate(requested);
    log_client(client, server->version);
    mcp_client_set_version(mcp_client_of(server->output), server->version);
    json_t *result =
        json_pack("{s:s, s:o, s:{s:s, s:s, s:s, s:s}, s:o}", "protocolVersion", server->version,
                  "capabilities", capabilities(), "serverInfo", "name",
                  "runbox", "title", "runbox", "version", RBX_VERSION, "description",
                  "Runs Python, JavaScript and Bash code for AI agents, isolated and bounded",
                  "instructions", instructions(rbx_engine_config(server->engine)));
    rpc_reply(server->output, request->id, result);
}

void mcp_reply_cacheable(mcp_server *server, json_t *id, json_t *result, int ttl_ms)
{
    /* private: what runbox lists is for holders of its token alone. */
    if (result && server->version && !strcmp(server->version, MCP_STATELESS_VERSION)) {
        json_object_set_new(result, "ttlMs", json_integer(ttl_ms));
        json_object_set_new(result, "cacheScope", json_string("private"));
    }
    rpc_reply(server->output, id, result);
}

/* server/discover (2026-07-28): what initialize's answer told, asked for
 * at any time, with the revisions runbox serves. */
void mcp_answer_discover(mcp_server *server, const rpc_message *request)
{
    json_t *result = json_pack(
        "{s:o, s:o, s:o, s:{s:{s:s, s:s, s:s, s:s}}}", "supportedVersions",
        mcp_supported_versions(), "capabilities", capabilities(), "instructions",
        instructions(rbx_engine_config(server->engine)), "_meta",
        "io.modelcontextprotocol/serverInfo", "name", "runbox", "title", "runbox", "version",
        RBX_VERSION, "description",
        "Runs Python, JavaScript and Bash code for AI agents, isolated and bounded");
    mcp_reply_cacheable(server, request->id, result, 60000);
}

void mcp_answer_ping(mcp_server *server, const rpc_message *request)
{
    rpc_reply(server->output, request->id, json_object());
}
