/* Unit tests of the local socket's server (local/server.c) as it closes: a
 * daemon gone idle must not drop a call that came in its last moment. Once
 * it closes, every connection, taken or still waiting to be, is answered
 * "closing" (the CLI then goes to the process in its place), and it never
 * closes while it serves a connection. On a real engine whose state
 * directory is a fresh temporary directory; only "ping" is sent, so no
 * sandbox is made. */
#include "unit_util.h"

#include "engine/engine.h"
#include "local/local.h"
#include "runbox.h"

#include <poll.h>
#include <sys/socket.h>
#include <time.h>

typedef struct fixture {
    char state_dir[64];
    rbx_engine *engine;
    local_server *server;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    make_temp_dir(f->state_dir, sizeof f->state_dir, "local");
    rbx_config config;
    rbx_config_defaults(&config);
    config.state_dir = f->state_dir;
    config.storage = RBX_STORAGE_CHOOSE_PLAIN;
    rbx_error err = {0};
    f->engine = rbx_engine_new(&config, &err);
    if (!f->engine)
        fail_msg("rbx_engine_new: %s", err.message);
    char why[300];
    int owner = 0;
    int fd = local_listen_at(f->state_dir, "test.sock", &owner, why, sizeof why);
    if (fd < 0)
        fail_msg("local_listen_at: %s", why);
    f->server = local_server_start(f->engine, fd, true);
    assert_non_null(f->server);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    local_server_stop(f->server);
    rbx_engine_free(f->engine);
    remove_temp_tree(f->state_dir);
    free(f);
    return 0;
}

static int connect_to(fixture *f)
{
    int fd = local_connect(f->state_dir, "test.sock");
    assert_true(fd >= 0);
    return fd;
}

/* The "type" of the first line the server answers on fd (sending line
 * first, when there is one), or "" when it ends the connection without. */
static const char *answer(int fd, const char *line, char *type, size_t size)
{
    if (line)
        (void)!send(fd, line, strlen(line), MSG_NOSIGNAL);
    char buf[4096];
    size_t used = 0;
    struct pollfd in = {.fd = fd, .events = POLLIN};
    while (used < sizeof buf - 1 && !memchr(buf, '\n', used)) {
        assert_int_equal(poll(&in, 1, 10000), 1); /* never a hang */
        ssize_t n = read(fd, buf + used, sizeof buf - 1 - used);
        if (n <= 0)
            break;
        used += (size_t)n;
    }
    buf[used] = '\0';
    json_t *value = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
    snprintf(type, size, "%s", json_string_value(json_object_get(value, "type")) ?: "");
    json_decref(value);
    close(fd);
    return type;
}

static void wait_active(fixture *f, bool active)
{
    int64_t since;
    for (int i = 0; i < 1000 && local_server_idle(f->server, &since) == active; i++) {
        struct timespec pause = {.tv_nsec = 5 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    assert_true(local_server_idle(f->server, &since) != active);
}

static void test_it_does_not_close_while_it_holds_a_connection(void **state)
{
    fixture *f = *state;
    int held = connect_to(f);
    wait_active(f, true);
    int64_t since;
    assert_false(local_server_idle(f->server, &since));
    assert_false(local_server_close_if_idle(f->server, since));
    char type[64];
    assert_string_equal(answer(held, "{\"op\": \"ping\"}\n", type, sizeof type), "pong");
}

static void test_it_does_not_close_when_a_connection_came_and_went_since(void **state)
{
    fixture *f = *state;
    int64_t since;
    assert_true(local_server_idle(f->server, &since));
    /* Most likely within the same millisecond as since: told apart all the same. */
    char type[64];
    assert_string_equal(answer(connect_to(f), "{\"op\": \"ping\"}\n", type, sizeof type), "pong");
    wait_active(f, false);
    assert_false(local_server_close_if_idle(f->server, since));
    assert_string_equal(answer(connect_to(f), "{\"op\": \"ping\"}\n", type, sizeof type), "pong");
}

static void test_once_closed_every_connection_is_answered_closing(void **state)
{
    fixture *f = *state;
    int64_t since;
    assert_true(local_server_idle(f->server, &since));
    assert_true(local_server_close_if_idle(f->server, since));
    char type[64];
    /* Answered before it sends anything, and after. */
    assert_string_equal(answer(connect_to(f), NULL, type, sizeof type), "closing");
    assert_string_equal(answer(connect_to(f), "{\"op\": \"execute\"}\n", type, sizeof type),
                        "closing");
    assert_true(local_server_idle(f->server, &since)); /* none of them was taken */
}

static void test_connections_waiting_when_it_stops_are_answered_closing(void **state)
{
    fixture *f = *state;
    int64_t since;
    assert_true(local_server_idle(f->server, &since));
    assert_true(local_server_close_if_idle(f->server, since));
    /* Connected just before the stop: whether the server's thread took
     * them or the stop finds them still queued on the listening socket,
     * each gets "closing" (a queued one was dropped, an end without an
     * answer, before the stop answered the queue). */
    int waiting[16];
    for (size_t i = 0; i < 16; i++)
        waiting[i] = connect_to(f);
    local_server_stop(f->server);
    f->server = NULL;
    char type[64];
    for (size_t i = 0; i < 16; i++)
        assert_string_equal(answer(waiting[i], NULL, type, sizeof type), "closing");
}

static int64_t monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* runbox serve's stop: no new call, those running have until the end of
 * the grace period. */
static void test_closed_it_waits_for_the_calls_it_holds_until_the_deadline(void **state)
{
    fixture *f = *state;
    int held = connect_to(f);
    wait_active(f, true);
    local_server_close(f->server);
    char type[64];
    assert_string_equal(answer(connect_to(f), NULL, type, sizeof type), "closing");
    int64_t start = monotonic_ms();
    assert_false(local_server_wait_idle(f->server, start + 200));
    assert_true(monotonic_ms() - start >= 200);
    /* The held one is still served, and once it ends the wait does. */
    assert_string_equal(answer(held, "{\"op\": \"ping\"}\n", type, sizeof type), "pong");
    assert_true(local_server_wait_idle(f->server, monotonic_ms() + 10000));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_it_does_not_close_while_it_holds_a_connection,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_it_does_not_close_when_a_connection_came_and_went_since, setup, teardown),
        cmocka_unit_test_setup_teardown(test_once_closed_every_connection_is_answered_closing,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_connections_waiting_when_it_stops_are_answered_closing, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_closed_it_waits_for_the_calls_it_holds_until_the_deadline, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
