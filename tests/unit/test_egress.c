/* Unit tests of egress.c: what lists accept and refuse (with messages that
 * say what is accepted), the operator's file, the resolver's address, and
 * how names are judged under each mode. */
#include "unit_util.h"

#include "egress/policy.h"

#include <arpa/inet.h>

static rbx_egress_list parsed(const char *text)
{
    rbx_egress_list list = {0};
    rbx_error err = {0};
    if (rbx_egress_list_parse(&list, text, "--egress-allow", &err) != RBX_OK)
        fail_msg("'%s' was refused: %s", text, err.message);
    return list;
}

static void refused(const char *text, const char *says)
{
    rbx_egress_list list = {0};
    rbx_error err = {0};
    assert_int_equal(rbx_egress_list_parse(&list, text, "--egress-allow", &err), RBX_EINVAL);
    if (!strstr(err.message, says))
        fail_msg("'%s': message '%s' does not say '%s'", text, err.message, says);
    assert_non_null(strstr(err.message, "--egress-allow"));
    assert_null(list.cidrs);
    rbx_egress_list_free(&list);
}

static void test_cidrs_addresses_and_domains_are_accepted(void **state)
{
    rbx_egress_list list = parsed(" 10.0.0.0/8, 192.0.2.7  2001:db8::/32,fe80::1 "
                                  "PyPI.org, *.Example.com. _dmarc.x.io");
    assert_int_equal(list.cidr_count, 4);
    assert_int_equal(list.domain_count, 3);
    assert_int_equal(list.cidrs[0].family, AF_INET);
    assert_int_equal(list.cidrs[0].prefix, 8);
    assert_int_equal(list.cidrs[1].prefix, 32);
    assert_int_equal(list.cidrs[2].family, AF_INET6);
    assert_int_equal(list.cidrs[2].prefix, 32);
    assert_int_equal(list.cidrs[3].prefix, 128);
    assert_string_equal(list.domains[0].name, "pypi.org");
    assert_false(list.domains[0].wildcard);
    assert_string_equal(list.domains[1].name, "example.com");
    assert_true(list.domains[1].wildcard);
    rbx_egress_list_free(&list);
}

static void test_host_bits_are_masked(void **state)
{
    rbx_egress_list list = parsed("10.1.2.3/8,2001:db8::ffff/32");
    uint8_t ten[4] = {10, 0, 0, 0};
    assert_memory_equal(list.cidrs[0].addr, ten, 4);
    uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8};
    assert_memory_equal(list.cidrs[1].addr, v6, 16);
    rbx_egress_list_free(&list);
}

static void test_hostile_entries_are_refused_with_what_is_accepted(void **state)
{
    refused("10.0.0.0/33", "prefix 0-32");
    refused("2001:db8::/129", "0-128");
    refused("10.0.0.0/", "not a valid CIDR");
    refused("10.0.0.0/-1", "not a valid CIDR");
    refused("999.1.1.1", "not a valid CIDR");
    refused("http://x", "not a valid CIDR");
    refused("*", "accepted:");
    refused("*.", "accepted:");
    refused("exa$mple.com", "accepted:");
    refused("-bad.com", "accepted:");
    refused("bad-.com", "accepted:");
    refused("a..b", "accepted:");
    refused("foo.*.com", "a wildcard only as a leading");
    char long_label[80];
    memset(long_label, 'a', 64);
    strcpy(long_label + 64, ".com");
    refused(long_label, "accepted:");
    char huge[400];
    memset(huge, 'a', sizeof huge - 1);
    huge[sizeof huge - 1] = 0;
    refused(huge, "too long");
}

