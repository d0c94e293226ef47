/* The egress policy: parsing the operator's and the request's lists, and
 * judging names. Enforcement is in sandbox/egress_rules.c (addresses) and
 * sandbox/egress_dns.c (names). */
#include "egress/policy.h"
#include "base/error.h"
#include "runbox.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define V4(a, b, c, d, p)                                                                          \
    {                                                                                              \
        AF_INET, {a, b, c, d}, p                                                                   \
    }
#define V6(b0, b1, p)                                                                              \
    {                                                                                              \
        AF_INET6, {b0, b1}, p                                                                      \
    }
/* An IPv4 range as NAT64 addresses (64:ff9b::/96, RFC 6052): a NAT64
 * gateway (a cloud's, for IPv6-only hosts) turns them into IPv4 packets
 * sent from its own network, metadata and private ranges included. */
#define NAT64(a, b, c, d, p)                                                                       \
    {                                                                                              \
        AF_INET6, {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0, a, b, c, d}, 96 + p                \
    }

/* Never the public internet: what a sandbox must not reach unless the
 * operator says so. 0.0.0.0/8 and :: reach the host itself. */
const rbx_cidr rbx_egress_default_deny[] = {
    V4(0, 0, 0, 0, 8),      /* "this network": 0.0.0.0 is the host */
    V4(10, 0, 0, 0, 8),     /* RFC 1918 */
    V4(100, 64, 0, 0, 10),  /* shared address space (carrier NAT, some clouds' metadata) */
    V4(127, 0, 0, 0, 8),    /* loopback */
    V4(169, 254, 0, 0, 16), /* link-local: cloud metadata at 169.254.169.254 */
    V4(172, 16, 0, 0, 12),  /* RFC 1918 */
    V4(192, 0, 0, 0, 24),   /* IETF protocol assignments (some metadata services) */
    V4(192, 168, 0, 0, 16), /* RFC 1918 */
    V4(198, 18, 0, 0, 15),  /* benchmarking networks */
    V4(224, 0, 0, 0, 4),    /* multicast */
    V4(240, 0, 0, 0, 4),    /* reserved, and 255.255.255.255 broadcast */
    V6(0, 0, 127),          /* :: and ::1 (unspecified, loopback) */
    V6(0xfc, 0, 7),         /* unique-local fc00::/7 */
    V6(0xfe, 0x80, 10),     /* link-local fe80::/10 */
    V6(0xfe, 0xc0, 10),     /* site-local fec0::/10 (deprecated, still routed by some) */
    V6(0xff, 0, 8),         /* multicast */
    /* IPv4-mapped ::ffff:0:0/96: a program's connect() to one sends IPv4
     * (refused above as IPv4); never a destination of its own. */
    {AF_INET6, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 96},
    {AF_INET6, {0, 0x64, 0xff, 0x9b, 0, 1}, 48}, /* NAT64 for local use (RFC 8215) */
    NAT64(0, 0, 0, 0, 8),                        /* the IPv4 ranges above, through NAT64 */
    NAT64(10, 0, 0, 0, 8),
    NAT64(100, 64, 0, 0, 10),
    NAT64(127, 0, 0, 0, 8),
    NAT64(169, 254, 0, 0, 16),
    NAT64(172, 16, 0, 0, 12),
    NAT64(192, 0, 0, 0, 24),
    NAT64(192, 168, 0, 0, 16),
    NAT64(198, 18, 0, 0, 15),
    NAT64(224, 0, 0, 0, 4),
    NAT64(240, 0, 0, 0, 4),
};
const size_t rbx_egress_default_deny_count =
    sizeof rbx_egress_default_deny / sizeof rbx_egress_default_deny[0];

#define ACCEPTED                                                                                   \
    "a CIDR (10.0.0.0/8, 2001:db8::/32), an address (192.0.2.7) or a domain name "                 \
    "(pypi.org, *.example.com)"

