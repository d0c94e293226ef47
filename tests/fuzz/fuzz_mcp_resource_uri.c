/* A resources/read or resources/subscribe URI is a client's text: parsed
 * by mcp_resource_uri_parse into a session id and a path, which must then
 * stay inside the session whatever was sent (no empty, "." or ".."
 * segment, no '/' smuggled in as %2F, no NUL or control byte), and which
 * must spell the same URI back: format, parse again, same id and path.
 * The content check (text or blob) is held against an independent UTF-8
 * validator. */
#include "fuzz.h"

#include "mcp/mcp.h"

static void check_path(const char *path)
{
    FUZZ_CHECK(path[0] && path[0] != '/');
    for (const char *segment = path; segment;) {
        const char *slash = strchr(segment, '/');
        size_t n = slash ? (size_t)(slash - segment) : strlen(segment);
        FUZZ_CHECK(n > 0);
        FUZZ_CHECK(!(n == 1 && segment[0] == '.'));
        FUZZ_CHECK(!(n == 2 && segment[0] == '.' && segment[1] == '.'));
        for (size_t i = 0; i < n; i++)
            FUZZ_CHECK((unsigned char)segment[i] >= 0x20 && segment[i] != 0x7f);
        segment = slash ? slash + 1 : NULL;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *uri = fuzz_cstring(data, size);
    char id[RBX_SESSION_ID_MAX + 1], path[MCP_URI_MAX + 1], why[300] = "";
    mcp_uri_kind kind = mcp_resource_uri_parse(uri, id, path, sizeof path, why, sizeof why);
    if (kind != MCP_URI_FILE)
        FUZZ_CHECK(why[0]);
    if (kind == MCP_URI_FILE) {
        FUZZ_CHECK(rbx_session_id_valid(id));
        check_path(path);
        char *again = mcp_resource_uri(id, path);
        FUZZ_CHECK(again && !strncmp(again, MCP_RESOURCE_PREFIX, strlen(MCP_RESOURCE_PREFIX)));
        char id2[RBX_SESSION_ID_MAX + 1], path2[3 * MCP_URI_MAX + 1];
        FUZZ_CHECK(mcp_resource_uri_parse(again, id2, path2, sizeof path2, why, sizeof why) ==
                   MCP_URI_FILE);
        FUZZ_CHECK(!strcmp(id, id2) && !strcmp(path, path2));
        free(again);
    }
    bool text = mcp_text_content((const char *)data, size);
    FUZZ_CHECK(text == (fuzz_utf8_valid((const char *)data, size) && !memchr(data, 0, size)));
    (void)mcp_mime_by_magic(data, size);
    (void)mcp_mime_by_name(uri);
    free(uri);
    return 0;
}
