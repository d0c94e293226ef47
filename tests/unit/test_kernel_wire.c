/* Unit tests of kernel_wire.c: what runbox sends a kernel's driver and how
 * it reads the driver's answers (the answers come from inside a sandbox:
 * anything that is not exactly an event is refused). */
#include "unit_util.h"

#include "kernels/wire.h"

static void json_request_is_one_line_with_code_and_env(void **state)
{
    (void)state;
    const char *env[] = {"GREETING=hi", "EMPTY="};
    size_t len;
    rbx_kernel_wire_call call = {
        .id = 5, .code = "print('a\nb')", .code_len = 12, .env = env, .env_count = 2};
    char *line = rbx_kernel_wire_request(RBX_KERNEL_JSON, &call, &len);
    assert_non_null(line);
    assert_int_equal(line[len - 1], '\n');
    assert_ptr_equal(memchr(line, '\n', len), line + len - 1);
    json_t *back = json_loadb(line, len - 1, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(back, "id")), 5);
    assert_string_equal(json_string_value(json_object_get(back, "code")), "print('a\nb')");
    json_t *vars = json_object_get(back, "env");
    assert_string_equal(json_string_value(json_object_get(vars, "GREETING")), "hi");
    assert_string_equal(json_string_value(json_object_get(vars, "EMPTY")), "");
    assert_null(json_object_get(back, "cwd")); /* only a fresh kernel's first call has one */
    json_decref(back);
    free(line);
}

static void a_fresh_kernel_is_told_where_to_start(void **state)
{
    (void)state;
    size_t len;
    rbx_kernel_wire_call call = {.id = 1, .code = "x", .code_len = 1, .cwd = "/home/user/it's"};
    char *line = rbx_kernel_wire_request(RBX_KERNEL_JSON, &call, &len);
    json_t *back = json_loadb(line, len - 1, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(back, "cwd")), "/home/user/it's");
    json_decref(back);
    free(line);
    char *text = rbx_kernel_wire_request(RBX_KERNEL_BASH, &call, &len);
    assert_non_null(text);
    /* After the call's mark, quoted byte for byte, before the call begins. */
    const char *want = "__rbx_start 1\nbuiltin cd -- $'/home/user/it\\x27s'\n__rbx_begin 1 ";
    assert_memory_equal(text, want, strlen(want));
    free(text);
}

static void bash_request_quotes_every_unsafe_byte(void **state)
{
    (void)state;
    const char code[] = "echo 'x'\n$(rm -rf /)\xff";
    size_t len;
    rbx_kernel_wire_call call = {.id = 9, .code = code, .code_len = sizeof code - 1};
    char *text = rbx_kernel_wire_request(RBX_KERNEL_BASH, &call, &len);
    assert_non_null(text);
    assert_string_equal(text, "__rbx_start 9\n"
                              "__rbx_begin 9 $'echo \\x27x\\x27\\x0a\\x24(rm -rf /)\\xff'\n"
                              "[[ $__rbx_ok ]] && { eval \"$__rbx_code\"; } </dev/null\n");
    free(text);
}

static void bash_request_sets_and_restores_env(void **state)
{
    (void)state;
    const char *env[] = {"A=1 2"};
    size_t len;
    rbx_kernel_wire_call call = {
        .id = 1, .code = "true", .code_len = 4, .env = env, .env_count = 1};
    char *text = rbx_kernel_wire_request(RBX_KERNEL_BASH, &call, &len);
    assert_non_null(strstr(text, "__rbx_env_set $'A' $'1 2'\n"));
    assert_non_null(strstr(text, "__rbx_env_restore\n"));
    free(text);
}