static void mask(rbx_cidr *cidr)
{
    size_t bytes = cidr->family == AF_INET ? 4 : 16;
    for (size_t i = 0; i < bytes; i++) {
        int keep = (int)cidr->prefix - (int)(i * 8);
        if (keep <= 0)
            cidr->addr[i] = 0;
        else if (keep < 8)
            cidr->addr[i] &= (uint8_t)(0xff << (8 - keep));
    }
}

static bool parse_cidr(const char *text, rbx_cidr *cidr)
{
    char addr[64];
    const char *slash = strchr(text, '/');
    size_t len = slash ? (size_t)(slash - text) : strlen(text);
    if (len == 0 || len >= sizeof addr)
        return false;
    memcpy(addr, text, len);
    addr[len] = 0;
    memset(cidr, 0, sizeof *cidr);
    if (inet_pton(AF_INET, addr, cidr->addr) == 1)
        cidr->family = AF_INET;
    else if (inet_pton(AF_INET6, addr, cidr->addr) == 1)
        cidr->family = AF_INET6;
    else
        return false;
    unsigned max = cidr->family == AF_INET ? 32 : 128;
    cidr->prefix = (uint8_t)max;
    if (slash) {
        const char *p = slash + 1;
        if (!*p || strlen(p) > 3)
            return false;
        unsigned value = 0;
        for (; *p; p++) {
            if (!isdigit((unsigned char)*p))
                return false;
            value = value * 10 + (unsigned)(*p - '0');
        }
        if (value > max)
            return false;
        cidr->prefix = (uint8_t)value;
    }
    mask(cidr);
    return true;
}

/* Letters, digits and hyphens, labels of 1-63 not starting or ending with
 * a hyphen (underscores too: service names such as _dmarc exist). */
static bool parse_domain(const char *text, rbx_domain *domain)
{
    memset(domain, 0, sizeof *domain);
    if (!strncmp(text, "*.", 2)) {
        domain->wildcard = true;
        text += 2;
    }
    size_t len = strlen(text);
    if (len && text[len - 1] == '.')
        len--;
    if (len == 0 || len > 253)
        return false;
    size_t label = 0;
    for (size_t i = 0; i < len; i++) {
        char c = (char)tolower((unsigned char)text[i]);
        if (c == '.') {
            if (label == 0 || text[i - 1] == '-')
                return false;
            label = 0;
        } else if (isalnum((unsigned char)c) || c == '_' || (c == '-' && label > 0)) {
            if (++label > 63)
                return false;
        } else {
            return false;
        }
        domain->name[i] = c;
    }
    return label > 0 && text[len - 1] != '-';
}

static rbx_status grow(void **items, size_t count, size_t size, rbx_error *err)
{
    if (count % 16)
        return RBX_OK;
    void *bigger = realloc(*items, (count + 16) * size);
    if (!bigger)
        return rbx_fail(err, RBX_ESYSTEM, "out of memory");
    *items = bigger;
    return RBX_OK;
}

rbx_status rbx_egress_entry_add(rbx_egress_list *list, const char *entry, const char *what,
                                int index, rbx_error *err)
{
    char where[64];
    if (index >= 0)
        snprintf(where, sizeof where, "%s[%d]", what, index);
    else
        snprintf(where, sizeof where, "%s", what);
    rbx_cidr cidr;
    rbx_domain domain;
    bool looks_numeric = strchr(entry, ':') || strchr(entry, '/') ||
                         (entry[0] && strspn(entry, "0123456789.") == strlen(entry));
    if (looks_numeric) {
        if (!parse_cidr(entry, &cidr))
            return rbx_fail(err, RBX_EINVAL,
                            "%s: '%.80s' is not a valid CIDR or address (prefix 0-32 for IPv4, "
                            "0-128 for IPv6); accepted: " ACCEPTED,
                            where, entry);
        if (grow((void **)&list->cidrs, list->cidr_count, sizeof cidr, err) != RBX_OK)
            return err->status;
        list->cidrs[list->cidr_count++] = cidr;
        return RBX_OK;
    }
    if (!parse_domain(entry, &domain))
        return rbx_fail(err, RBX_EINVAL,
                        "%s: '%.80s' is not a valid destination; accepted: " ACCEPTED
                        " (a wildcard only as a leading '*.')",
                        where, entry);
    if (grow((void **)&list->domains, list->domain_count, sizeof domain, err) != RBX_OK)
        return err->status;
    list->domains[list->domain_count++] = domain;
    return RBX_OK;
}

