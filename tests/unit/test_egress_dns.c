/* Unit tests of the resolver's readers (sandbox/egress_dns.c): which reply
 * is taken for the answer to a question, and which addresses of a hostile
 * answer answer the name that was asked. Messages are built here byte by
 * byte, as an attacker who controls the names' DNS would write them. */
#include "unit_util.h"

#include "egress/dns.h"

#include <arpa/inet.h>

enum { T_A = 1, T_CNAME = 5, T_AAAA = 28, T_ANY = 255, C_IN = 1, C_CH = 3 };

typedef struct message {
    uint8_t b[4096];
    size_t len;
} message;

static void put16(message *m, unsigned value)
{
    m->b[m->len++] = (uint8_t)(value >> 8);
    m->b[m->len++] = (uint8_t)value;
}

static void put_name(message *m, const char *name)
{
    while (*name) {
        size_t label = strcspn(name, ".");
        m->b[m->len++] = (uint8_t)label;
        memcpy(m->b + m->len, name, label);
        m->len += label;
        name += label + (name[label] == '.');
    }
    m->b[m->len++] = 0;
}

/* A header (counts set by finish) and one question. */
static message start(unsigned id, bool response, const char *name, unsigned type)
{
    message m = {.len = 0};
    put16(&m, id);
    put16(&m, response ? 0x8180 : 0x0100);
    for (int i = 0; i < 4; i++)
        put16(&m, 0);
    put_name(&m, name);
    put16(&m, type);
    put16(&m, C_IN);
    return m;
}

static void finish(message *m, unsigned qd, unsigned an, unsigned ns, unsigned ar)
{
    unsigned counts[] = {qd, an, ns, ar};
    for (int i = 0; i < 4; i++) {
        m->b[4 + 2 * i] = (uint8_t)(counts[i] >> 8);
        m->b[5 + 2 * i] = (uint8_t)counts[i];
    }
}

static void record(message *m, const char *owner, unsigned type, unsigned klass, const void *data,
                   size_t len)
{
    put_name(m, owner);
    put16(m, type);
    put16(m, klass);
    put16(m, 0);
    put16(m, 60);
    put16(m, (unsigned)len);
    memcpy(m->b + m->len, data, len);
    m->len += len;
}

static void a(message *m, const char *owner, const char *addr)
{
    uint8_t bytes[4];
    assert_int_equal(inet_pton(AF_INET, addr, bytes), 1);
    record(m, owner, T_A, C_IN, bytes, 4);
}

static void aaaa(message *m, const char *owner, const char *addr)
{
    uint8_t bytes[16];
    assert_int_equal(inet_pton(AF_INET6, addr, bytes), 1);
    record(m, owner, T_AAAA, C_IN, bytes, 16);
}

static void cname(message *m, const char *owner, const char *target)
{
    message data = {.len = 0};
    put_name(&data, target);
    record(m, owner, T_CNAME, C_IN, data.b, data.len);
}

static rbx_egress_question asked(const char *name, unsigned type)
{
    message q = start(0x1234, false, name, type);
    finish(&q, 1, 0, 0, 0);
    rbx_egress_question question;
    assert_true(rbx_egress_dns_question(q.b, q.len, &question));
    return question;
}

/* The addresses of m for question, as text, comma-separated. */
static const char *addresses(const rbx_egress_question *question, const message *m,
                             const rbx_egress_list *deny)
{
    static char text[1024];
    rbx_egress_address out[64];
    size_t n = rbx_egress_dns_addresses(question, m->b, m->len, deny, out, 64);
    text[0] = 0;
    for (size_t i = 0; i < n; i++) {
        char addr[INET6_ADDRSTRLEN];
        assert_non_null(inet_ntop(out[i].family, out[i].addr, addr, sizeof addr));
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s%s", i ? "," : "", addr);
    }
    return text;
}

static void test_a_query_has_one_question_and_a_reply_is_no_query(void **state)
{
    rbx_egress_question question = asked("Meta.Good.Test", T_AAAA);
    assert_string_equal(question.name, "Meta.Good.Test");
    assert_int_equal(question.type, T_AAAA);
    assert_int_equal(question.qclass, C_IN);
    assert_memory_equal(question.id, "\x12\x34", 2);
    message m = start(1, true, "meta.good.test", T_A);
    finish(&m, 1, 0, 0, 0);
    assert_false(rbx_egress_dns_question(m.b, m.len, &question));
    m = start(1, false, "meta.good.test", T_A);
    put_name(&m, "other.test");
    put16(&m, T_A);
    put16(&m, C_IN);
    finish(&m, 2, 0, 0, 0);
    assert_false(rbx_egress_dns_question(m.b, m.len, &question));
    assert_false(rbx_egress_dns_question(m.b, 11, &question));
}

