/* A kernel's wire (src/kernels/wire.c), both ways. Back from the driver
 * comes whatever the code in the sandbox writes to its fd 3: parsing a line
 * never crashes or leaks, and a display event is {kind, data} with a known
 * kind and an object. Out to the driver goes the code: for the JSON
 * dialect one line that parses back to the same code (code that is not
 * UTF-8, or holds a NUL, never gets this far), for bash plain ASCII lines whose $'...' decodes
 * (by the reference below) to the code byte for byte.
 *
 * The first byte picks the direction and the dialect; the rest is the line
 * or the code. */
#include "fuzz.h"

#include "kernels/wire.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    json_object_seed(1);
    return 0;
}

static void check_parse(rbx_kernel_dialect dialect, const uint8_t *data, size_t size)
{
    char *line = fuzz_cstring(data, size);
    rbx_kernel_event event;
    if (rbx_kernel_wire_parse(dialect, line, strlen(line), &event)) {
        FUZZ_CHECK(event.type == RBX_KERNEL_EVENT_DISPLAY || event.type == RBX_KERNEL_EVENT_DONE ||
                   event.type == RBX_KERNEL_EVENT_START);
        FUZZ_CHECK(memchr(event.exception, 0, sizeof event.exception) != NULL);
        if (event.type == RBX_KERNEL_EVENT_DISPLAY) {
            const char *kind = json_string_value(json_object_get(event.output, "kind"));
            FUZZ_CHECK(kind && (!strcmp(kind, "display_data") || !strcmp(kind, "execute_result")));
            FUZZ_CHECK(json_is_object(json_object_get(event.output, "data")));
        } else {
            FUZZ_CHECK(event.output == NULL);
        }
    }
    rbx_kernel_event_free(&event);
    free(line);
}

/* The reference: $'...' with only plain bytes and \xHH escapes in it. */
static size_t bash_unquote(const char *quoted, size_t len, char *out)
{
    FUZZ_CHECK(len >= 3 && quoted[0] == '$' && quoted[1] == '\'' && quoted[len - 1] == '\'');
    size_t n = 0;
    for (size_t i = 2; i < len - 1;) {
        FUZZ_CHECK(quoted[i] != '\'');
        if (quoted[i] == '\\') {
            FUZZ_CHECK(i + 3 < len && quoted[i + 1] == 'x');
            char hex[3] = {quoted[i + 2], quoted[i + 3], 0};
            out[n++] = (char)strtol(hex, NULL, 16);
            i += 4;
        } else {
            out[n++] = quoted[i++];
        }
    }
    return n;
}

static void check_request(rbx_kernel_dialect dialect, const uint8_t *data, size_t size)
{
    const char *code = (const char *)data;
    size_t len = 0;
    rbx_kernel_wire_call call = {.id = 7, .code = code, .code_len = size};
    char *request = rbx_kernel_wire_request(dialect, &call, &len);
    if (dialect == RBX_KERNEL_JSON) {
        if (!fuzz_utf8_valid(code, size) || memchr(code, 0, size)) {
            free(request);
            return; /* rbx_execute refuses such code before any kernel sees it (unrunnable) */
        }
        FUZZ_CHECK(request && len > 0 && request[len - 1] == '\n');
        FUZZ_CHECK(memchr(request, '\n', len) == request + len - 1);
        json_t *back = json_loadb(request, len - 1, 0, NULL);
        json_t *got = json_object_get(back, "code");
        FUZZ_CHECK(json_is_string(got) && json_string_length(got) == size &&
                   !memcmp(json_string_value(got), code, size));
        FUZZ_CHECK(json_integer_value(json_object_get(back, "id")) == 7);
        json_decref(back);
    } else {
        FUZZ_CHECK(request && len > 0);
        for (size_t i = 0; i < len; i++)
            FUZZ_CHECK((unsigned char)request[i] < 128 &&
                       (request[i] == '\n' || request[i] >= ' '));
        /* The call's mark first (kernels/wire.h), then the code. */
        static const char begin[] = "__rbx_start 7\n__rbx_begin 7 ";
        FUZZ_CHECK(!strncmp(request, begin, sizeof begin - 1));
        const char *quoted = request + sizeof begin - 1;
        const char *end = strchr(quoted, '\n');
        FUZZ_CHECK(end);
        char *decoded = malloc(size + 1);
        FUZZ_CHECK(decoded);
        size_t n = bash_unquote(quoted, (size_t)(end - quoted), decoded);
        FUZZ_CHECK(n == size && !memcmp(decoded, code, size));
        free(decoded);
    }
    free(request);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    rbx_kernel_dialect dialect = (data[0] & 1) ? RBX_KERNEL_BASH : RBX_KERNEL_JSON;
    if (data[0] & 2)
        check_request(dialect, data + 1, size - 1);
    else
        check_parse(dialect, data + 1, size - 1);
    return 0;
}
