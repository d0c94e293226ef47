/* runbox's resolver for sandboxes (egress_dns.h): one thread, one epoll,
 * a table of slots (guards and queries in flight) named in epoll by index
 * and generation, so that an event of a slot freed meanwhile is ignored. */
#include "egress/dns.h"
#include "base/error.h"
#include "base/slot_table.h"
#include "egress/policy.h"
#include "egress/rules.h"
#include "kernels/wire.h"
#include "runbox.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <resolv.h>
#include <sched.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define QUERY_TIMEOUT_MS 5000
#define QUERIES_PER_GUARD 64 /* in flight; more are dropped (the client retries) */
#define DNS_MAX 4096
#define CHAIN_MAX 16 /* names of a CNAME chain followed, the asked one included */
/* An A record takes 16 bytes at least (a compressed name, 10 of fixed
 * fields, 4 of address): no message of DNS_MAX holds more. */
#define ADDRESSES_MAX (DNS_MAX / 16)

typedef struct query query;

/* A list of queries through one of their two links (below). */
typedef struct query_list {
    query *first, *last;
} query_list;

struct rbx_egress_guard {
    int nl_fd, dns_fd;
    const rbx_egress_plan *plan;
    size_t slot;
    size_t in_flight;
    query_list queries; /* its own in flight, ended with it */
    uint64_t host_generation; /* the listing of the host's addresses its rules refuse */
    rbx_egress_report names; /* lookups refused since the last report */
};

struct query {
    rbx_egress_guard *guard;
    size_t slot;
    /* In the guard's list, and in the list of all in flight, which is in
     * the order of their deadlines (every query has the same timeout):
     * whatever it costs to end a guard or the expired queries grows with
     * those queries, not with the sandboxes. */
    query *guard_prev, *guard_next, *prev, *next;
    int fd; /* connected to the operator's resolver */
    struct sockaddr_storage client;
    socklen_t client_len;
    rbx_egress_question question;
    rbx_egress_name_verdict verdict;
    int64_t deadline_ms;
};

enum { SLOT_GUARD, SLOT_QUERY }; /* the kinds of slots */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t started = PTHREAD_ONCE_INIT;
static int epfd = -1;
static rbx_slot_table slots = RBX_SLOT_TABLE_INIT;
static query_list in_flight; /* by deadline */

static void query_link(query *q)
{
    q->prev = in_flight.last;
    q->next = NULL;
    *(in_flight.last ? &in_flight.last->next : &in_flight.first) = q;
    in_flight.last = q;
    query_list *own = &q->guard->queries;
    q->guard_prev = own->last;
    q->guard_next = NULL;
    *(own->last ? &own->last->guard_next : &own->first) = q;
    own->last = q;
}

static void query_unlink(query *q)
{
    *(q->prev ? &q->prev->next : &in_flight.first) = q->next;
    *(q->next ? &q->next->prev : &in_flight.last) = q->prev;
    query_list *own = &q->guard->queries;
    *(q->guard_prev ? &q->guard_prev->guard_next : &own->first) = q->guard_next;
    *(q->guard_next ? &q->guard_next->guard_prev : &own->last) = q->guard_prev;
}

static void query_end(query *q)
{
    epoll_ctl(epfd, EPOLL_CTL_DEL, q->fd, NULL);
    close(q->fd);
    q->guard->in_flight--;
    query_unlink(q);
    rbx_slot_give(&slots, q->slot);
    free(q);
}

/* The one question of msg, whether a query (response false) or not. */
static bool question_of(const uint8_t *msg, size_t len, bool response,
                        rbx_egress_question *question)
{
    ns_msg parsed;
    ns_rr rr;
    if (len < HFIXEDSZ || len > DNS_MAX || ns_initparse(msg, (int)len, &parsed) != 0 ||
        ns_msg_getflag(parsed, ns_f_qr) != response ||
        ns_msg_getflag(parsed, ns_f_opcode) != ns_o_query || ns_msg_count(parsed, ns_s_qd) != 1 ||
        ns_parserr(&parsed, ns_s_qd, 0, &rr) != 0)
        return false;
    memcpy(question->id, msg, 2);
    question->type = ns_rr_type(rr);
    question->qclass = ns_rr_class(rr);
    snprintf(question->name, sizeof question->name, "%s", ns_rr_name(rr));
    return true;
}

