/* The egress policy's parsers of untrusted bytes: the operator's file and
 * lists (loaded as the engine loads them, the input in a memfd named
 * /proc/self/fd/N), a request's egress_allow entries, the names the
 * resolver judges, and DNS queries from a sandbox (the question read, a
 * refusal written in place). The first byte picks which. */
#include "fuzz.h"

#include "egress.h"
#include "sandbox/egress_dns.h"

#include <sys/mman.h>
#include <unistd.h>

static void policy_file(const uint8_t *data, size_t size)
{
    int fd = memfd_create("egress", MFD_CLOEXEC);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size)
        abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    rbx_config config;
    rbx_config_defaults(&config);
    config.egress_file = path;
    config.egress_resolver = "127.0.0.1";
    rbx_egress_policy policy;
    rbx_error err = {0};
    rbx_status status = rbx_egress_policy_load(&policy, &config, &err);
    close(fd);
    if (status != RBX_OK) {
        FUZZ_CHECK(status == RBX_EINVAL && err.message[0]);
        return;
    }
    for (size_t i = 0; i < policy.allow.cidr_count; i++)
        FUZZ_CHECK(policy.allow.cidrs[i].prefix <=
                   (policy.allow.cidrs[i].family == AF_INET ? 32 : 128));
    char text[600];
    rbx_egress_policy_describe(&policy, text, sizeof text);
    rbx_egress_plan plan = {.policy = &policy};
    (void)rbx_egress_judge_name(&plan, "pypi.org");
    rbx_egress_policy_free(&policy);
}

/* The input as a request's entries, split at newlines. */
static void request_entries(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1);
    memcpy(copy, data, size);
    copy[size] = 0;
    const char *entries[RBX_EGRESS_ALLOW_MAX + 8];
    size_t n = 0;
    for (char *line = copy, *next; line && n < sizeof entries / sizeof *entries; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        entries[n++] = line;
    }
    rbx_request request;
    rbx_request_init(&request);
    request.egress_allow = entries;
    request.egress_allow_count = n;
    rbx_egress_list list = {0};
    rbx_error err = {0};
    if (rbx_egress_narrowing_parse(&list, &request, &err) == RBX_OK) {
        FUZZ_CHECK(list.cidr_count + list.domain_count == n);
        rbx_egress_policy policy = {0};
        rbx_egress_plan plan = {.policy = &policy, .has_narrowing = true, .narrowing = list};
        for (size_t i = 0; i < list.domain_count; i++)
            FUZZ_CHECK(rbx_egress_judge_name(&plan, list.domains[i].wildcard ? "x.y.z"
                                                                             : list.domains[i].name)
                           .refused == false);
        rbx_egress_list_free(&list);
    } else {
        FUZZ_CHECK(err.status == RBX_EINVAL && strstr(err.message, "egress_allow"));
        FUZZ_CHECK(!list.cidrs && !list.domains);
    }
    free(copy);
}

static void dns_query(const uint8_t *data, size_t size)
{
    uint8_t *msg = malloc(size ? size : 1);
    memcpy(msg, data, size);
    char name[1025];
    if (rbx_egress_dns_question(msg, size, name, sizeof name)) {
        FUZZ_CHECK(strlen(name) < sizeof name);
        rbx_egress_policy policy = {.allowlist_only = true};
        rbx_egress_plan plan = {.policy = &policy};
        FUZZ_CHECK(rbx_egress_judge_name(&plan, name).refused);
        size_t keep = rbx_egress_dns_refusal(msg, size);
        FUZZ_CHECK(keep >= 12 && keep <= size);
        FUZZ_CHECK((msg[3] & 0x0f) == 5); /* REFUSED */
    }
    free(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    switch (data[0] % 3) {
    case 0:
        policy_file(data + 1, size - 1);
        break;
    case 1:
        request_entries(data + 1, size - 1);
        break;
    default:
        dns_query(data + 1, size - 1);
    }
    return 0;
}