rbx_status rbx_egress_list_parse(rbx_egress_list *list, const char *text, const char *what,
                                 rbx_error *err)
{
    const char *p = text ? text : "";
    while (*p) {
        p += strspn(p, ", \t\r\n");
        size_t len = strcspn(p, ", \t\r\n");
        if (!len)
            break;
        char entry[300];
        if (len >= sizeof entry)
            return rbx_fail(err, RBX_EINVAL,
                            "%s: an entry of %zu characters is too long; "
                            "accepted: " ACCEPTED,
                            what, len);
        memcpy(entry, p, len);
        entry[len] = 0;
        if (rbx_egress_entry_add(list, entry, what, -1, err) != RBX_OK)
            return err->status;
        p += len;
    }
    return RBX_OK;
}

void rbx_egress_list_free(rbx_egress_list *list)
{
    free(list->cidrs);
    free(list->domains);
    *list = (rbx_egress_list){0};
}

static bool parse_resolver(const char *text, struct sockaddr_storage *out, socklen_t *len)
{
    char host[64];
    unsigned port = 53;
    const char *colon = strrchr(text, ':');
    if (text[0] == '[') { /* [V6]:PORT */
        const char *close = strchr(text, ']');
        if (!close || (size_t)(close - text - 1) >= sizeof host)
            return false;
        memcpy(host, text + 1, (size_t)(close - text - 1));
        host[close - text - 1] = 0;
        colon = close[1] == ':' ? close + 1 : NULL;
        if (!colon && close[1])
            return false;
    } else if (colon && strchr(text, ':') == colon) { /* V4:PORT */
        if ((size_t)(colon - text) >= sizeof host)
            return false;
        memcpy(host, text, (size_t)(colon - text));
        host[colon - text] = 0;
    } else { /* V4 or a bare V6 */
        if (strlen(text) >= sizeof host)
            return false;
        snprintf(host, sizeof host, "%s", text);
        colon = NULL;
    }
    if (colon) {
        char *end;
        unsigned long value = strtoul(colon + 1, &end, 10);
        if (!colon[1] || *end || value == 0 || value > 65535)
            return false;
        port = (unsigned)value;
    }
    memset(out, 0, sizeof *out);
    struct sockaddr_in *v4 = (struct sockaddr_in *)out;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)out;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        *len = sizeof *v4;
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        *len = sizeof *v6;
    } else {
        return false;
    }
    return true;
}

/* The host's resolver: the first nameserver of /etc/resolv.conf, else
 * what glibc falls back to (127.0.0.1). Asked from the host's side, so a
 * resolver on the host's loopback works too. */
static void host_resolver(char *text, size_t size)
{
    snprintf(text, size, "127.0.0.1");
    FILE *f = fopen("/etc/resolv.conf", "re");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        char addr[64];
        if (sscanf(line, " nameserver %63s", addr) == 1) {
            char *percent = strchr(addr, '%'); /* a zone index: not ours to follow */
            if (percent)
                *percent = 0;
            if (strchr(addr, ':'))
                snprintf(text, size, "[%s]:53", addr);
            else
                snprintf(text, size, "%s", addr);
            break;
        }
    }
    fclose(f);
}

