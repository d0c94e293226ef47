/* The egress policy's parsers of untrusted bytes: the operator's file and
 * lists (loaded as the engine loads them, the input in a memfd named
 * /proc/self/fd/N), a request's egress_allow entries, the names the
 * resolver judges, DNS queries from a sandbox (the question read, a
 * refusal written in place), and a resolver's answers (taken for the
 * answer to their own question, the addresses of the asked name's CNAME
 * chain, judged by the policy). The first byte picks which. */
#include "fuzz.h"

#include "egress/policy.h"
#include "egress/dns.h"

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
    rbx_egress_question question;
    if (rbx_egress_dns_question(msg, size, &question)) {
        FUZZ_CHECK(strlen(question.name) < sizeof question.name);
        rbx_egress_policy policy = {.allowlist_only = true};
        rbx_egress_plan plan = {.policy = &policy};
        FUZZ_CHECK(rbx_egress_judge_name(&plan, question.name).refused);
        size_t keep = rbx_egress_dns_refusal(msg, size);
        FUZZ_CHECK(keep >= 12 && keep <= size);
        FUZZ_CHECK((msg[3] & 0x0f) == 5); /* REFUSED */
    }
    free(msg);
}

/* The input as a resolver's answer; the question is its own (the response
 * flag cleared), so that the chain starts at a name the message has. */
static void dns_answer(const uint8_t *data, size_t size)
{
    uint8_t *query = malloc(size ? size : 1), *answer = malloc(size ? size : 1);
    memcpy(query, data, size);
    memcpy(answer, data, size);
    if (size > 2) {
        query[2] &= 0x7f;
        answer[2] |= 0x80;
    }
    rbx_egress_question question;
    if (rbx_egress_dns_question(query, size, &question)) {
        FUZZ_CHECK(rbx_egress_dns_answers(&question, answer, size));
        answer[0] ^= 1; /* another ID is not the answer */
        FUZZ_CHECK(!rbx_egress_dns_answers(&question, answer, size));
        answer[0] ^= 1;
        rbx_egress_list deny = {0};
        rbx_error err = {0};
        FUZZ_CHECK(rbx_egress_list_parse(&deny, "*.evil.test 10.0.0.0/8", "deny", &err) ==
                   RBX_OK);
        rbx_egress_policy policy = {.deny = deny};
        rbx_egress_plan plan = {.policy = &policy};
        rbx_egress_address found[300];
        size_t n = rbx_egress_dns_addresses(&question, answer, size, &deny, found, 300);
        FUZZ_CHECK(n <= 256); /* a message of 4096 bytes holds no more */
        for (size_t i = 0; i < n; i++) {
            FUZZ_CHECK(found[i].family == AF_INET || found[i].family == AF_INET6);
            bool admitted = rbx_egress_name_may_admit(&plan, found[i].family, found[i].addr);
            FUZZ_CHECK(!admitted || !rbx_egress_default_refuses(found[i].family, found[i].addr));
        }
        FUZZ_CHECK(rbx_egress_dns_addresses(&question, answer, size, NULL, found, 1) <= 1);
        rbx_egress_list_free(&deny);
    } else {
        rbx_egress_question none = {.type = 1, .qclass = 1};
        FUZZ_CHECK(rbx_egress_dns_addresses(&none, answer, size, NULL, (rbx_egress_address[1]){0},
                                            1) <= 1);
    }
    free(query);
    free(answer);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    switch (data[0] % 4) {
    case 0:
        policy_file(data + 1, size - 1);
        break;
    case 1:
        request_entries(data + 1, size - 1);
        break;
    case 2:
        dns_query(data + 1, size - 1);
        break;
    default:
        dns_answer(data + 1, size - 1);
    }
    return 0;
}
