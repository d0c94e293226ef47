/* What E2B's SDKs read of a sandbox (E2B-SANDBOX-PROTOCOL.md section 2):
 * the Sandbox of create and connect, ListedSandbox, SandboxDetail, and
 * times as RFC 3339. The Python SDK requires every field it parses. */
#include "http/http.h"

#include <string.h>
#include <time.h>

/* Deprecated in E2B's API, still required by the Python SDK. */
#define CLIENT_ID "runbox"

json_t *e2b_time_json(int64_t ms)
{
    time_t seconds = (time_t)(ms / 1000);
    struct tm tm;
    char text[64];
    gmtime_r(&seconds, &tm);
    size_t n = strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(text + n, sizeof text - n, ".%03dZ", (int)(ms % 1000));
    return json_string(text);
}

/* The Sandbox of create and connect: how to reach it. */
json_t *e2b_sandbox_json(const e2b_sandbox *s)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:n}", "templateID", s->template_id,
                     "sandboxID", s->id, "clientID", CLIENT_ID, "envdVersion", E2B_ENVD_VERSION,
                     "envdAccessToken", s->envd_token, "trafficAccessToken", s->traffic_token,
                     "domain");
}

json_t *e2b_listed_json(http_server *server, const e2b_sandbox *s)
{
    const rbx_config *config = rbx_engine_config(server->engine);
    int cpus = (int)config->cpus < config->cpus ? (int)config->cpus + 1 : (int)config->cpus;
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:s, s:i, s:i, s:I, s:s, s:O}", "templateID",
                     s->template_id, "sandboxID", s->id, "clientID", CLIENT_ID, "startedAt",
                     e2b_time_json(s->started_ms), "endAt", e2b_time_json(s->end_ms),
                     "envdVersion", E2B_ENVD_VERSION, "cpuCount", cpus > 0 ? cpus : 1, "memoryMB",
                     (int)config->memory_mb, "diskSizeMB",
                     (json_int_t)(config->disk_cap_bytes / (1024 * 1024)), "state",
                     s->paused ? "paused" : "running", "metadata", s->metadata);
}

/* SandboxDetail: the listed fields and how to reach it. */
json_t *e2b_detail_json(http_server *server, const e2b_sandbox *s)
{
    json_t *detail = e2b_listed_json(server, s);
    json_object_set_new(detail, "domain", json_null());
    json_object_set_new(detail, "envdAccessToken", json_string(s->envd_token));
    json_object_set_new(detail, "allowInternetAccess",
                        s->network < 0 ? json_null() : json_boolean(s->network));
    if (s->network_settings)
        json_object_set(detail, "network", s->network_settings);
    json_object_set_new(detail, "lifecycle",
                        json_pack("{s:b, s:s}", "autoResume", 0, "onTimeout",
                                  s->auto_pause ? "pause" : "kill"));
    return detail;
}
