/* What runbox speaks with a kernel's driver (see kernels/wire.h). */
#include "kernels/wire.h"
#include "execution/shown.h"
#include "languages/runtime.h"
#include "runbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* A growing byte buffer. */
typedef struct buffer {
    char *data;
    size_t len, cap;
    bool failed;
} buffer;

static void put(buffer *b, const char *data, size_t len)
{
    if (b->failed)
        return;
    if (b->len + len + 1 > b->cap) {
        size_t cap = (b->len + len + 1) * 2;
        char *grown = realloc(b->data, cap);
        if (!grown) {
            b->failed = true;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = 0;
}

static void put_text(buffer *b, const char *text)
{
    put(b, text, strlen(text));
}

size_t rbx_kernel_wire_mark(int64_t id, char *mark, size_t size)
{
    int n = snprintf(mark, size, RBX_KERNEL_MARK_FORMAT, (long long)id);
    return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

int64_t rbx_kernel_wire_new_id(void)
{
    uint64_t r = 0;
    while (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
        ; /* cannot fail for 8 bytes once the pool is ready; EINTR retries */
    r &= ((uint64_t)1 << 53) - 1;
    return r ? (int64_t)r : 1;
}

/* bash's $'...' quoting, byte for byte: every byte that is not plain and
 * safe becomes \xHH, so the result is one line whatever the code holds. */
static void put_bash_quoted(buffer *b, const char *data, size_t len)
{
    static const char plain[] = " _-+=.,:/@%^*()[]{}<>|&;!?#~";
    put_text(b, "$'");
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)data[i];
        bool safe = c < 128 && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                (c >= '0' && c <= '9') || (c && strchr(plain, c)));
        char hex[5];
        if (safe) {
            put(b, (const char *)&c, 1);
        } else {
            snprintf(hex, sizeof hex, "\\x%02x", c);
            put(b, hex, 4);
        }
    }
    put_text(b, "'");
}

static char *bash_request(const rbx_kernel_wire_call *call, size_t *len)
{
    buffer b = {0};
    char number[32];
    const char *const *env = call->env;
    size_t env_count = call->env_count;
    snprintf(number, sizeof number, "%lld", (long long)call->id);
    /* First, so that what cd and the environment say is the call's. */
    put_text(&b, "__rbx_start ");
    put_text(&b, number);
    put_text(&b, "\n");
    if (call->cwd) {
        /* Before the call begins, so that a failure shows on its stderr. */
        put_text(&b, "builtin cd -- ");
        put_bash_quoted(&b, call->cwd, strlen(call->cwd));
        put_text(&b, "\n");
    }
    if (env_count) {
        put_text(&b, "__rbx_env_set");
        for (size_t i = 0; i < env_count; i++) {
            const char *eq = strchr(env[i], '=');
            put_text(&b, " ");
            put_bash_quoted(&b, env[i], (size_t)(eq - env[i]));
            put_text(&b, " ");
            put_bash_quoted(&b, eq + 1, strlen(eq + 1));
        }
        put_text(&b, "\n");
    }
    put_text(&b, "__rbx_begin ");
    put_text(&b, number);
    put_text(&b, " ");
    put_bash_quoted(&b, call->code, call->code_len);
    put_text(&b, "\n[[ $__rbx_ok ]] && { eval \"$__rbx_code\"; } </dev/null\n");
    if (env_count)
        put_text(&b, "__rbx_env_restore\n");
    if (b.failed) {
        free(b.data);
        return NULL;
    }
    *len = b.len;
    return b.data;
}

static char *json_request(const rbx_kernel_wire_call *call, size_t *len)
{
    json_t *vars = json_object();
    for (size_t i = 0; i < call->env_count; i++) {
        const char *entry = call->env[i];
        const char *eq = strchr(entry, '=');
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - entry), entry);
        /* JSON holds text: a value that is not UTF-8 goes with U+FFFD. */
        size_t clean_len;
        char *clean = rbx_utf8_sanitize(eq + 1, strlen(eq + 1), &clean_len);
        if (clean)
            json_object_set_new(vars, name, json_stringn(clean, clean_len));
        free(clean);
    }
    json_t *request = json_pack("{s:I, s:s%, s:o}", "id", (json_int_t)call->id, "code", call->code,
                                call->code_len, "env", vars);
    if (request && call->cwd)
        json_object_set_new(request, "cwd", json_string(call->cwd));
    char *text = request ? json_dumps(request, JSON_COMPACT) : NULL;
    json_decref(request);
    if (!text)
        return NULL;
    size_t n = strlen(text);
    char *line = realloc(text, n + 2);
    if (!line) {
        free(text);
        return NULL;
    }
    line[n] = '\n';
    line[n + 1] = 0;
    *len = n + 1;
    return line;
}