static void display_and_done_events_parse(void **state)
{
    (void)state;
    rbx_kernel_event e;
    const char *display = "{\"type\": \"display\", \"kind\": \"execute_result\", "
                          "\"data\": {\"text/plain\": \"42\"}}";
    assert_true(rbx_kernel_wire_parse(RBX_KERNEL_JSON, display, strlen(display), &e));
    assert_int_equal(e.type, RBX_KERNEL_EVENT_DISPLAY);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(e.output, "data"), "text/plain")), "42");
    rbx_kernel_event_free(&e);
    const char *done = "{\"type\": \"done\", \"id\": 3, \"status\": \"error\", "
                       "\"exception\": \"ZeroDivisionError\", \"execution_count\": 7}";
    assert_true(rbx_kernel_wire_parse(RBX_KERNEL_JSON, done, strlen(done), &e));
    assert_int_equal(e.type, RBX_KERNEL_EVENT_DONE);
    assert_int_equal(e.id, 3);
    assert_int_equal(e.status, RBX_KERNEL_ERROR);
    assert_int_equal(e.exit_code, 1);
    assert_int_equal(e.execution_count, 7);
    assert_string_equal(e.exception, "ZeroDivisionError");
    rbx_kernel_event_free(&e);
    assert_true(rbx_kernel_wire_parse(RBX_KERNEL_BASH, "D 4 130", 7, &e));
    assert_int_equal(e.status, RBX_KERNEL_INTERRUPTED);
    assert_int_equal(e.id, 4);
    assert_true(rbx_kernel_wire_parse(RBX_KERNEL_BASH, "S 5", 3, &e));
    assert_int_equal(e.status, RBX_KERNEL_SYNTAX);
}

static void start_events_and_marks(void **state)
{
    (void)state;
    rbx_kernel_event e;
    const char *start = "{\"type\": \"start\", \"id\": 9007199254740991}";
    assert_true(rbx_kernel_wire_parse(RBX_KERNEL_JSON, start, strlen(start), &e));
    assert_int_equal(e.type, RBX_KERNEL_EVENT_START);
    assert_int_equal(e.id, 9007199254740991LL);
    assert_true(rbx_kernel_wire_parse(RBX_KERNEL_BASH, "B 77", 4, &e));
    assert_int_equal(e.type, RBX_KERNEL_EVENT_START);
    assert_int_equal(e.id, 77);
    char mark[48];
    assert_int_equal(rbx_kernel_wire_mark(77, mark, sizeof mark), 11);
    assert_memory_equal(mark, "\036runbox:77\036", 11);
    /* Ids are random, positive and exact as JavaScript numbers. */
    int64_t first = rbx_kernel_wire_new_id(), differ = 0;
    for (int i = 0; i < 64; i++) {
        int64_t id = rbx_kernel_wire_new_id();
        assert_true(id > 0 && id < ((int64_t)1 << 53));
        differ += id != first;
    }
    assert_true(differ >= 63);
    /* A bash request opens with the call's mark, before cd and env. */
    const char *env[] = {"A=1"};
    size_t len;
    rbx_kernel_wire_call call = {.id = 12345, .code = "true", .code_len = 4, .env = env,
                                 .env_count = 1, .cwd = "/home/user"};
    char *text = rbx_kernel_wire_request(RBX_KERNEL_BASH, &call, &len);
    assert_true(strncmp(text, "__rbx_start 12345\n", 18) == 0);
    assert_non_null(strstr(text, "__rbx_begin 12345 $'true'"));
    free(text);
}

static void anything_else_is_refused(void **state)
{
    (void)state;
    static const char *const bad_json[] = {
        "",
        "not json",
        "[]",
        "{\"type\": \"display\", \"kind\": \"other\", \"data\": {}}",
        "{\"type\": \"display\", \"kind\": \"display_data\", \"data\": \"text\"}",
        "{\"type\": \"done\", \"status\": \"exploded\"}",
        "{\"type\": \"done\", \"status\": \"ok\", \"status\": \"error\"}", /* duplicate key */
        "{\"type\": \"start\"}",
        "{\"type\": \"start\", \"id\": \"7\"}",
    };
    rbx_kernel_event e;
    for (size_t i = 0; i < sizeof bad_json / sizeof *bad_json; i++) {
        assert_false(rbx_kernel_wire_parse(RBX_KERNEL_JSON, bad_json[i], strlen(bad_json[i]), &e));
        rbx_kernel_event_free(&e);
    }
    static const char *const bad_bash[] = {"", "D", "D x 1", "X 1 2", "S", "B", "B x"};
    for (size_t i = 0; i < sizeof bad_bash / sizeof *bad_bash; i++)
        assert_false(rbx_kernel_wire_parse(RBX_KERNEL_BASH, bad_bash[i], strlen(bad_bash[i]), &e));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(json_request_is_one_line_with_code_and_env),
        cmocka_unit_test(a_fresh_kernel_is_told_where_to_start),
        cmocka_unit_test(bash_request_quotes_every_unsafe_byte),
        cmocka_unit_test(bash_request_sets_and_restores_env),
        cmocka_unit_test(display_and_done_events_parse),
        cmocka_unit_test(start_events_and_marks),
        cmocka_unit_test(anything_else_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