static rbx_status load_file(rbx_egress_policy *policy, const char *path, char *resolver,
                            size_t resolver_size, rbx_error *err)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return rbx_fail(err, RBX_EINVAL, "cannot read the egress file %s: %s", path,
                        strerror(errno));
    char line[4096];
    int number = 0;
    rbx_status status = RBX_OK;
    policy->file_digest = RBX_DIGEST_START;
    while (status == RBX_OK && fgets(line, sizeof line, f)) {
        policy->file_digest = rbx_digest_add(policy->file_digest, line, strlen(line));
        number++;
        char *p = line + strspn(line, " \t");
        p[strcspn(p, "\r\n")] = 0;
        if (!*p || *p == '#')
            continue;
        char *rest = p + strcspn(p, " \t");
        if (*rest)
            *rest++ = 0;
        rest += strspn(rest, " \t");
        char what[300];
        snprintf(what, sizeof what, "%.200s line %d", path, number);
        if (!strcmp(p, "allow"))
            status = rbx_egress_list_parse(&policy->allow, rest, what, err);
        else if (!strcmp(p, "deny"))
            status = rbx_egress_list_parse(&policy->deny, rest, what, err);
        else if (!strcmp(p, "default") &&
                 (!strcmp(rest, "public") || !strcmp(rest, "none") || !strcmp(rest, "open"))) {
            policy->allowlist_only = !strcmp(rest, "none");
            policy->open = !strcmp(rest, "open");
        } else if (!strcmp(p, "resolver") && *rest)
            snprintf(resolver, resolver_size, "%s", rest);
        else
            status = rbx_fail(err, RBX_EINVAL,
                              "%s: '%.40s' is not understood; accepted lines: 'allow LIST', "
                              "'deny LIST', 'default public|none|open', 'resolver ADDR[:PORT]', "
                              "'# comment'",
                              what, p);
    }
    fclose(f);
    return status;
}

rbx_status rbx_egress_policy_load(rbx_egress_policy *policy, const rbx_config *config,
                                  rbx_error *err)
{
    memset(policy, 0, sizeof *policy);
    char resolver[300] = "";
    policy->allowlist_only = config->egress_allowlist_only;
    policy->open = config->egress_open;
    if ((config->egress_file &&
         load_file(policy, config->egress_file, resolver, sizeof resolver, err) != RBX_OK) ||
        rbx_egress_list_parse(&policy->allow, config->egress_allow, "--egress-allow", err) !=
            RBX_OK ||
        rbx_egress_list_parse(&policy->deny, config->egress_deny, "--egress-deny", err) != RBX_OK) {
        rbx_egress_policy_free(policy);
        return err->status;
    }
    if (policy->open &&
        (policy->allow.cidr_count || policy->allow.domain_count || policy->deny.cidr_count ||
         policy->deny.domain_count || policy->allowlist_only)) {
        rbx_egress_policy_free(policy);
        return rbx_fail(err, RBX_EINVAL,
                        "the egress default 'open' (no policy) takes no allow or deny list; "
                        "use the default 'public' or 'none' with lists");
    }
    if (config->egress_resolver && *config->egress_resolver)
        snprintf(resolver, sizeof resolver, "%s", config->egress_resolver);
    if (!*resolver)
        host_resolver(resolver, sizeof resolver);
    if (!parse_resolver(resolver, &policy->resolver, &policy->resolver_len)) {
        rbx_egress_policy_free(policy);
        return rbx_fail(err, RBX_EINVAL,
                        "the egress resolver (--egress-resolver, or 'resolver' in the egress "
                        "file) '%.80s' is not an address; accepted: ADDR, ADDR:PORT, "
                        "[IPV6]:PORT (e.g. 192.0.2.53, 127.0.0.1:5353)",
                        resolver);
    }
    snprintf(policy->resolver_text, sizeof policy->resolver_text, "%.63s", resolver);
    return RBX_OK;
}

void rbx_egress_policy_free(rbx_egress_policy *policy)
{
    rbx_egress_list_free(&policy->allow);
    rbx_egress_list_free(&policy->deny);
}

static size_t describe_list(const rbx_egress_list *list, char *text, size_t size)
{
    size_t n = 0;
    for (size_t i = 0; i < list->cidr_count && n < size; i++) {
        char addr[64];
        rbx_egress_format(list->cidrs[i].family, list->cidrs[i].addr, 0, addr, sizeof addr);
        n += (size_t)snprintf(text + n, size - n, "%s%s/%u", n ? ", " : "", addr,
                              list->cidrs[i].prefix);
    }
    for (size_t i = 0; i < list->domain_count && n < size; i++)
        n += (size_t)snprintf(text + n, size - n, "%s%s%s", n ? ", " : "",
                              list->domains[i].wildcard ? "*." : "", list->domains[i].name);
    if (n == 0)
        n = (size_t)snprintf(text, size, "nothing");
    return n < size ? n : size - 1;
}

