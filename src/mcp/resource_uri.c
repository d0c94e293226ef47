/* What a session file is called as an MCP resource, and what kind of
 * content it holds. A file is runbox://sessions/{session_id}/files/{path}:
 * a scheme of runbox's own (file:// would name a host path, which is
 * neither the file's place in the sandbox, /home/user, nor anything a
 * client may open), the session first so that one session's files sort
 * together and a template can complete it, and "files" so that a session
 * can have other resources later. The path is percent-encoded per segment
 * (RFC 3986 pchar), its slashes kept. A URI is parsed strictly: a client
 * that sends "..", an encoded slash or a NUL is refused before the engine
 * sees the path, and the engine checks the path again as it opens it. */
#include "api/percent.h"
#include "mcp/mcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool unreserved_or_kept(unsigned char c)
{
    /* pchar without '%': unreserved, sub-delims, ':' and '@'. */
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("-._~!$&'()*+,;=:@", c));
}

char *mcp_resource_uri(const char *session_id, const char *path)
{
    size_t len = strlen(MCP_RESOURCE_PREFIX) + strlen(session_id) + 7 + 3 * strlen(path) + 1;
    char *uri = malloc(len);
    if (!uri)
        return NULL;
    size_t used = (size_t)snprintf(uri, len, "%s%s/files/", MCP_RESOURCE_PREFIX, session_id);
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (*p == '/' || unreserved_or_kept(*p))
            uri[used++] = (char)*p;
        else
            used += (size_t)snprintf(uri + used, len - used, "%%%02X", *p);
    }
    uri[used] = 0;
    return uri;
}

static mcp_uri_kind invalid(char *why, size_t why_size, const char *text)
{
    snprintf(why, why_size, "%s", text);
    return MCP_URI_INVALID;
}

/* Decodes the path part segment by segment into path; a decoded '/' or
 * control byte, and "." or ".." segments, are refused. */
static mcp_uri_kind decode_path(const char *from, char *path, size_t path_size, char *why,
                                size_t why_size)
{
    size_t used = 0, segment_start = 0;
    for (const char *p = from;; p++) {
        if (*p == '/' || !*p) {
            size_t n = used - segment_start;
            if (n == 0)
                return invalid(why, why_size, "the path has an empty segment");
            if ((n == 1 && path[segment_start] == '.') ||
                (n == 2 && path[segment_start] == '.' && path[segment_start + 1] == '.'))
                return invalid(why, why_size,
                               "the path has a '.' or '..' segment: paths stay inside the session");
            if (!*p)
                break;
            if (used + 1 >= path_size)
                return invalid(why, why_size, "the path is too long");
            path[used++] = '/';
            segment_start = used;
            continue;
        }
        unsigned char c = (unsigned char)*p;
        if (c == '%') {
            int byte = api_percent_byte(p);
            if (byte < 0)
                return invalid(why, why_size, "the path has a '%' that is not followed by two hex digits");
            c = (unsigned char)byte;
            p += 2;
            if (c == '/')
                return invalid(why, why_size,
                               "the path has an encoded slash (%2F): a file name cannot hold one");
        } else if (c == '?' || c == '#') {
            return invalid(why, why_size, "a resource URI has no query or fragment");
        }
        if (c < 0x20 || c == 0x7f)
            return invalid(why, why_size, "the path has a NUL or control character");
        if (used + 1 >= path_size)
            return invalid(why, why_size, "the path is too long");
        path[used++] = (char)c;
    }
    path[used] = 0;
    return MCP_URI_FILE;
}

