/* Unit tests of shown.c: the rich outputs a program writes on its channel
 * (a Python one-off's report after "R"), however the bytes are split into
 * reads. The program writes them: anything that is not a display event is
 * left out and counted, and so is what passes the cap. */
#include "unit_util.h"

#include "execution/shown.h"

static const char two_events[] =
    "{\"type\":\"display\",\"kind\":\"display_data\",\"data\":{\"image/png\":\"iVBO\"}}\n"
    "{\"type\":\"display\",\"kind\":\"execute_result\",\"data\":{\"text/plain\":\"42\"}}\n";

static char *finish(rbx_shown *shown, rbx_result *result)
{
    memset(result, 0, sizeof *result);
    assert_int_equal(rbx_shown_finish(shown, result), RBX_OK);
    rbx_shown_free(shown);
    return result->results;
}

static void events_are_kept_however_the_reads_split_them(void **state)
{
    (void)state;
    size_t len = strlen(two_events);
    for (size_t chunk = 1; chunk <= len; chunk++) {
        rbx_shown shown;
        rbx_shown_init(&shown, NULL, NULL);
        for (size_t at = 0; at < len; at += chunk)
            rbx_shown_feed(&shown, two_events + at, at + chunk > len ? len - at : chunk);
        rbx_result result;
        char *results = finish(&shown, &result);
        assert_string_equal(results, "[{\"kind\":\"display_data\",\"data\":{\"image/png\":\"iVBO\"}},"
                                     "{\"kind\":\"execute_result\",\"data\":{\"text/plain\":\"42\"}}]");
        assert_int_equal(result.truncated_results, 0);
        free(results);
    }
}

static void anything_but_a_display_event_is_counted_not_kept(void **state)
{
    (void)state;
    static const char *const junk[] = {
        "not json",
        "{\"type\":\"done\",\"id\":1,\"status\":\"ok\"}",
        "{\"type\":\"display\",\"kind\":\"stream\",\"data\":{}}",
        "{\"type\":\"display\",\"kind\":\"display_data\",\"data\":\"x\"}",
        "{\"type\":\"display\",\"kind\":\"display_data\"}",
        "{\"type\":\"display\",\"type\":\"display\",\"kind\":\"display_data\",\"data\":{}}",
        "\xff\xfe",
        "",
    };
    rbx_shown shown;
    rbx_shown_init(&shown, NULL, NULL);
    size_t junk_bytes = 0;
    for (size_t i = 0; i < sizeof junk / sizeof *junk; i++) {
        rbx_shown_feed(&shown, junk[i], strlen(junk[i]));
        rbx_shown_feed(&shown, "\n", 1);
        junk_bytes += strlen(junk[i]);
    }
    rbx_shown_feed(&shown, "{\"type\":\"display\"", 17); /* never finished */
    rbx_result result;
    char *results = finish(&shown, &result);
    assert_string_equal(results, "[]");
    assert_int_equal(result.truncated_results, junk_bytes + 17);
    free(results);
}

/* A display event of n bytes of text. */
static char *event_of(size_t n, char fill)
{
    static const char head[] = "{\"type\":\"display\",\"kind\":\"display_data\",\"data\":{\"t\":\"";
    char *line = malloc(sizeof head + n + 8);
    memcpy(line, head, sizeof head - 1);
    memset(line + sizeof head - 1, fill, n);
    strcpy(line + sizeof head - 1 + n, "\"}}\n");
    return line;
}

static void the_cap_holds_and_an_endless_line_is_skipped(void **state)
{
    (void)state;
    rbx_shown shown;
    rbx_shown_init(&shown, NULL, NULL);
    /* Longer than anything that could be kept: skipped as it comes, in 64 KiB reads. */
    char *block = malloc(65536);
    memset(block, 'x', 65536);
    size_t endless = 0;
    while (endless < RBX_RESULTS_CAP + (2u << 20)) {
        rbx_shown_feed(&shown, block, 65536);
        endless += 65536;
    }
    assert_true(shown.line_cap <= RBX_RESULTS_CAP + (1u << 20));
    rbx_shown_feed(&shown, "\n", 1);
    free(block);
    /* Three outputs of 3 MiB: the third passes the 8 MiB cap. */
    size_t kept_len = 0;
    for (char c = 'a'; c <= 'c'; c++) {
        char *line = event_of(3u << 20, c);
        rbx_shown_feed(&shown, line, strlen(line));
        kept_len = strlen(line) - 1;
        free(line);
    }
    rbx_result result;
    char *results = finish(&shown, &result);
    json_t *kept = json_loads(results, 0, NULL);
    assert_int_equal(json_array_size(kept), 2);
    assert_true(result.truncated_results >= endless + kept_len - 100);
    json_decref(kept);
    free(results);
}

static int stop_after_one(void *user, rbx_stream stream, const char *data, size_t len)
{
    (void)data;
    (void)len;
    assert_int_equal(stream, RBX_DISPLAY);
    return ++*(int *)user >= 1;
}

static void a_client_gone_away_stops_the_run(void **state)
{
    (void)state;
    int calls = 0;
    rbx_shown shown;
    rbx_shown_init(&shown, stop_after_one, &calls);
    rbx_shown_feed(&shown, two_events, strlen(two_events));
    assert_true(shown.cancelled);
    rbx_shown_free(&shown);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(events_are_kept_however_the_reads_split_them),
        cmocka_unit_test(anything_but_a_display_event_is_counted_not_kept),
        cmocka_unit_test(the_cap_holds_and_an_endless_line_is_skipped),
        cmocka_unit_test(a_client_gone_away_stops_the_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