static void test_a_requests_list_is_checked_with_its_index(void **state)
{
    const char *entries[] = {"10.0.0.0/8", "", "pypi.org"};
    rbx_request request;
    rbx_request_init(&request);
    request.egress_allow = entries;
    request.egress_allow_count = 3;
    rbx_egress_list list = {0};
    rbx_error err = {0};
    assert_int_equal(rbx_egress_narrowing_parse(&list, &request, &err), RBX_EINVAL);
    assert_non_null(strstr(err.message, "egress_allow[1] is empty"));
    entries[1] = "nope nope";
    assert_int_equal(rbx_egress_narrowing_parse(&list, &request, &err), RBX_EINVAL);
    assert_non_null(strstr(err.message, "egress_allow[1]"));
    request.egress_allow_count = RBX_EGRESS_ALLOW_MAX + 1;
    assert_int_equal(rbx_egress_narrowing_parse(&list, &request, &err), RBX_EINVAL);
    assert_non_null(strstr(err.message, "at most"));
    assert_null(list.cidrs);
}

static rbx_egress_policy policy_of(const char *allow, const char *deny, bool only,
                                   const char *resolver)
{
    rbx_config config;
    rbx_config_defaults(&config);
    config.egress_allow = allow;
    config.egress_deny = deny;
    config.egress_allowlist_only = only;
    config.egress_resolver = resolver;
    rbx_egress_policy policy;
    rbx_error err = {0};
    if (rbx_egress_policy_load(&policy, &config, &err) != RBX_OK)
        fail_msg("policy refused: %s", err.message);
    return policy;
}

static void test_names_are_judged_deny_first(void **state)
{
    rbx_egress_policy policy = policy_of("pypi.org,*.corp.example", "evil.pypi.org,*.bad.example",
                                         false, "127.0.0.1:5353");
    rbx_egress_plan plan = {.policy = &policy};
    rbx_egress_name_verdict v = rbx_egress_judge_name(&plan, "PyPI.org.");
    assert_false(v.refused);
    assert_true(v.named_allow);
    v = rbx_egress_judge_name(&plan, "mirror.corp.example");
    assert_true(v.named_allow);
    v = rbx_egress_judge_name(&plan, "corp.example"); /* the wildcard is below it only */
    assert_false(v.refused);
    assert_false(v.named_allow);
    assert_true(rbx_egress_judge_name(&plan, "x.bad.example").refused);
    assert_false(rbx_egress_judge_name(&plan, "bad.example").refused);
    assert_false(rbx_egress_judge_name(&plan, "notbad.example").refused);
    assert_false(rbx_egress_judge_name(&plan, "example.net").refused); /* public mode */
    /* A name longer than any DNS name is refused, not truncated into another. */
    char huge[300];
    memset(huge, 'a', sizeof huge - 1);
    huge[sizeof huge - 1] = 0;
    assert_true(rbx_egress_judge_name(&plan, huge).refused);
    rbx_egress_policy_free(&policy);
}

static void test_allowlist_mode_refuses_every_other_name_and_a_request_narrows(void **state)
{
    rbx_egress_policy policy = policy_of("pypi.org", "", true, NULL);
    rbx_egress_plan plan = {.policy = &policy};
    assert_true(rbx_egress_judge_name(&plan, "example.net").refused);
    assert_false(rbx_egress_judge_name(&plan, "pypi.org").refused);
    assert_false(rbx_egress_judge_name(&plan, "pypi.org").named_narrow);
    plan.has_narrowing = true;
    plan.narrowing = parsed("pypi.org");
    assert_true(rbx_egress_judge_name(&plan, "pypi.org").named_narrow);
    rbx_egress_list_free(&plan.narrowing);
    rbx_egress_policy_free(&policy);
}

static void test_the_resolver_address_forms(void **state)
{
    static const struct {
        const char *text;
        int family;
        unsigned port;
    } good[] = {{"192.0.2.53", AF_INET, 53},
                {"127.0.0.1:5353", AF_INET, 5353},
                {"[2001:db8::53]:5353", AF_INET6, 5353},
                {"2001:db8::53", AF_INET6, 53},
                {"[::1]", AF_INET6, 53}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        rbx_egress_policy p = policy_of(NULL, NULL, false, good[i].text);
        assert_int_equal(p.resolver.ss_family, good[i].family);
        unsigned port = p.resolver.ss_family == AF_INET
                            ? ntohs(((struct sockaddr_in *)&p.resolver)->sin_port)
                            : ntohs(((struct sockaddr_in6 *)&p.resolver)->sin6_port);
        assert_int_equal(port, good[i].port);
        rbx_egress_policy_free(&p);
    }
    static const char *const bad[] = {
        "resolver.example", "1.2.3.4:0", "1.2.3.4:70000", "[::1", "[::1]x", "1.2.3.4:", ":53"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rbx_config config;
        rbx_config_defaults(&config);
        config.egress_resolver = bad[i];
        rbx_egress_policy p;
        rbx_error err = {0};
        assert_int_equal(rbx_egress_policy_load(&p, &config, &err), RBX_EINVAL);
        assert_non_null(strstr(err.message, "accepted"));
    }
}