void rbx_egress_policy_describe(const rbx_egress_policy *policy, char *text, size_t size)
{
    if (policy->open) {
        snprintf(text, size,
                 "open (--egress-default open): no policy, everything the host "
                 "reaches, its own addresses included; requests may narrow it; "
                 "names resolved by runbox through %s",
                 policy->resolver_text);
        return;
    }
    char allow[160], deny[160];
    describe_list(&policy->allow, allow, sizeof allow);
    describe_list(&policy->deny, deny, sizeof deny);
    snprintf(text, size,
             "%s; also allowed: %s; denied: %s and the host's own addresses; names "
             "resolved by runbox through %s",
             policy->allowlist_only ? "only the allowed destinations"
                                    : "the public internet (not private, link-local, loopback "
                                      "or multicast ranges)",
             allow, deny, policy->resolver_text);
}

rbx_status rbx_egress_narrowing_parse(rbx_egress_list *list, const rbx_request *request,
                                      rbx_error *err)
{
    if (request->egress_allow_count > RBX_EGRESS_ALLOW_MAX)
        return rbx_fail(err, RBX_EINVAL, "egress_allow lists %zu destinations; at most %d",
                        request->egress_allow_count, RBX_EGRESS_ALLOW_MAX);
    for (size_t i = 0; i < request->egress_allow_count; i++) {
        const char *entry = request->egress_allow[i];
        if (!entry || !*entry) {
            rbx_egress_list_free(list);
            return rbx_fail(err, RBX_EINVAL, "egress_allow[%zu] is empty; accepted: " ACCEPTED, i);
        }
        if (rbx_egress_entry_add(list, entry, "egress_allow", (int)i, err) != RBX_OK) {
            rbx_egress_list_free(list);
            return err->status;
        }
    }
    return RBX_OK;
}

static bool host_matters(const void *policy, int family, const uint8_t *addr)
{
    return rbx_egress_host_matters(policy, family, addr);
}

rbx_status rbx_egress_plan_make(rbx_egress_plan *plan, const rbx_egress_policy *policy,
                                const rbx_request *request, rbx_error *err)
{
    *plan = (rbx_egress_plan){.policy = policy};
    if (request && request->egress_allow) {
        plan->has_narrowing = true;
        if (rbx_egress_narrowing_parse(&plan->narrowing, request, err) != RBX_OK)
            return err->status;
    }
    if (rbx_egress_host_addresses(host_matters, policy, &plan->host, &plan->host_generation,
                                  err) != RBX_OK) {
        rbx_egress_plan_free(plan);
        return err->status;
    }
    return RBX_OK;
}

bool rbx_egress_plan_has_rules(const rbx_egress_plan *plan)
{
    return !plan->policy->open || plan->has_narrowing;
}

void rbx_egress_plan_free(rbx_egress_plan *plan)
{
    rbx_egress_list_free(&plan->host);
    rbx_egress_list_free(&plan->narrowing);
}

bool rbx_egress_domain_listed(const rbx_egress_list *list, const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < list->domain_count; i++) {
        const rbx_domain *d = &list->domains[i];
        size_t dlen = strlen(d->name);
        if (!d->wildcard && !strcmp(name, d->name))
            return true;
        if (d->wildcard && len > dlen + 1 && name[len - dlen - 1] == '.' &&
            !strcmp(name + len - dlen, d->name))
            return true;
    }
    return false;
}

static bool cidr_holds(const rbx_cidr *cidr, int family, const uint8_t *addr)
{
    if (cidr->family != family)
        return false;
    size_t whole = cidr->prefix / 8, bits = cidr->prefix % 8;
    if (memcmp(cidr->addr, addr, whole) != 0)
        return false;
    return !bits || ((cidr->addr[whole] ^ addr[whole]) & (uint8_t)(0xff << (8 - bits))) == 0;
}