char *rbx_kernel_wire_request(rbx_kernel_dialect dialect, const rbx_kernel_wire_call *call,
                              size_t *len)
{
    return dialect == RBX_KERNEL_BASH ? bash_request(call, len) : json_request(call, len);
}

static bool parse_bash(const char *line, rbx_kernel_event *event)
{
    long long id;
    int status;
    if (sscanf(line, "B %lld", &id) == 1) {
        event->type = RBX_KERNEL_EVENT_START;
        event->id = id;
        return true;
    }
    if (sscanf(line, "D %lld %d", &id, &status) == 2) {
        event->type = RBX_KERNEL_EVENT_DONE;
        event->id = id;
        event->exit_code = status;
        event->status = status == 0     ? RBX_KERNEL_OK
                        : status == 130 ? RBX_KERNEL_INTERRUPTED
                                        : RBX_KERNEL_ERROR;
        return true;
    }
    if (sscanf(line, "S %lld", &id) == 1) {
        event->type = RBX_KERNEL_EVENT_DONE;
        event->id = id;
        event->exit_code = 2;
        event->status = RBX_KERNEL_SYNTAX;
        return true;
    }
    return false;
}

static const struct {
    const char *name;
    rbx_kernel_status status;
} statuses[] = {{"ok", RBX_KERNEL_OK},
                {"error", RBX_KERNEL_ERROR},
                {"syntax", RBX_KERNEL_SYNTAX},
                {"interrupted", RBX_KERNEL_INTERRUPTED},
                {"exit", RBX_KERNEL_EXIT}};

static bool parse_json(const char *line, size_t len, rbx_kernel_event *event)
{
    json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
    const char *type = json_string_value(json_object_get(root, "type"));
    bool ok = false;
    if (type && !strcmp(type, "start")) {
        event->type = RBX_KERNEL_EVENT_START;
        event->id = json_integer_value(json_object_get(root, "id"));
        ok = json_is_integer(json_object_get(root, "id"));
    } else if (type && !strcmp(type, "display")) {
        event->type = RBX_KERNEL_EVENT_DISPLAY;
        event->output = rbx_shown_output(root);
        ok = event->output != NULL;
    } else if (type && !strcmp(type, "done")) {
        const char *status = json_string_value(json_object_get(root, "status"));
        for (size_t i = 0; status && i < sizeof statuses / sizeof statuses[0]; i++)
            if (!strcmp(status, statuses[i].name)) {
                event->status = statuses[i].status;
                ok = true;
            }
        event->type = RBX_KERNEL_EVENT_DONE;
        event->id = json_integer_value(json_object_get(root, "id"));
        event->execution_count = json_integer_value(json_object_get(root, "execution_count"));
        json_t *code = json_object_get(root, "exit_code");
        event->exit_code = json_is_integer(code)                ? (int)json_integer_value(code)
                           : event->status == RBX_KERNEL_OK     ? 0
                           : event->status == RBX_KERNEL_SYNTAX ? 2
                                                                : 1;
        const char *exception = json_string_value(json_object_get(root, "exception"));
        snprintf(event->exception, sizeof event->exception, "%s", exception ? exception : "");
    }
    json_decref(root);
    return ok;
}

bool rbx_kernel_wire_parse(rbx_kernel_dialect dialect, const char *line, size_t len,
                           rbx_kernel_event *event)
{
    memset(event, 0, sizeof *event);
    event->type = RBX_KERNEL_EVENT_OTHER;
    return dialect == RBX_KERNEL_BASH ? parse_bash(line, event) : parse_json(line, len, event);
}

void rbx_kernel_event_free(rbx_kernel_event *event)
{
    json_decref(event->output);
    event->output = NULL;
}