bool rbx_egress_dns_question(const uint8_t *msg, size_t len, rbx_egress_question *question)
{
    return question_of(msg, len, false, question);
}

/* Names as libresolv writes them (dn_expand): no final dot, a byte that is
 * not printable as \DDD, a special character escaped with '\'. Two names
 * are the same in DNS when they differ only in the case of ASCII letters,
 * which is then true of their texts too. */
static bool same_name(const char *a, const char *b)
{
    return strcasecmp(a, b) == 0;
}

bool rbx_egress_dns_answers(const rbx_egress_question *question, const uint8_t *msg, size_t len)
{
    rbx_egress_question answered;
    return question_of(msg, len, true, &answered) && !memcmp(answered.id, question->id, 2) &&
           answered.type == question->type && answered.qclass == question->qclass &&
           same_name(answered.name, question->name);
}

static bool in_chain(char chain[][NS_MAXDNAME], size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (same_name(chain[i], name))
            return true;
    return false;
}

/* Follows the CNAME records of the answer section from chain[0]; returns
 * how many names the chain has. A loop or a chain longer than CHAIN_MAX
 * ends it. */
static size_t follow_chain(ns_msg *parsed, char chain[][NS_MAXDNAME])
{
    size_t n = 1;
    int count = ns_msg_count(*parsed, ns_s_an);
    for (bool longer = true; longer && n < CHAIN_MAX;) {
        longer = false;
        for (int i = 0; i < count && !longer; i++) {
            ns_rr rr;
            char target[NS_MAXDNAME];
            if (ns_parserr(parsed, ns_s_an, i, &rr) != 0)
                return n;
            if (ns_rr_type(rr) != ns_t_cname || ns_rr_class(rr) != ns_c_in ||
                !same_name(ns_rr_name(rr), chain[n - 1]))
                continue;
            if (ns_name_uncompress(ns_msg_base(*parsed), ns_msg_end(*parsed), ns_rr_rdata(rr),
                                   target, sizeof target) < 0 ||
                in_chain(chain, n, target))
                return n;
            snprintf(chain[n++], NS_MAXDNAME, "%s", target);
            longer = true;
        }
    }
    return n;
}

/* Whether a name of the chain is on the operator's deny list: deny wins
 * over allow, for the names an allowed name leads to too. */
static bool chain_denied(char chain[][NS_MAXDNAME], size_t n, const rbx_egress_list *deny)
{
    for (size_t i = 1; deny && i < n; i++) {
        char name[NS_MAXDNAME];
        size_t len = strlen(chain[i]);
        for (size_t c = 0; c <= len; c++)
            name[c] = (char)tolower((unsigned char)chain[i][c]);
        if (len && name[len - 1] == '.')
            name[len - 1] = 0;
        if (rbx_egress_domain_listed(deny, name))
            return true;
    }
    return false;
}

size_t rbx_egress_dns_addresses(const rbx_egress_question *question, const uint8_t *msg,
                                size_t len, const rbx_egress_list *deny, rbx_egress_address *out,
                                size_t max)
{
    ns_msg parsed;
    if (len < HFIXEDSZ || len > DNS_MAX || ns_initparse(msg, (int)len, &parsed) != 0)
        return 0;
    char chain[CHAIN_MAX][NS_MAXDNAME];
    snprintf(chain[0], NS_MAXDNAME, "%s", question->name);
    size_t names = follow_chain(&parsed, chain);
    if (chain_denied(chain, names, deny))
        return 0;
    size_t n = 0;
    for (int i = 0; i < ns_msg_count(parsed, ns_s_an) && n < max; i++) {
        ns_rr rr;
        if (ns_parserr(&parsed, ns_s_an, i, &rr) != 0)
            break;
        int type = ns_rr_type(rr);
        int family = type == ns_t_a && ns_rr_rdlen(rr) == 4       ? AF_INET
                     : type == ns_t_aaaa && ns_rr_rdlen(rr) == 16 ? AF_INET6
                                                                  : 0;
        if (!family || ns_rr_class(rr) != ns_c_in ||
            (question->type != type && question->type != ns_t_any) ||
            !in_chain(chain, names, ns_rr_name(rr)))
            continue;
        out[n].family = family;
        memset(out[n].addr, 0, sizeof out[n].addr);
        memcpy(out[n].addr, ns_rr_rdata(rr), ns_rr_rdlen(rr));
        n++;
    }
    return n;
}

