/* Bytes a program or a client sent, on their way into JSON: the HTTP
 * server's text helper (error messages, the access log, file names), the
 * MCP server's, and the streaming events, framed as NDJSON and as
 * Server-Sent Events. Whatever the bytes, the JSON holds valid UTF-8, keeps
 * valid text as it was, and a frame is one event: no stray line break
 * inside it can start another. */
#include "fuzz.h"

#include "http/http.h"
#include "mcp/mcp.h"

static void check_text(json_t *value, const uint8_t *data, size_t size)
{
    FUZZ_CHECK(json_is_string(value));
    const char *text = json_string_value(value);
    size_t len = json_string_length(value);
    FUZZ_CHECK(fuzz_utf8_valid(text, len) && len <= 3 * size);
    if (fuzz_utf8_valid((const char *)data, size))
        FUZZ_CHECK(len == size && !memcmp(text, data, size));
    json_decref(value);
}

static void check_frames(const char *json)
{
    size_t len;
    char *frame = http_stream_frame(STREAM_NDJSON, "stdout", json, &len);
    FUZZ_CHECK(frame && len == strlen(json) + 1 && frame[len - 1] == '\n');
    FUZZ_CHECK(memchr(frame, '\n', len) == frame + len - 1 && !memchr(frame, '\r', len));
    free(frame);

    frame = http_stream_frame(STREAM_SSE, "stdout", json, &len);
    static const char head[] = "event: stdout\ndata: ";
    FUZZ_CHECK(frame && len == sizeof head - 1 + strlen(json) + 2);
    FUZZ_CHECK(!memcmp(frame, head, sizeof head - 1) && !strcmp(frame + len - 2, "\n\n"));
    /* SSE ends a line at CR as well as LF. */
    FUZZ_CHECK(!strpbrk(frame + sizeof head - 1, "\r") &&
               strchr(frame + sizeof head - 1, '\n') == frame + len - 2);
    free(frame);
}

static void check_event(const uint8_t *data, size_t size, rbx_stream stream)
{
    char *json = rbx_event_to_json(stream, (const char *)data, size);
    FUZZ_CHECK(json);
    json_t *event = json_loads(json, JSON_ALLOW_NUL, NULL);
    FUZZ_CHECK(event);
    FUZZ_CHECK(!strcmp(json_string_value(json_object_get(event, "type")),
                       stream == RBX_STDOUT ? "stdout" : "stderr"));
    check_text(json_incref(json_object_get(event, "data")), data, size);
    json_decref(event);
    check_frames(json);
    free(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_text(http_json_text((const char *)data, size), data, size);
    check_text(rpc_text((const char *)data, size), data, size);
    check_event(data, size, size % 2 ? RBX_STDERR : RBX_STDOUT);
    return 0;
}
