/* MCP 2026-07-28 is stateless: there is no initialize, so every request
 * carries what it used to negotiate in its own params._meta (the protocol
 * revision and the client's capabilities; its name optionally), and over
 * HTTP the same again in headers a proxy can route on (MCP-Protocol-Version,
 * Mcp-Method, Mcp-Name). This is the check of that envelope, in the order
 * the official SDKs apply it, so that a client that contradicts itself is
 * told so before it is told its revision is unknown:
 *   1. _meta is an object with the protocol version and the capabilities
 *      (else -32602);
 *   2. over HTTP, the headers repeat the body (else -32020);
 *   3. the version is a string (else -32602) that runbox serves (else
 *      -32022 with the revisions it serves).
 * Whether the method exists is not part of it: the method table says. */
#include "mcp/mcp.h"

#include <stdio.h>
#include <string.h>

#define VERSION_KEY "io.modelcontextprotocol/protocolVersion"
#define CAPABILITIES_KEY "io.modelcontextprotocol/clientCapabilities"

/* The methods whose target the Mcp-Name header repeats, and its field. */
static const char *name_field(const char *method)
{
    if (!strcmp(method, "tools/call") || !strcmp(method, "prompts/get"))
        return "name";
    if (!strcmp(method, "resources/read"))
        return "uri";
    return NULL;
}

json_t *mcp_supported_versions(void)
{
    return json_pack("[s, s, s, s, s]", MCP_STATELESS_VERSION, MCP_LATEST_VERSION, "2025-06-18",
                     "2025-03-26", "2024-11-05");
}

int mcp_envelope_check(const char *method, const json_t *params,
                       const mcp_envelope_headers *headers, json_t **data, char *why,
                       size_t why_size)
{
    *data = NULL;
    const json_t *meta = json_object_get(params, "_meta");
    if (!json_is_object(meta)) {
        snprintf(why, why_size,
                 "Invalid params: params._meta must be an object carrying \"" VERSION_KEY
                 "\" and \"" CAPABILITIES_KEY "\" (MCP %s has no initialize)",
                 MCP_STATELESS_VERSION);
        return RPC_INVALID_PARAMS;
    }
    const json_t *version = json_object_get(meta, VERSION_KEY);
    if (!version || !json_object_get(meta, CAPABILITIES_KEY)) {
        snprintf(why, why_size, "Invalid params: params._meta lacks \"%s\"",
                 version ? CAPABILITIES_KEY : VERSION_KEY);
        return RPC_INVALID_PARAMS;
    }
    if (headers) {
        const char *field = name_field(method);
        const char *name = field ? json_string_value(json_object_get(params, field)) : NULL;
        if (headers->duplicated) {
            snprintf(why, why_size, "Header mismatch: %s appears more than once",
                     headers->duplicated);
            return RPC_HEADER_MISMATCH;
        }
        if (!headers->version || !json_is_string(version) ||
            strcmp(headers->version, json_string_value(version))) {
            snprintf(why, why_size, "Header mismatch: MCP-Protocol-Version does not match "
                                    "params._meta's protocol version");
            return RPC_HEADER_MISMATCH;
        }
        if (!headers->method || strcmp(headers->method, method)) {
            snprintf(why, why_size,
                     "Header mismatch: Mcp-Method does not match the body's method");
            return RPC_HEADER_MISMATCH;
        }
        if (name && (!headers->name || strcmp(headers->name, name))) {
            snprintf(why, why_size, "Header mismatch: Mcp-Name does not match the body's %s",
                     field);
            return RPC_HEADER_MISMATCH;
        }
    }
    if (!json_is_string(version)) {
        snprintf(why, why_size, "Invalid params: the protocol version must be a string");
        return RPC_INVALID_PARAMS;
    }
    if (strcmp(json_string_value(version), MCP_STATELESS_VERSION)) {
        snprintf(why, why_size, "Unsupported protocol version %.40s; without initialize this "
                                "server speaks " MCP_STATELESS_VERSION,
                 json_string_value(version));
        *data = json_pack("{s:[s], s:s%}", "supported", MCP_STATELESS_VERSION, "requested",
                          json_string_value(version), (size_t)40 < json_string_length(version)
                                                          ? (size_t)40
                                                          : json_string_length(version));
        return RPC_UNSUPPORTED_VERSION;
    }
    return 0;
}
