/* /metrics in the Prometheus text format, and /healthz. */
#include "http/http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Languages and outcomes are small fixed sets (the runtime table, the
 * engine's error types): a handful of series. */
#define KINDS_MAX 64
#define STATUS_MAX 600

static const double duration_buckets[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
#define BUCKET_COUNT (sizeof duration_buckets / sizeof *duration_buckets)

struct metrics {
    pthread_mutex_t lock;
    struct {
        char language[32];
        char outcome[48];
        uint64_t count;
    } kinds[KINDS_MAX];
    size_t kind_count;
    uint64_t buckets[BUCKET_COUNT]; /* not cumulative: summed when rendered */
    uint64_t duration_count;
    double duration_sum_s;
    uint64_t installs;
    uint64_t responses[STATUS_MAX];
};

metrics *http_metrics_new(void)
{
    metrics *m = calloc(1, sizeof *m);
    if (m)
        pthread_mutex_init(&m->lock, NULL);
    return m;
}

void http_metrics_free(metrics *m)
{
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static void count_kind(metrics *m, const char *language, const char *outcome)
{
    size_t i = 0;
    while (i < m->kind_count &&
           (strcmp(m->kinds[i].language, language) || strcmp(m->kinds[i].outcome, outcome)))
        i++;
    if (i == m->kind_count) {
        if (i == KINDS_MAX)
            return;
        snprintf(m->kinds[i].language, sizeof m->kinds[i].language, "%s", language);
        snprintf(m->kinds[i].outcome, sizeof m->kinds[i].outcome, "%s", outcome);
        m->kind_count++;
    }
    m->kinds[i].count++;
}

void http_metrics_execution(metrics *m, const char *language, const char *outcome,
                            int64_t duration_ms)
{
    double seconds = (double)duration_ms / 1000.0;
    pthread_mutex_lock(&m->lock);
    count_kind(m, language, outcome);
    size_t b = 0;
    while (b < BUCKET_COUNT && seconds > duration_buckets[b])
        b++;
    if (b < BUCKET_COUNT)
        m->buckets[b]++;
    m->duration_count++;
    m->duration_sum_s += seconds;
    pthread_mutex_unlock(&m->lock);
}

void http_metrics_install(metrics *m)
{
    pthread_mutex_lock(&m->lock);
    m->installs++;
    pthread_mutex_unlock(&m->lock);
}

void http_metrics_response(metrics *m, unsigned status)
{
    pthread_mutex_lock(&m->lock);
    if (status < STATUS_MAX)
        m->responses[status]++;
    pthread_mutex_unlock(&m->lock);
}

static void render_executions(const metrics *m, FILE *out)
{
    fprintf(out, "# HELP runbox_executions_total Executions that produced a result, by language "
                 "and outcome (the error_type, or ok).\n# TYPE runbox_executions_total counter\n");
    for (size_t i = 0; i < m->kind_count; i++)
        fprintf(out, "runbox_executions_total{language=\"%s\",outcome=\"%s\"} %llu\n",
                m->kinds[i].language, m->kinds[i].outcome, (unsigned long long)m->kinds[i].count);
    fprintf(out, "# HELP runbox_execution_duration_seconds Wall time of executions.\n"
                 "# TYPE runbox_execution_duration_seconds histogram\n");
    uint64_t cumulative = 0;
    for (size_t b = 0; b < BUCKET_COUNT; b++) {
        cumulative += m->buckets[b];
        fprintf(out, "runbox_execution_duration_seconds_bucket{le=\"%g\"} %llu\n",
                duration_buckets[b], (unsigned long long)cumulative);
    }
    fprintf(out, "runbox_execution_duration_seconds_bucket{le=\"+Inf\"} %llu\n",
            (unsigned long long)m->duration_count);
    fprintf(out, "runbox_execution_duration_seconds_sum %.3f\n", m->duration_sum_s);
    fprintf(out, "runbox_execution_duration_seconds_count %llu\n",
            (unsigned long long)m->duration_count);
    fprintf(out,
            "# HELP runbox_installs_total Executions that had requirements to install.\n"
            "# TYPE runbox_installs_total counter\nrunbox_installs_total %llu\n",
            (unsigned long long)m->installs);
}

static void render_http(const metrics *m, FILE *out)
{
    fprintf(out, "# HELP runbox_http_responses_total HTTP responses by status code.\n"
                 "# TYPE runbox_http_responses_total counter\n");
    for (unsigned s = 0; s < STATUS_MAX; s++)
        if (m->responses[s])
            fprintf(out, "runbox_http_responses_total{code=\"%u\"} %llu\n", s,
                    (unsigned long long)m->responses[s]);
}

/* The pool of prepared sandboxes (rbx_engine_start_pool). */
static void render_pool(http_server *server, FILE *out)
{
    rbx_pool_stats pool;
    rbx_engine_pool_stats(server->engine, &pool);
    fprintf(out,
            "# HELP runbox_pool_sandboxes Prepared sandboxes by state (ready: waiting for an "
            "execution).\n# TYPE runbox_pool_sandboxes gauge\n"
            "runbox_pool_sandboxes{state=\"ready\"} %zu\n"
            "runbox_pool_sandboxes{state=\"preparing\"} %zu\n"
            "runbox_pool_sandboxes{state=\"serving\"} %zu\n"
            "# HELP runbox_pool_target Prepared sandboxes the pool aims to keep ready.\n"
            "# TYPE runbox_pool_target gauge\nrunbox_pool_target %zu\n"
            "# HELP runbox_pool_max The operator's cap on prepared sandboxes (--pool).\n"
            "# TYPE runbox_pool_max gauge\nrunbox_pool_max %zu\n"
            "# HELP runbox_pool_env_shelves Dependency environments the pool keeps "
            "sandboxes for (each comes with demand and goes when idle).\n"
            "# TYPE runbox_pool_env_shelves gauge\nrunbox_pool_env_shelves %zu\n"
            "# HELP runbox_pool_idle_memory_bytes Memory the waiting sandboxes hold.\n"
            "# TYPE runbox_pool_idle_memory_bytes gauge\nrunbox_pool_idle_memory_bytes %llu\n"
            "# HELP runbox_pool_memory_cap_bytes The cap on it (--pool-memory).\n"
            "# TYPE runbox_pool_memory_cap_bytes gauge\nrunbox_pool_memory_cap_bytes %llu\n"
            "# HELP runbox_pool_takes_total One-off executions that asked the pool, by whether "
            "a prepared sandbox served them (a miss starts cold).\n"
            "# TYPE runbox_pool_takes_total counter\n"
            "runbox_pool_takes_total{served=\"true\"} %llu\n"
            "runbox_pool_takes_total{served=\"false\"} %llu\n"
            "# HELP runbox_pool_prepared_total Sandboxes prepared, failed to prepare, or "
            "retired unused (idle, old, over the memory cap).\n"
            "# TYPE runbox_pool_prepared_total counter\n"
            "runbox_pool_prepared_total{outcome=\"ready\"} %llu\n"
            "runbox_pool_prepared_total{outcome=\"failed\"} %llu\n"
            "runbox_pool_prepared_total{outcome=\"retired\"} %llu\n"
            "# HELP runbox_cgroups_total Executions' cgroups kept when they ended cleanly, "
            "and given out again to later executions.\n"
            "# TYPE runbox_cgroups_total counter\n"
            "runbox_cgroups_total{event=\"kept\"} %llu\n"
            "runbox_cgroups_total{event=\"reused\"} %llu\n"
            "# HELP runbox_scratch_spaces_total Executions' scratch spaces kept when they were "
            "left as they were made, and given out again to later executions.\n"
            "# TYPE runbox_scratch_spaces_total counter\n"
            "runbox_scratch_spaces_total{event=\"kept\"} %llu\n"
            "runbox_scratch_spaces_total{event=\"reused\"} %llu\n",
            pool.ready, pool.preparing, pool.serving, pool.target, pool.max, pool.env_shelves,
            (unsigned long long)pool.idle_memory_bytes, (unsigned long long)pool.memory_cap_bytes,
            (unsigned long long)pool.taken, (unsigned long long)pool.missed,
            (unsigned long long)pool.prepared, (unsigned long long)pool.failed,
            (unsigned long long)pool.retired, (unsigned long long)pool.cgroups_kept,
            (unsigned long long)pool.cgroups_reused, (unsigned long long)pool.scratch_kept,
            (unsigned long long)pool.scratch_reused);
}

/* The bounds on what clients hold (gate.c), and what they turned away. */
static void render_connections(http_server *server, FILE *out)
{
    const serve_options *o = &server->options;
    gate_stats g;
    http_gate_stats(server->gate, &g);
    fprintf(out,
            "# HELP runbox_connections Open client connections: waiting (for their request's "
            "headers, in the gate) or served (a request being read or answered).\n"
            "# TYPE runbox_connections gauge\n"
            "runbox_connections{state=\"waiting\"} %u\nrunbox_connections{state=\"served\"} %u\n"
            "# HELP runbox_connection_addresses Client addresses with open connections.\n"
            "# TYPE runbox_connection_addresses gauge\nrunbox_connection_addresses %u\n"
            "# HELP runbox_connections_max Connections open at once, over all listeners "
            "(--max-connections).\n# TYPE runbox_connections_max gauge\n"
            "runbox_connections_max %u\n"
            "# HELP runbox_connections_per_address_max Of them from one address, an IPv6 "
            "client by its /64 (--max-connections-per-address).\n"
            "# TYPE runbox_connections_per_address_max gauge\n"
            "runbox_connections_per_address_max %u\n"
            "# HELP runbox_header_timeout_seconds How long a connection may take to send its "
            "request line and headers.\n# TYPE runbox_header_timeout_seconds gauge\n"
            "runbox_header_timeout_seconds %u\n"
            "# HELP runbox_client_timeout_seconds How long a request's body may take, and how "
            "long a client may stay silent.\n# TYPE runbox_client_timeout_seconds gauge\n"
            "runbox_client_timeout_seconds %u\n"
            "# HELP runbox_header_bytes_max The largest request head (request line and "
            "headers) taken.\n# TYPE runbox_header_bytes_max gauge\n"
            "runbox_header_bytes_max %d\n"
            "# HELP runbox_connections_closed_total Connections refused or closed by the "
            "bounds: per_address (429), full (503: every connection was a request being "
            "served), evicted (the longest waiting, to make room), header_timeout, "
            "invalid_head (answered 400, 414, 431 or 505).\n"
            "# TYPE runbox_connections_closed_total counter\n"
            "runbox_connections_closed_total{reason=\"per_address\"} %llu\n"
            "runbox_connections_closed_total{reason=\"full\"} %llu\n"
            "runbox_connections_closed_total{reason=\"evicted\"} %llu\n"
            "runbox_connections_closed_total{reason=\"header_timeout\"} %llu\n"
            "runbox_connections_closed_total{reason=\"invalid_head\"} %llu\n",
            g.waiting, g.served, g.addresses, o->max_connections, o->max_per_address,
            o->header_timeout_s < o->client_timeout_s ? o->header_timeout_s : o->client_timeout_s,
            o->client_timeout_s, HTTP_HEAD_MAX, (unsigned long long)g.refused_per_address,
            (unsigned long long)g.refused_full, (unsigned long long)g.evicted,
            (unsigned long long)g.timed_out, (unsigned long long)g.invalid_head);
}

enum MHD_Result http_handle_metrics(http_request *req)
{
    http_server *server = req->server;
    unsigned running, queued;
    http_admission_counts(&server->admission, &running, &queued);
    size_t processes, frozen, hibernated;
    rbx_processes_count(server->engine, &processes, &frozen, &hibernated);
    char *data = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&data, &len);
    if (!out)
        return MHD_NO;
    pthread_mutex_lock(&server->metrics->lock);
    render_executions(server->metrics, out);
    render_http(server->metrics, out);
    pthread_mutex_unlock(&server->metrics->lock);
    fprintf(out,
            "# HELP runbox_executions_running Executions running now.\n"
            "# TYPE runbox_executions_running gauge\nrunbox_executions_running %u\n"
            "# HELP runbox_executions_queued Executions waiting for their turn.\n"
            "# TYPE runbox_executions_queued gauge\nrunbox_executions_queued %u\n"
            /* Not under --max-running: processes are long-lived, as terminals;
             * RBX_PROCESSES_MAX per session and the engine's cap bound them. */
            "# HELP runbox_processes_running Processes running now beside executions "
            "(E2B's commands and terminals).\n"
            "# TYPE runbox_processes_running gauge\nrunbox_processes_running %zu\n"
            "# HELP runbox_processes_frozen Processes of paused E2B sandboxes, frozen until "
            "resumed.\n"
            "# TYPE runbox_processes_frozen gauge\nrunbox_processes_frozen %zu\n"
            "# HELP runbox_processes_hibernated Processes of paused E2B sandboxes, on disk "
            "until resumed (their memory freed).\n"
            "# TYPE runbox_processes_hibernated gauge\nrunbox_processes_hibernated %zu\n",
            running, queued, processes, frozen, hibernated);
    render_pool(server, out);
    render_connections(server, out);
    mcp_sessions_stats mcp;
    http_mcp_sessions_stats(server->mcp, &mcp);
    fprintf(out,
            "# HELP runbox_mcp_sessions MCP sessions open at /mcp.\n"
            "# TYPE runbox_mcp_sessions gauge\nrunbox_mcp_sessions %u\n"
            "# HELP runbox_mcp_sessions_max MCP sessions at once, and from one address.\n"
            "# TYPE runbox_mcp_sessions_max gauge\nrunbox_mcp_sessions_max %u\n"
            "runbox_mcp_sessions_max{scope=\"address\"} %u\n"
            "# HELP runbox_mcp_sessions_ended_total MCP sessions ended, by why.\n"
            "# TYPE runbox_mcp_sessions_ended_total counter\n"
            "runbox_mcp_sessions_ended_total{reason=\"expired\"} %llu\n"
            "runbox_mcp_sessions_ended_total{reason=\"evicted\"} %llu\n"
            "runbox_mcp_sessions_ended_total{reason=\"deleted\"} %llu\n"
            "# HELP runbox_mcp_sessions_opened_total MCP sessions opened.\n"
            "# TYPE runbox_mcp_sessions_opened_total counter\n"
            "runbox_mcp_sessions_opened_total %llu\n"
            "# HELP runbox_mcp_sessions_refused_total MCP sessions refused: all busy.\n"
            "# TYPE runbox_mcp_sessions_refused_total counter\n"
            "runbox_mcp_sessions_refused_total %llu\n",
            mcp.open, server->options.mcp_max_sessions, server->options.mcp_max_per_address,
            (unsigned long long)mcp.expired, (unsigned long long)mcp.evicted,
            (unsigned long long)mcp.deleted, (unsigned long long)mcp.opened,
            (unsigned long long)mcp.refused);
    fprintf(out,
            "# HELP runbox_kernels Live stateful kernels of this server.\n"
            "# TYPE runbox_kernels gauge\nrunbox_kernels %zu\n",
            rbx_kernel_count(server->engine));
    if (fclose(out) != 0 || !data) {
        free(data);
        return MHD_NO;
    }
    struct MHD_Response *response =
        MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    if (!response) {
        free(data);
        return MHD_NO;
    }
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8");
    return http_reply(req, MHD_HTTP_OK, response, len);
}

enum MHD_Result http_handle_health(http_request *req)
{
    http_server *server = req->server;
    unsigned running, queued;
    http_admission_counts(&server->admission, &running, &queued);
    /* Draining: not ready, so a balancer or Kubernetes sends nothing new. */
    bool draining = atomic_load(&server->drain_requested);
    return http_reply_json(req, draining ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK,
                           json_pack("{s:s, s:s, s:I, s:I, s:I, s:I}", "status",
                                     draining ? "draining" : "ok", "version",
                                     RBX_VERSION, "running", (json_int_t)running, "queued",
                                     (json_int_t)queued, "max_running",
                                     (json_int_t)server->options.max_running, "max_queue",
                                     (json_int_t)server->options.max_queue),
                           NULL, NULL);
}