size_t rbx_egress_dns_refusal(uint8_t *msg, size_t len)
{
    HEADER *h = (HEADER *)msg;
    h->qr = 1;
    h->ra = 1;
    h->rcode = ns_r_refused;
    h->ancount = h->nscount = h->arcount = 0;
    /* Keep the question only: what follows it (EDNS) is dropped. */
    int name_len = len > HFIXEDSZ ? dn_skipname(msg + HFIXEDSZ, msg + len) : -1;
    bool whole = name_len > 0 && HFIXEDSZ + (size_t)name_len + 4 <= len;
    h->qdcount = htons(whole ? 1 : 0);
    return whole ? HFIXEDSZ + (size_t)name_len + 4 : HFIXEDSZ;
}

static void answer_refused(rbx_egress_guard *guard, uint8_t *msg, size_t len,
                           const struct sockaddr_storage *client, socklen_t client_len)
{
    size_t keep = rbx_egress_dns_refusal(msg, len);
    (void)sendto(guard->dns_fd, msg, keep, MSG_DONTWAIT, (const struct sockaddr *)client,
                 client_len);
}

static void ask(rbx_egress_guard *guard, uint8_t *msg, size_t len,
                const struct sockaddr_storage *client, socklen_t client_len)
{
    rbx_egress_question question;
    if (!rbx_egress_dns_question(msg, len, &question))
        return;
    const char *name = question.name;
    rbx_egress_name_verdict verdict = rbx_egress_judge_name(guard->plan, name);
    if (verdict.refused) {
        /* A lookup asks for A and AAAA, and retries: one name, one count. */
        bool seen = false;
        for (size_t i = 0; i < guard->names.count && !seen; i++)
            seen = !strcasecmp(guard->names.to[i], name);
        if (!seen)
            guard->names.refused++;
        rbx_egress_report_note(&guard->names, name);
        answer_refused(guard, msg, len, client, client_len);
        return;
    }
    if (guard->in_flight >= QUERIES_PER_GUARD)
        return;
    const rbx_egress_policy *policy = guard->plan->policy;
    int fd = socket(policy->resolver.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    long index = -1;
    query *q = calloc(1, sizeof *q);
    if (!q || connect(fd, (const struct sockaddr *)&policy->resolver, policy->resolver_len) != 0 ||
        send(fd, msg, len, 0) != (ssize_t)len ||
        (index = rbx_slot_take(&slots, q, SLOT_QUERY)) < 0) {
        free(q);
        close(fd);
        return;
    }
    *q = (query){.guard = guard,
                 .slot = (size_t)index,
                 .fd = fd,
                 .client = *client,
                 .client_len = client_len,
                 .question = question,
                 .verdict = verdict,
                 .deadline_ms = rbx_now_ms() + QUERY_TIMEOUT_MS};
    guard->in_flight++;
    query_link(q);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = rbx_slot_tag(&slots, (size_t)index)};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
        query_end(q);
}

/* The addresses that answer the allowed name, admitted before the program
 * sees them. Whoever answers for the name chooses them, so the policy's
 * ranges still hold (rbx_egress_name_may_admit); the answer reaches the
 * program whole, and a connection to what was not admitted is refused and
 * reported as any other. */
static void admit_answers(query *q, const uint8_t *msg, size_t len)
{
    if (!q->verdict.named_allow && !q->verdict.named_narrow)
        return;
    const rbx_egress_plan *plan = q->guard->plan;
    rbx_egress_address found[ADDRESSES_MAX];
    size_t n = rbx_egress_dns_addresses(&q->question, msg, len, &plan->policy->deny, found,
                                        ADDRESSES_MAX);
    for (size_t i = 0; i < n; i++) {
        if (!rbx_egress_name_may_admit(plan, found[i].family, found[i].addr))
            continue;
        if (q->verdict.named_allow)
            (void)rbx_egress_rules_admit(q->guard->nl_fd, false, found[i].family, found[i].addr);
        if (q->verdict.named_narrow)
            (void)rbx_egress_rules_admit(q->guard->nl_fd, true, found[i].family, found[i].addr);
    }
}

