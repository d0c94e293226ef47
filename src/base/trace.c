/* The phase trace. See trace.h. */
#include "base/trace.h"

#include <jansson.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static const char *const phase_names[RBX_PHASE_COUNT] = {
    "start",       "validate_us", "env_us",        "session_us", "scratch_us",
    "template_us", "clone_us",    "release_us",    "cgroup_us",  "mounts_us",
    "fork_us",     "exec_us",     "first_byte_us", "exit_us",    "teardown_us",
};

rbx_trace *rbx_trace_new(void)
{
    void *page =
        mmap(NULL, sizeof(rbx_trace), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return page == MAP_FAILED ? NULL : page;
}

void rbx_trace_free(rbx_trace *trace)
{
    if (trace)
        munmap(trace, sizeof *trace);
}

void rbx_trace_mark(rbx_trace *trace, rbx_phase phase)
{
    if (!trace)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    trace->at_us[phase] = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

char *rbx_trace_json(const rbx_trace *trace)
{
    json_t *obj = json_object();
    int64_t previous = trace->at_us[RBX_PHASE_START];
    for (int phase = RBX_PHASE_START + 1; phase < RBX_PHASE_COUNT; phase++) {
        if (!trace->at_us[phase])
            continue;
        json_object_set_new(obj, phase_names[phase], json_integer(trace->at_us[phase] - previous));
        previous = trace->at_us[phase];
    }
    if (trace->egress_us)
        json_object_set_new(obj, "egress_us", json_integer(trace->egress_us));
    if (trace->network_us)
        json_object_set_new(obj, "network_us", json_integer(trace->network_us));
    json_object_set_new(obj, "total_us", json_integer(previous - trace->at_us[RBX_PHASE_START]));
    char *text = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(obj);
    return text;
}