mcp_uri_kind mcp_resource_uri_parse(const char *uri, char session_id[RBX_SESSION_ID_MAX + 1],
                                    char *path, size_t path_size, char *why, size_t why_size)
{
    size_t prefix = strlen(MCP_RESOURCE_PREFIX);
    if (strncmp(uri, MCP_RESOURCE_PREFIX, prefix) != 0) {
        snprintf(why, why_size, "runbox serves only %s{session_id}/files/{path}",
                 MCP_RESOURCE_PREFIX);
        return MCP_URI_FOREIGN;
    }
    const char *id = uri + prefix;
    const char *end = strchr(id, '/');
    size_t id_len = end ? (size_t)(end - id) : strlen(id);
    if (id_len == 0 || id_len > RBX_SESSION_ID_MAX)
        return invalid(why, why_size, "the session id must be 1 to 64 characters");
    memcpy(session_id, id, id_len);
    session_id[id_len] = 0;
    if (!rbx_session_id_valid(session_id))
        return invalid(why, why_size, "the session id must match " RBX_SESSION_ID_PATTERN);
    if (!end || strncmp(end, "/files/", 7) != 0)
        return invalid(why, why_size, "a session's file is .../{session_id}/files/{path}");
    return decode_path(end + 7, path, path_size, why, why_size);
}

/* By name, for listings (no file is opened to list it). */
static const struct {
    const char *extension, *mime;
} by_extension[] = {
    {"png", "image/png"},        {"jpg", "image/jpeg"},         {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},        {"webp", "image/webp"},        {"svg", "image/svg+xml"},
    {"bmp", "image/bmp"},        {"ico", "image/vnd.microsoft.icon"},
    {"pdf", "application/pdf"},  {"csv", "text/csv"},           {"tsv", "text/tab-separated-values"},
    {"json", "application/json"}, {"jsonl", "application/jsonl"}, {"txt", "text/plain"},
    {"log", "text/plain"},       {"md", "text/markdown"},       {"html", "text/html"},
    {"htm", "text/html"},        {"css", "text/css"},           {"xml", "application/xml"},
    {"yaml", "application/yaml"}, {"yml", "application/yaml"},  {"toml", "application/toml"},
    {"py", "text/x-python"},     {"js", "text/javascript"},     {"mjs", "text/javascript"},
    {"ts", "text/x-typescript"}, {"sh", "text/x-shellscript"},  {"c", "text/x-c"},
    {"h", "text/x-c"},           {"ipynb", "application/x-ipynb+json"},
    {"zip", "application/zip"},  {"gz", "application/gzip"},    {"tar", "application/x-tar"},
    {"parquet", "application/vnd.apache.parquet"},              {"npy", "application/octet-stream"},
    {"wav", "audio/wav"},        {"mp3", "audio/mpeg"},         {"mp4", "video/mp4"},
    {"xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
};

const char *mcp_mime_by_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(slash ? slash + 1 : path, '.');
    if (!dot || dot[1] == 0)
        return NULL;
    for (size_t i = 0; i < sizeof by_extension / sizeof by_extension[0]; i++)
        if (!strcasecmp(dot + 1, by_extension[i].extension))
            return by_extension[i].mime;
    return NULL;
}

/* By the first bytes, for binary files whose name says nothing. */
const char *mcp_mime_by_magic(const unsigned char *data, size_t len)
{
    static const struct {
        const char *magic;
        size_t len;
        const char *mime;
    } magics[] = {
        {"\x89PNG\r\n\x1a\n", 8, "image/png"}, {"\xff\xd8\xff", 3, "image/jpeg"},
        {"GIF87a", 6, "image/gif"},            {"GIF89a", 6, "image/gif"},
        {"%PDF-", 5, "application/pdf"},       {"PK\x03\x04", 4, "application/zip"},
        {"\x1f\x8b", 2, "application/gzip"},
    };
    for (size_t i = 0; i < sizeof magics / sizeof magics[0]; i++)
        if (len >= magics[i].len && !memcmp(data, magics[i].magic, magics[i].len))
            return magics[i].mime;
    if (len >= 12 && !memcmp(data, "RIFF", 4) && !memcmp(data + 8, "WEBP", 4))
        return "image/webp";
    return NULL;
}

bool mcp_text_content(const char *data, size_t len)
{
    if (memchr(data, 0, len))
        return false;
    size_t clean_len;
    char *clean = rbx_utf8_sanitize(data, len, &clean_len);
    bool valid = clean && clean_len == len && !memcmp(clean, data, len);
    free(clean);
    return valid;
}