static void test_the_operators_file(void **state)
{
    char dir[64], path[128];
    make_temp_dir(dir, sizeof dir, "egress");
    snprintf(path, sizeof path, "%s/egress", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("# the operator's egress\n\nallow 10.20.0.0/16 mirror.corp.example\n"
          "deny *.bad.example\ndefault none\nresolver 127.0.0.1:5353\n",
          f);
    fclose(f);
    rbx_config config;
    rbx_config_defaults(&config);
    config.egress_file = path;
    config.egress_allow = "192.0.2.0/24"; /* options add to the file */
    rbx_egress_policy p;
    rbx_error err = {0};
    assert_int_equal(rbx_egress_policy_load(&p, &config, &err), RBX_OK);
    assert_true(p.allowlist_only);
    assert_int_equal(p.allow.cidr_count, 2);
    assert_int_equal(p.allow.domain_count, 1);
    assert_int_equal(p.deny.domain_count, 1);
    assert_string_equal(p.resolver_text, "127.0.0.1:5353");
    rbx_egress_policy_free(&p);

    f = fopen(path, "w");
    fputs("allow 10.0.0.0/8\npermit everything\n", f);
    fclose(f);
    assert_int_equal(rbx_egress_policy_load(&p, &config, &err), RBX_EINVAL);
    assert_non_null(strstr(err.message, "line 2"));
    assert_non_null(strstr(err.message, "accepted lines"));
    f = fopen(path, "w");
    fputs("deny 10.0.0.0/40\n", f);
    fclose(f);
    assert_int_equal(rbx_egress_policy_load(&p, &config, &err), RBX_EINVAL);
    assert_non_null(strstr(err.message, "line 1"));
    config.egress_file = "/nonexistent/egress";
    assert_int_equal(rbx_egress_policy_load(&p, &config, &err), RBX_EINVAL);
    assert_non_null(strstr(err.message, "cannot read"));
    unlink(path);
    rmdir(dir);
}

static void test_open_takes_no_lists(void **state)
{
    rbx_config config;
    rbx_config_defaults(&config);
    config.egress_open = true;
    rbx_egress_policy p;
    rbx_error err = {0};
    assert_int_equal(rbx_egress_policy_load(&p, &config, &err), RBX_OK);
    rbx_egress_plan plan = {.policy = &p};
    assert_false(rbx_egress_plan_has_rules(&plan));
    plan.has_narrowing = true;
    assert_true(rbx_egress_plan_has_rules(&plan));
    rbx_egress_policy_free(&p);
    config.egress_deny = "10.0.0.0/8";
    assert_int_equal(rbx_egress_policy_load(&p, &config, &err), RBX_EINVAL);
    assert_non_null(strstr(err.message, "open"));
}

static void test_the_default_ranges_cover_metadata_and_private_networks(void **state)
{
    static const char *const inside[] = {"169.254.169.254", "10.9.8.7",        "172.31.255.255",
                                         "192.168.0.1",     "100.64.0.1",      "127.0.0.1",
                                         "224.0.0.251",     "255.255.255.255", "0.0.0.0"};
    static const char *const outside[] = {"8.8.8.8", "203.0.113.80", "172.32.0.1", "100.128.0.1"};
    for (int pass = 0; pass < 2; pass++) {
        const char *const *addresses = pass ? outside : inside;
        size_t count = pass ? sizeof outside / sizeof *outside : sizeof inside / sizeof *inside;
        for (size_t a = 0; a < count; a++) {
            uint8_t bytes[4];
            assert_int_equal(inet_pton(AF_INET, addresses[a], bytes), 1);
            bool hit = false;
            for (size_t i = 0; i < rbx_egress_default_deny_count && !hit; i++) {
                const rbx_cidr *c = &rbx_egress_default_deny[i];
                if (c->family != AF_INET)
                    continue;
                uint32_t mask = c->prefix ? ~0u << (32 - c->prefix) : 0;
                uint32_t x = (uint32_t)bytes[0] << 24 | bytes[1] << 16 | bytes[2] << 8 | bytes[3];
                uint32_t n =
                    (uint32_t)c->addr[0] << 24 | c->addr[1] << 16 | c->addr[2] << 8 | c->addr[3];
                hit = (x & mask) == n;
            }
            if (hit != !pass)
                fail_msg("%s is %s the default ranges", addresses[a], hit ? "in" : "not in");
        }
    }
}

static bool may_admit(const rbx_egress_plan *plan, const char *text)
{
    uint8_t addr[16] = {0};
    int family = strchr(text, ':') ? AF_INET6 : AF_INET;
    assert_int_equal(inet_pton(family, text, addr), 1);
    return rbx_egress_name_may_admit(plan, family, addr);
}

/* What a hostile answer for an allowed name may put into the sandbox's
 * rules: no address the policy refuses, in any of its spellings. */
static void test_a_name_admits_no_refused_address_unless_allowed_by_cidr(void **state)
{
    static const char *const refused[] = {
        "169.254.169.254", "169.254.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1",
        "192.0.0.170", "198.18.0.1", "127.0.0.1", "127.1.2.3", "0.0.0.0", "224.0.0.251",
        "239.255.255.250", "255.255.255.255", "::", "::1", "fe80::1", "febf::1", "fec0::1",
        "fc00::1", "fd00:ec2::254", "ff02::1", "ff05::1:3",
        /* IPv4-mapped: refused whatever the address (an IPv6 socket sends IPv4) */
        "::ffff:169.254.169.254", "::ffff:10.0.0.1", "::ffff:127.0.0.1", "::ffff:8.8.8.8",
        /* NAT64 of the refused IPv4 ranges, and the local-use NAT64 prefix */
        "64:ff9b::a9fe:a9fe", "64:ff9b::169.254.169.254", "64:ff9b::10.1.2.3",
        "64:ff9b::127.0.0.1", "64:ff9b::192.168.0.1", "64:ff9b::224.0.0.1",
        "64:ff9b:1::8.8.8.8",
        /* the host's own (below) and the operator's denied range */
        "203.0.113.5", "2001:db8:5::1", "198.51.100.77"};
    static const char *const admitted[] = {"8.8.8.8", "203.0.113.80", "172.32.0.1",
                                           "100.128.0.1", "2606:4700::1111", "2001:db8::1",
                                           "64:ff9b::8.8.8.8", "64:ff9b::203.0.113.80",
                                           /* allowed by CIDR, though private */
                                           "10.20.1.2", "fd00:20::1", "64:ff9b::a14:102"};
    rbx_egress_policy policy = policy_of(
        "*.good.test,10.20.0.0/16,fd00:20::/32,64:ff9b::10.20.0.0/112", "198.51.100.0/24", false,
        NULL);
    rbx_egress_plan plan = {.policy = &policy};
    rbx_error err = {0};
    assert_int_equal(rbx_egress_list_parse(&plan.host, "203.0.113.5,2001:db8:5::1", "host", &err),
                     RBX_OK);
    for (int only = 0; only < 2; only++) {
        policy.allowlist_only = only; /* the same in both modes */
        for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
            if (may_admit(&plan, refused[i]))
                fail_msg("a name admitted %s", refused[i]);
        for (size_t i = 0; i < sizeof admitted / sizeof *admitted; i++)
            if (!may_admit(&plan, admitted[i]))
                fail_msg("a name did not admit %s", admitted[i]);
    }
    /* The operator's deny wins over its allowed CIDR. */
    rbx_egress_policy both = policy_of("10.0.0.0/8", "10.9.0.0/16", false, NULL);
    rbx_egress_plan plan2 = {.policy = &both};
    assert_true(may_admit(&plan2, "10.8.0.1"));
    assert_false(may_admit(&plan2, "10.9.0.1"));
    /* The host's own addresses, read when a plan is made: only those the
     * policy would otherwise admit (the loopback interface's 127.0.0.1 and
     * its NAT64 form are refused by the default ranges, and not listed). */
    rbx_egress_plan made;
    assert_int_equal(rbx_egress_plan_make(&made, &both, NULL, &err), RBX_OK);
    for (size_t i = 0; i < made.host.cidr_count; i++)
        assert_true(rbx_egress_host_matters(&both, made.host.cidrs[i].family,
                                            made.host.cidrs[i].addr));
    assert_false(may_admit(&made, "127.0.0.1"));
    assert_false(may_admit(&made, "64:ff9b::127.0.0.1"));
    rbx_egress_plan_free(&made);
    /* An open policy already allows every address: a name only narrows. */
    both.open = true;
    assert_true(may_admit(&plan2, "169.254.169.254"));
    rbx_egress_policy_free(&both);
    rbx_egress_list_free(&plan.host);
    rbx_egress_policy_free(&policy);
}

/* Which of the host's addresses get a rule of their own: those the policy
 * would otherwise admit, and no other (each costs every sandbox an element
 * of its rules). */
static void test_only_the_host_addresses_the_policy_would_admit_are_selected(void **state)
{
    (void)state;
    rbx_egress_policy policy = policy_of("10.0.0.0/8,fd00:20::/32", "10.9.0.0/16", false, NULL);
    rbx_egress_list host = {0}, mine = {0};
    rbx_error err = {0};
    assert_int_equal(rbx_egress_list_parse(&host,
                                           "127.0.0.1,64:ff9b::127.0.0.1,10.8.0.5,10.9.0.5,"
                                           "192.168.1.1,203.0.113.7,fe80::1,fd00:20::5,"
                                           "fd00:30::5,2001:db8::7",
                                           "host", &err),
                     RBX_OK);
    const char *const kept[] = {"10.8.0.5", "203.0.113.7", "fd00:20::5", "2001:db8::7"};
    for (int only = 0; only < 2; only++) {
        policy.allowlist_only = only; /* a name may admit a public address in both modes */
        assert_int_equal(rbx_egress_host_select(&policy, &host, &mine), 0);
        assert_int_equal(mine.cidr_count, sizeof kept / sizeof *kept);
        for (size_t i = 0; i < mine.cidr_count; i++) {
            char text[64];
            inet_ntop(mine.cidrs[i].family, mine.cidrs[i].addr, text, sizeof text);
            assert_string_equal(text, kept[i]);
        }
        rbx_egress_list_free(&mine);
    }
    policy.open = true; /* refuses none of them: no rules for them at all */
    assert_int_equal(rbx_egress_host_select(&policy, &host, &mine), 0);
    assert_int_equal(mine.cidr_count, 0);
    rbx_egress_list_free(&mine);
    rbx_egress_list_free(&host);
    rbx_egress_policy_free(&policy);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cidrs_addresses_and_domains_are_accepted),
        cmocka_unit_test(test_host_bits_are_masked),
        cmocka_unit_test(test_hostile_entries_are_refused_with_what_is_accepted),
        cmocka_unit_test(test_a_requests_list_is_checked_with_its_index),
        cmocka_unit_test(test_names_are_judged_deny_first),
        cmocka_unit_test(test_allowlist_mode_refuses_every_other_name_and_a_request_narrows),
        cmocka_unit_test(test_the_resolver_address_forms),
        cmocka_unit_test(test_the_operators_file),
        cmocka_unit_test(test_open_takes_no_lists),
        cmocka_unit_test(test_the_default_ranges_cover_metadata_and_private_networks),
        cmocka_unit_test(test_a_name_admits_no_refused_address_unless_allowed_by_cidr),
        cmocka_unit_test(test_only_the_host_addresses_the_policy_would_admit_are_selected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
