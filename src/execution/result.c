/* Rendering results and streaming events as JSON. The field names are a
 * contract: the CLI, the HTTP and MCP servers and the clients all emit
 * exactly this object. */

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include "runbox.h"

static json_t *text(const char *data, size_t len)
{
    /* Results are sanitized already; events are not. Both end up valid. */
    size_t clean_len;
    char *clean = rbx_utf8_sanitize(data ? data : "", data ? len : 0, &clean_len);
    json_t *value = clean ? json_stringn(clean, clean_len) : NULL;
    free(clean);
    return value ? value : json_string("");
}

static json_t *nullable_string(const char *value)
{
    return value ? json_string(value) : json_null();
}

/* A refused domain name is what the code asked for: any bytes, made valid. */
static json_t *denied_destinations(const rbx_result *result)
{
    json_t *list = json_array();
    size_t count = result->egress_denied_count;
    if (count > RBX_EGRESS_REPORT_MAX)
        count = RBX_EGRESS_REPORT_MAX;
    for (size_t i = 0; i < count; i++) {
        const char *to = result->egress_denied_to[i];
        json_array_append_new(list, text(to, strnlen(to, sizeof result->egress_denied_to[i])));
    }
    return list;
}

static char *render_result(const rbx_result *result, bool as_event)
{
    json_t *obj = json_object();
    if (as_event)
        json_object_set_new(obj, "type", json_string("result"));
    json_object_set_new(obj, "success", json_boolean(result->success));
    json_object_set_new(obj, "output", text(result->output, result->output_len));
    json_object_set_new(obj, "error", text(result->error, result->error_len));
    json_object_set_new(obj, "exit_code", json_integer(result->exit_code));
    json_object_set_new(obj, "duration_ms", json_integer(result->duration_ms));
    json_object_set_new(obj, "session_id", json_string(result->session_id));
    json_object_set_new(obj, "language", nullable_string(result->language));
    json_object_set_new(obj, "image", json_string(result->image));
    json_object_set_new(obj, "image_note", nullable_string(result->image_note));
    json_object_set_new(obj, "error_type", nullable_string(result->error_type));
    json_object_set_new(obj, "exception", nullable_string(result->exception));
    json_object_set_new(obj, "timed_out", json_boolean(result->timed_out));
    json_object_set_new(obj, "cancelled", json_boolean(result->cancelled));
    json_t *truncated = json_object();
    json_object_set_new(truncated, "stdout", json_integer((json_int_t)result->truncated_stdout));
    json_object_set_new(truncated, "stderr", json_integer((json_int_t)result->truncated_stderr));
    json_object_set_new(truncated, "results", json_integer((json_int_t)result->truncated_results));
    json_object_set_new(obj, "truncated", truncated);
    json_object_set_new(obj, "signal", result->signal ? json_integer(result->signal) : json_null());
    json_object_set_new(obj, "cpu_ms", json_integer(result->cpu_ms));
    json_object_set_new(obj, "peak_memory_kb", json_integer(result->peak_memory_kb));
    json_object_set_new(obj, "limits", nullable_string(result->limits));
    json_object_set_new(obj, "cpus", result->cpus > 0 ? json_real(result->cpus) : json_null());
    json_object_set_new(obj, "network", json_boolean(result->network));
    json_object_set_new(obj, "egress_denied", json_integer((json_int_t)result->egress_denied));
    json_object_set_new(obj, "egress_denied_to", denied_destinations(result));
    json_object_set_new(obj, "pooled", json_boolean(result->pooled));
    json_object_set_new(obj, "install",
                        result->has_install
                            ? json_pack("{s:s, s:b, s:I}", "environment", result->install_env,
                                        "reused", result->install_reused, "duration_ms",
                                        (json_int_t)result->install_ms)
                            : json_null());
    json_t *results = result->results ? json_loads(result->results, 0, NULL) : NULL;
    json_object_set_new(obj, "stateful", json_boolean(result->stateful));
    json_object_set_new(obj, "results", results ? results : json_array());
    json_object_set_new(obj, "execution_count",
                        result->stateful ? json_integer(result->execution_count) : json_null());
    json_object_set_new(obj, "kernel_restarted", json_boolean(result->kernel_restarted));
    json_object_set_new(obj, "kernel_restored", json_boolean(result->kernel_restored));
    json_object_set_new(obj, "restore_ms", result->kernel_restored
                                               ? json_integer(result->restore_ms)
                                               : json_null());
    json_object_set_new(obj, "restart_reason",
                        result->kernel_restarted && result->restart_reason[0]
                            ? json_string(result->restart_reason)
                            : json_null());
    if (result->trace)
        json_object_set_new(obj, "trace", json_loads(result->trace, 0, NULL));
    char *out = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(obj);
    return out;
}