static bool cidrs_hold(const rbx_cidr *cidrs, size_t count, int family, const uint8_t *addr)
{
    for (size_t i = 0; i < count; i++)
        if (cidr_holds(&cidrs[i], family, addr))
            return true;
    return false;
}

bool rbx_egress_default_refuses(int family, const uint8_t *addr)
{
    return cidrs_hold(rbx_egress_default_deny, rbx_egress_default_deny_count, family, addr);
}

bool rbx_egress_host_matters(const rbx_egress_policy *policy, int family, const uint8_t *addr)
{
    /* The order of the rules (rules.c): the operator's deny refuses first;
     * a name admits no address the default refuses (rbx_egress_name_may_admit)
     * and a request only narrows, so only the operator's allow list opens
     * one. */
    if (policy->open || cidrs_hold(policy->deny.cidrs, policy->deny.cidr_count, family, addr))
        return false;
    return cidrs_hold(policy->allow.cidrs, policy->allow.cidr_count, family, addr) ||
           !rbx_egress_default_refuses(family, addr);
}

int rbx_egress_host_select(const rbx_egress_policy *policy, const rbx_egress_list *all,
                           rbx_egress_list *out)
{
    rbx_error ignored;
    *out = (rbx_egress_list){0};
    return rbx_egress_host_select_by(host_matters, policy, all->cidrs, all->cidr_count, out,
                                     &ignored) == RBX_OK
               ? 0
               : -1;
}

bool rbx_egress_name_may_admit(const rbx_egress_plan *plan, int family, const uint8_t *addr)
{
    const rbx_egress_policy *policy = plan->policy;
    if (policy->open)
        return true; /* the operator allows every address: a name only narrows */
    if (cidrs_hold(plan->host.cidrs, plan->host.cidr_count, family, addr) ||
        cidrs_hold(policy->deny.cidrs, policy->deny.cidr_count, family, addr))
        return false;
    /* Only the operator opens a refused range, and only by address: whoever
     * answers for an allowed name (its owner, or anyone who can add a name
     * below a wildcard) must not be able to point it at the metadata
     * service, a private network or the host. */
    return cidrs_hold(policy->allow.cidrs, policy->allow.cidr_count, family, addr) ||
           !rbx_egress_default_refuses(family, addr);
}

rbx_egress_name_verdict rbx_egress_judge_name(const rbx_egress_plan *plan, const char *asked)
{
    char name[256];
    size_t len = strlen(asked);
    if (len >= sizeof name)
        return (rbx_egress_name_verdict){.refused = true};
    for (size_t i = 0; i <= len; i++)
        name[i] = (char)tolower((unsigned char)asked[i]);
    if (len && name[len - 1] == '.')
        name[len - 1] = 0;
    const rbx_egress_policy *policy = plan->policy;
    rbx_egress_name_verdict verdict = {0};
    if (rbx_egress_domain_listed(&policy->deny, name))
        return (rbx_egress_name_verdict){.refused = true};
    verdict.named_allow = rbx_egress_domain_listed(&policy->allow, name);
    if (policy->allowlist_only && !verdict.named_allow)
        return (rbx_egress_name_verdict){.refused = true};
    verdict.named_narrow = plan->has_narrowing && rbx_egress_domain_listed(&plan->narrowing, name);
    return verdict;
}

void rbx_egress_format(int family, const uint8_t *addr, unsigned port, char *text, size_t size)
{
    char buf[INET6_ADDRSTRLEN];
    if (!inet_ntop(family, addr, buf, sizeof buf))
        snprintf(buf, sizeof buf, "?");
    if (!port)
        snprintf(text, size, "%s", buf);
    else if (family == AF_INET6)
        snprintf(text, size, "[%s]:%u", buf, port);
    else
        snprintf(text, size, "%s:%u", buf, port);
}