static void test_only_the_reply_to_the_question_is_the_answer(void **state)
{
    rbx_egress_question question = asked("meta.good.test", T_A);
    message m = start(0x1234, true, "meta.good.test", T_A);
    finish(&m, 1, 0, 0, 0);
    assert_true(rbx_egress_dns_answers(&question, m.b, m.len));
    /* The name in another case is the same name (0x20 randomisation). */
    m = start(0x1234, true, "META.good.TEST", T_A);
    finish(&m, 1, 0, 0, 0);
    assert_true(rbx_egress_dns_answers(&question, m.b, m.len));
    /* Another ID, another name, another type, not a response, no question. */
    m = start(0x1235, true, "meta.good.test", T_A);
    finish(&m, 1, 0, 0, 0);
    assert_false(rbx_egress_dns_answers(&question, m.b, m.len));
    m = start(0x1234, true, "other.good.test", T_A);
    finish(&m, 1, 0, 0, 0);
    assert_false(rbx_egress_dns_answers(&question, m.b, m.len));
    m = start(0x1234, true, "meta.good.test.evil", T_A);
    finish(&m, 1, 0, 0, 0);
    assert_false(rbx_egress_dns_answers(&question, m.b, m.len));
    m = start(0x1234, true, "meta.good.test", T_AAAA);
    finish(&m, 1, 0, 0, 0);
    assert_false(rbx_egress_dns_answers(&question, m.b, m.len));
    m = start(0x1234, false, "meta.good.test", T_A);
    finish(&m, 1, 0, 0, 0);
    assert_false(rbx_egress_dns_answers(&question, m.b, m.len));
    m = start(0x1234, true, "meta.good.test", T_A);
    finish(&m, 0, 0, 0, 0);
    assert_false(rbx_egress_dns_answers(&question, m.b, m.len));
    /* Counts that promise more records than the message holds. */
    m = start(0x1234, true, "meta.good.test", T_A);
    finish(&m, 1, 3, 0, 0);
    assert_false(rbx_egress_dns_answers(&question, m.b, m.len));
    assert_false(rbx_egress_dns_answers(&question, m.b, 0));
}

static void test_other_names_records_and_other_sections_are_not_the_answer(void **state)
{
    rbx_egress_question question = asked("mixed.good.test", T_A);
    message m = start(0x1234, true, "mixed.good.test", T_A);
    a(&m, "mixed.good.test", "198.51.100.1");
    a(&m, "unrelated.test", "198.51.100.2");
    a(&m, "good.test", "198.51.100.3");
    a(&m, "x.mixed.good.test", "198.51.100.4");
    a(&m, "mixed.good.test.evil", "198.51.100.5");
    a(&m, "other.good.test", "198.51.100.6");
    a(&m, "extra.test", "198.51.100.7"); /* authority */
    a(&m, "mixed.good.test", "198.51.100.8"); /* additional, though the asked name's */
    finish(&m, 1, 6, 1, 1);
    assert_string_equal(addresses(&question, &m, NULL), "198.51.100.1");
}

static void test_the_cname_chain_is_followed_and_nothing_beside_it(void **state)
{
    rbx_egress_question question = asked("chain.good.test", T_A);
    message m = start(0x1234, true, "chain.good.test", T_A);
    a(&m, "far.cdn.test", "198.51.100.5"); /* the end of a chain from another name */
    cname(&m, "decoy.good.test", "far.cdn.test");
    cname(&m, "chain.good.test", "EDGE.cdn.test");
    cname(&m, "edge.CDN.test", "last.cdn.test");
    a(&m, "last.cdn.test", "198.51.100.4");
    a(&m, "edge.cdn.test", "198.51.100.6"); /* a CNAME's owner has no address, but it is the
                                                chain's: no other name's */
    finish(&m, 1, 6, 0, 0);
    assert_string_equal(addresses(&question, &m, NULL), "198.51.100.4,198.51.100.6");
}

static void test_a_chain_through_a_denied_name_admits_nothing(void **state)
{
    rbx_egress_list deny = {0};
    rbx_error err = {0};
    assert_int_equal(rbx_egress_list_parse(&deny, "*.evil.test", "--egress-deny", &err), RBX_OK);
    rbx_egress_question question = asked("chain.good.test", T_A);
    message m = start(0x1234, true, "chain.good.test", T_A);
    cname(&m, "chain.good.test", "Edge.EVIL.test");
    a(&m, "edge.evil.test", "198.51.100.4");
    finish(&m, 1, 2, 0, 0);
    assert_string_equal(addresses(&question, &m, &deny), "");
    assert_string_equal(addresses(&question, &m, NULL), "198.51.100.4");
    rbx_egress_list_free(&deny);
}