char *rbx_result_to_json(const rbx_result *result)
{
    return render_result(result, false);
}

char *rbx_result_event_to_json(const rbx_result *result)
{
    return render_result(result, true);
}

char *rbx_event_to_json(rbx_stream stream, const char *data, size_t len)
{
    if (stream == RBX_DISPLAY) {
        /* {"kind", "data"}: one rich output, as it will be in "results". */
        json_t *output = json_loadb(data, len, 0, NULL);
        json_t *obj =
            json_pack("{s:s, s:O, s:O}", "type", "display", "kind", json_object_get(output, "kind"),
                      "data", json_object_get(output, "data"));
        json_decref(output);
        char *out = obj ? json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(obj);
        return out;
    }
    json_t *obj = json_object();
    json_object_set_new(obj, "type", json_string(stream == RBX_STDOUT ? "stdout" : "stderr"));
    json_object_set_new(obj, "data", text(data, len));
    char *out = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(obj);
    return out;
}

char *rbx_image_info_to_json(const rbx_image_info *info)
{
    json_t *languages = json_array();
    for (size_t i = 0; i < rbx_runtime_count() && i < 32; i++)
        if (info->languages & (1u << i))
            json_array_append_new(languages, json_string(rbx_runtime_name(i)));
    /* The host's /usr is no stored tree: it has no digest, size or date. */
    bool stored = info->digest[0] != 0;
    json_t *obj =
        json_pack("{s:s, s:o, s:o, s:o, s:s, s:s, s:b, s:b, s:o}", "name", info->name, "digest",
                  stored ? json_string(info->digest) : json_null(), "size_bytes",
                  stored ? json_integer((json_int_t)info->size_bytes) : json_null(), "created",
                  stored ? json_integer((json_int_t)info->created_unix) : json_null(), "source",
                  info->source, "packages", info->packages, "default", info->is_default, "allowed",
                  info->allowed, "languages", languages);
    /* Which Node.js: the official build it was made with, else unknown
     * (Debian's nodejs package, when "packages" names it). */
    if (obj)
        json_object_set_new(obj, "node", info->node[0] ? json_string(info->node) : json_null());
    char *out = obj ? json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(obj);
    return out;
}

char *rbx_session_info_to_json(const rbx_session_info *info)
{
    json_t *kernels = json_array();
    for (size_t i = 0; i < info->kernel_count; i++) {
        const rbx_kernel_info *k = &info->kernels[i];
        /* A hibernated kernel has no process and no memory: its
         * checkpoint's size on disk instead. */
        json_t *kernel = json_pack(
            "{s:s, s:s, s:i, s:I, s:I, s:I}", "language", k->language, "state",
            k->hibernated ? "hibernated" : k->busy ? "busy" : "idle", "owner_pid", k->owner_pid,
            "started", (json_int_t)k->started_unix, "idle_s", (json_int_t)k->idle_s,
            "memory_bytes", (json_int_t)k->memory_bytes);
        if (kernel && k->hibernated) {
            json_object_set_new(kernel, "checkpoint_bytes",
                                json_integer((json_int_t)k->checkpoint_bytes));
            json_object_set_new(kernel, "checkpoint_ms", json_integer(k->checkpoint_ms));
        }
        json_array_append_new(kernels, kernel);
    }
    json_t *obj = json_pack(
        "{s:s, s:I, s:I, s:I, s:b, s:o}", "session_id", info->id, "created",
        (json_int_t)info->created_unix, "last_used", (json_int_t)info->last_used_unix, "disk_bytes",
        (json_int_t)info->disk_bytes, "running", info->running, "kernels", kernels);
    char *out = obj ? json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(obj);
    return out;
}