static void on_answer(query *q)
{
    uint8_t msg[DNS_MAX];
    ssize_t n = recv(q->fd, msg, sizeof msg, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    /* A datagram that is not the response to this question (another ID,
     * another question) is ignored, as a stub resolver ignores it, and
     * the query waits on for its answer until its deadline. */
    if (n >= 0 && !rbx_egress_dns_answers(&q->question, msg, (size_t)n))
        return;
    if (n > 0) {
        admit_answers(q, msg, (size_t)n);
        (void)sendto(q->guard->dns_fd, msg, (size_t)n, MSG_DONTWAIT,
                     (const struct sockaddr *)&q->client, q->client_len);
    }
    query_end(q);
}

static void on_questions(rbx_egress_guard *guard)
{
    for (int i = 0; i < 64; i++) {
        uint8_t msg[DNS_MAX];
        struct sockaddr_storage client;
        socklen_t client_len = sizeof client;
        ssize_t n = recvfrom(guard->dns_fd, msg, sizeof msg, MSG_DONTWAIT,
                             (struct sockaddr *)&client, &client_len);
        if (n < 0)
            return;
        ask(guard, msg, (size_t)n, &client, client_len);
    }
}

static sem_t thread_unshared;

/* The host's addresses as last given to the guards' rules (under lock):
 * what the host gained while sandboxes live is refused to them too
 * (host_addresses.c says why). */
static rbx_egress_list pushed;
static uint64_t pushed_generation;
/* What of pushed matters to one policy, selected once a push (a server's
 * sandboxes share its policy), not once a live sandbox. */
static rbx_egress_list pushed_mine;
static const rbx_egress_policy *pushed_mine_for;
static uint64_t pushed_mine_generation;
#define WATCH_TAG UINT64_MAX /* the epoll tag of the host's address changes */

/* Under lock: the guard's rules refuse the addresses last given (an open
 * policy refuses none of them: the operator's choice). */
static void bring_up_to_date(rbx_egress_guard *guard)
{
    if (guard->host_generation >= pushed_generation || guard->plan->policy->open)
        return;
    const rbx_egress_policy *policy = guard->plan->policy;
    if (pushed_mine_for != policy || pushed_mine_generation != pushed_generation) {
        rbx_egress_list mine;
        if (rbx_egress_host_select(policy, &pushed, &mine) != 0)
            return; /* out of memory: tried again with the next change */
        rbx_egress_list_free(&pushed_mine);
        pushed_mine = mine;
        pushed_mine_for = policy;
        pushed_mine_generation = pushed_generation;
    }
    if (pushed_mine.cidr_count)
        (void)rbx_egress_rules_deny_hosts(guard->nl_fd, &pushed_mine);
    guard->host_generation = pushed_generation;
}

/* Not under lock: what the kernel said of the host's addresses, given to
 * every guard's rules if the addresses changed. */
static void follow_host_changes(void)
{
    pthread_mutex_lock(&lock);
    uint64_t known = pushed_generation;
    pthread_mutex_unlock(&lock);
    rbx_egress_list list = {0};
    uint64_t generation;
    if (!rbx_egress_host_refresh(known, &list, &generation))
        return;
    pthread_mutex_lock(&lock);
    if (generation > pushed_generation) {
        rbx_egress_list_free(&pushed);
        pushed = list;
        list = (rbx_egress_list){0};
        pushed_generation = generation;
        for (size_t i = 0; i < slots.count; i++)
            if (slots.slots[i].item && slots.slots[i].kind == SLOT_GUARD)
                bring_up_to_date(slots.slots[i].item);
    }
    pthread_mutex_unlock(&lock);
    rbx_egress_list_free(&list);
}

static void *serve(void *unused)
{
    /* A thread shares the file-system context (root, cwd) of the thread
     * that made it, and a thread that shares its context cannot change
     * mount namespaces (setns says EINVAL): the execution thread that
     * started this one must get its own back before it goes on. */
    (void)unshare(CLONE_FS);
    sem_post(&thread_unshared);
    bool watching = false;
    for (;;) {
        if (!watching) { /* opened with the first plan, before any guard */
            int watch = rbx_egress_host_watch();
            struct epoll_event ev = {.events = EPOLLIN, .data.u64 = WATCH_TAG};
            watching = watch >= 0 && epoll_ctl(epfd, EPOLL_CTL_ADD, watch, &ev) == 0;
        }
        struct epoll_event events[32];
        int n = epoll_wait(epfd, events, 32, 1000);
        bool host_changed = n == 0; /* and once a second, in case */
        for (int i = 0; i < n; i++)
            host_changed |= events[i].data.u64 == WATCH_TAG;
        if (host_changed)
            follow_host_changes();
        pthread_mutex_lock(&lock);
        for (int i = 0; i < n; i++) {
            if (events[i].data.u64 == WATCH_TAG)
                continue;
            rbx_slot *slot = rbx_slot_of(&slots, events[i].data.u64);
            if (!slot)
                continue; /* freed since */
            if (slot->kind == SLOT_GUARD)
                on_questions(slot->item);
            else
                on_answer(slot->item);
        }
        int64_t now = rbx_now_ms();
        while (in_flight.first && in_flight.first->deadline_ms < now)
            query_end(in_flight.first);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

static int thread_error;

static void start_thread(void)
{
    epfd = epoll_create1(EPOLL_CLOEXEC);
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    sem_init(&thread_unshared, 0, 0);
    if (epfd < 0)
        thread_error = errno;
    else if ((thread_error = pthread_create(&thread, &attr, serve, NULL)) != 0) {
        close(epfd);
        epfd = -1;
    } else {
        while (sem_wait(&thread_unshared) != 0 && errno == EINTR)
            ;
    }
    pthread_attr_destroy(&attr);
}

void rbx_egress_guard_prepare(void)
{
    pthread_once(&started, start_thread);
}

rbx_egress_guard *rbx_egress_guard_start(int nl_fd, int dns_fd, const rbx_egress_plan *plan,
                                         rbx_error *err)
{
    pthread_once(&started, start_thread);
    rbx_egress_guard *guard = calloc(1, sizeof *guard);
    if (epfd < 0 || !guard) {
        free(guard);
        close(nl_fd);
        close(dns_fd);
        rbx_fail(err, RBX_ESYSTEM, "cannot start runbox's resolver for sandboxes: %s",
                 strerror(guard ? thread_error : ENOMEM));
        return NULL;
    }
    *guard = (rbx_egress_guard){
        .nl_fd = nl_fd, .dns_fd = dns_fd, .plan = plan, .host_generation = plan->host_generation};
    pthread_mutex_lock(&lock);
    long index = rbx_slot_take(&slots, guard, SLOT_GUARD);
    if (index >= 0) {
        guard->slot = (size_t)index;
        struct epoll_event ev = {.events = EPOLLIN,
                                 .data.u64 = rbx_slot_tag(&slots, (size_t)index)};
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, dns_fd, &ev) != 0) {
            rbx_slot_give(&slots, (size_t)index);
            index = -1;
        } else {
            /* What the host gained since its plan was made, and was given to
             * the others before it was here to get it. */
            bring_up_to_date(guard);
        }
    }
    pthread_mutex_unlock(&lock);
    if (index < 0) {
        int error = errno;
        close(nl_fd);
        close(dns_fd);
        free(guard);
        rbx_fail(err, RBX_ESYSTEM, "cannot watch the sandbox's resolver socket: %s",
                 strerror(error));
        return NULL;
    }
    return guard;
}

void rbx_egress_guard_take_report(rbx_egress_guard *guard, rbx_egress_report *report)
{
    pthread_mutex_lock(&lock);
    if (rbx_egress_plan_has_rules(guard->plan))
        rbx_egress_rules_take_report(guard->nl_fd, report);
    report->refused += guard->names.refused;
    for (size_t i = 0; i < guard->names.count; i++)
        rbx_egress_report_note(report, guard->names.to[i]);
    guard->names = (rbx_egress_report){0};
    pthread_mutex_unlock(&lock);
}

void rbx_egress_guard_stop(rbx_egress_guard *guard)
{
    if (!guard)
        return;
    pthread_mutex_lock(&lock);
    while (guard->queries.first)
        query_end(guard->queries.first);
    epoll_ctl(epfd, EPOLL_CTL_DEL, guard->dns_fd, NULL);
    rbx_slot_give(&slots, guard->slot);
    pthread_mutex_unlock(&lock);
    close(guard->dns_fd);
    close(guard->nl_fd);
    free(guard);
}
