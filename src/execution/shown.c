/* Rich outputs a program shows (see shown.h). The program writes them, so
 * nothing in them is trusted: a line is kept only when it is a display
 * event, and only as long as all kept so far stay under RBX_RESULTS_CAP; a
 * line longer than anything that could be kept is skipped as it comes, so
 * a program holds no more of runbox's memory than its results may. */
#include "execution/shown.h"

#include <stdlib.h>
#include <string.h>

#define LINE_MAX_BYTES (RBX_RESULTS_CAP + ((size_t)1 << 20))

void rbx_shown_init(rbx_shown *shown, rbx_output_fn on_output, void *user)
{
    memset(shown, 0, sizeof *shown);
    shown->results = json_array();
    shown->on_output = on_output;
    shown->user = user;
}

void rbx_shown_free(rbx_shown *shown)
{
    json_decref(shown->results);
    free(shown->line);
    shown->results = NULL;
    shown->line = NULL;
}

json_t *rbx_shown_output(json_t *event)
{
    const char *type = json_string_value(json_object_get(event, "type"));
    const char *kind = json_string_value(json_object_get(event, "kind"));
    json_t *data = json_object_get(event, "data");
    if (!type || strcmp(type, "display") || !kind ||
        (strcmp(kind, "display_data") && strcmp(kind, "execute_result")) || !json_is_object(data))
        return NULL;
    return json_pack("{s:s, s:O}", "kind", kind, "data", data);
}

void rbx_shown_add(rbx_shown *shown, json_t *output)
{
    char *text = json_dumps(output, JSON_COMPACT);
    size_t len = text ? strlen(text) : 0;
    if (text && shown->results && shown->bytes + len <= RBX_RESULTS_CAP) {
        shown->bytes += len;
        json_array_append(shown->results, output);
        if (shown->on_output && shown->on_output(shown->user, RBX_DISPLAY, text, len) != 0)
            shown->cancelled = true;
    } else {
        shown->dropped += len;
    }
    free(text);
}

static void take_line(rbx_shown *shown, const char *line, size_t len)
{
    json_t *event = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
    json_t *output = rbx_shown_output(event);
    if (output)
        rbx_shown_add(shown, output);
    else
        shown->dropped += len;
    json_decref(output);
    json_decref(event);
}

void rbx_shown_feed(rbx_shown *shown, const char *data, size_t len)
{
    while (len) {
        const char *newline = memchr(data, '\n', len);
        size_t part = newline ? (size_t)(newline - data) : len;
        if (shown->skipping || shown->line_len + part + 1 > LINE_MAX_BYTES) {
            shown->dropped += shown->line_len + part;
            shown->line_len = 0;
            shown->skipping = !newline;
        } else if (newline && !shown->line_len) {
            take_line(shown, data, part); /* whole in this chunk: no copy */
        } else {
            if (shown->line_len + part + 1 > shown->line_cap) {
                size_t cap = (shown->line_len + part + 1) * 2;
                cap = cap < LINE_MAX_BYTES ? cap : LINE_MAX_BYTES;
                char *grown = realloc(shown->line, cap);
                if (!grown) {
                    shown->dropped += shown->line_len + part;
                    shown->line_len = 0;
                    shown->skipping = !newline;
                    goto next;
                }
                shown->line = grown;
                shown->line_cap = cap;
            }
            memcpy(shown->line + shown->line_len, data, part);
            shown->line_len += part;
            if (newline) {
                take_line(shown, shown->line, shown->line_len);
                shown->line_len = 0;
            }
        }
    next:
        if (!newline)
            return;
        data = newline + 1;
        len -= part + 1;
    }
}

rbx_status rbx_shown_finish(rbx_shown *shown, rbx_result *result)
{
    shown->dropped += shown->line_len;
    shown->line_len = 0;
    result->truncated_results = shown->dropped;
    free(result->results);
    result->results = shown->results ? json_dumps(shown->results, JSON_COMPACT) : NULL;
    return result->results ? RBX_OK : RBX_ESYSTEM;
}