static void test_loops_and_long_chains_end(void **state)
{
    rbx_egress_question question = asked("loop.good.test", T_A);
    message m = start(0x1234, true, "loop.good.test", T_A);
    cname(&m, "loop.good.test", "b.good.test");
    cname(&m, "b.good.test", "LOOP.good.test");
    a(&m, "b.good.test", "198.51.100.1");
    finish(&m, 1, 3, 0, 0);
    assert_string_equal(addresses(&question, &m, NULL), "198.51.100.1");

    /* A chain of 40 names: the first 16 are followed, the end is not reached. */
    question = asked("n0.good.test", T_A);
    m = start(0x1234, true, "n0.good.test", T_A);
    for (int i = 0; i < 40; i++) {
        char owner[32], target[32];
        snprintf(owner, sizeof owner, "n%d.good.test", i);
        snprintf(target, sizeof target, "n%d.good.test", i + 1);
        cname(&m, owner, target);
    }
    a(&m, "n15.good.test", "198.51.100.15");
    a(&m, "n40.good.test", "198.51.100.40");
    finish(&m, 1, 42, 0, 0);
    assert_string_equal(addresses(&question, &m, NULL), "198.51.100.15");
}

static void test_a_compression_loop_is_no_answer(void **state)
{
    rbx_egress_question question = asked("loop.good.test", T_A);
    message m = start(0x1234, true, "loop.good.test", T_A);
    size_t owner = m.len;
    put16(&m, 0xc000 | (unsigned)owner); /* the owner name points at itself */
    put16(&m, T_A);
    put16(&m, C_IN);
    put16(&m, 0);
    put16(&m, 60);
    put16(&m, 4);
    memcpy(m.b + m.len, "\xc6\x33\x64\x01", 4);
    m.len += 4;
    finish(&m, 1, 1, 0, 0);
    assert_true(rbx_egress_dns_answers(&question, m.b, m.len)); /* its question is fine */
    assert_string_equal(addresses(&question, &m, NULL), "");
    /* A CNAME whose target points at itself: the chain ends there. */
    m = start(0x1234, true, "loop.good.test", T_A);
    put_name(&m, "loop.good.test");
    put16(&m, T_CNAME);
    put16(&m, C_IN);
    put16(&m, 0);
    put16(&m, 60);
    put16(&m, 2);
    put16(&m, 0xc000 | (unsigned)m.len);
    a(&m, "loop.good.test", "198.51.100.1");
    finish(&m, 1, 2, 0, 0);
    assert_string_equal(addresses(&question, &m, NULL), "198.51.100.1");
}

static void test_only_the_type_and_class_asked(void **state)
{
    rbx_egress_question question = asked("v.good.test", T_A);
    message m = start(0x1234, true, "v.good.test", T_A);
    a(&m, "v.good.test", "198.51.100.1");
    aaaa(&m, "v.good.test", "2001:db8::1");
    record(&m, "v.good.test", T_A, C_CH, "\xc6\x33\x64\x02", 4);
    record(&m, "v.good.test", T_A, C_IN, "\xc6\x33\x64\x03\x00", 5); /* not 4 bytes */
    record(&m, "v.good.test", T_AAAA, C_IN, "\xc6\x33\x64\x04", 4);
    finish(&m, 1, 5, 0, 0);
    assert_string_equal(addresses(&question, &m, NULL), "198.51.100.1");
    question = asked("v.good.test", T_AAAA);
    assert_string_equal(addresses(&question, &m, NULL), "2001:db8::1");
    question = asked("v.good.test", T_ANY);
    assert_string_equal(addresses(&question, &m, NULL), "198.51.100.1,2001:db8::1");
}

static void test_no_more_addresses_than_asked_for(void **state)
{
    rbx_egress_question question = asked("many.good.test", T_A);
    message m = start(0x1234, true, "many.good.test", T_A);
    for (int i = 0; i < 100; i++) {
        char addr[32];
        snprintf(addr, sizeof addr, "198.51.100.%d", i);
        a(&m, "many.good.test", addr);
    }
    finish(&m, 1, 100, 0, 0);
    rbx_egress_address out[8];
    assert_int_equal(rbx_egress_dns_addresses(&question, m.b, m.len, NULL, out, 8), 8);
    assert_int_equal(rbx_egress_dns_addresses(&question, m.b, m.len, NULL, out, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_query_has_one_question_and_a_reply_is_no_query),
        cmocka_unit_test(test_only_the_reply_to_the_question_is_the_answer),
        cmocka_unit_test(test_other_names_records_and_other_sections_are_not_the_answer),
        cmocka_unit_test(test_the_cname_chain_is_followed_and_nothing_beside_it),
        cmocka_unit_test(test_a_chain_through_a_denied_name_admits_nothing),
        cmocka_unit_test(test_loops_and_long_chains_end),
        cmocka_unit_test(test_a_compression_loop_is_no_answer),
        cmocka_unit_test(test_only_the_type_and_class_asked),
        cmocka_unit_test(test_no_more_addresses_than_asked_for),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
