/* Unit tests of the MCP server's change detection (src/mcp/changes.c), on
 * a real engine whose state directory is a fresh temporary directory. The
 * engine's rbx_file_list is wrapped (-Wl,--wrap, CMakeLists.txt) so that
 * each test can count the listings a tool call costs: none when nobody
 * needs its changes, one a call when the last listing is kept, and the
 * subscriber still told of each change. */
#include "unit_util.h"

#include "mcp/mcp.h"

#define SESSION "changes-unit"

rbx_status __real_rbx_file_list(rbx_engine *engine, const char *session_id,
                                rbx_file_info **files, size_t *count, rbx_error *err);
rbx_status __wrap_rbx_file_list(rbx_engine *engine, const char *session_id,
                                rbx_file_info **files, size_t *count, rbx_error *err);

static int listings; /* rbx_file_list calls since the test began */

rbx_status __wrap_rbx_file_list(rbx_engine *engine, const char *session_id,
                                rbx_file_info **files, size_t *count, rbx_error *err)
{
    listings++;
    return __real_rbx_file_list(engine, session_id, files, count, err);
}

typedef struct fixture {
    char state_dir[64];
    rbx_engine *engine;
    mcp_output *output;
    mcp_client *client;
    json_t *sent; /* what the client was sent, in order */
} fixture;

static void collect(void *context, json_t *message, bool droppable)
{
    (void)droppable;
    json_array_append_new(context, message);
}

static rbx_engine *engine_in(const char *state_dir)
{
    rbx_config config;
    rbx_config_defaults(&config);
    config.state_dir = state_dir;
    config.storage = RBX_STORAGE_CHOOSE_PLAIN;
    rbx_error err = {0};
    rbx_engine *engine = rbx_engine_new(&config, &err);
    if (!engine || rbx_session_create(engine, SESSION, &err) != RBX_OK ||
        rbx_file_put(engine, SESSION, "a.txt", "1", 1, &err) != RBX_OK)
        fail_msg("an engine with session " SESSION ": %s", err.message);
    return engine;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    make_temp_dir(f->state_dir, sizeof f->state_dir, "changes");
    f->engine = engine_in(f->state_dir);
    f->sent = json_array();
    assert_non_null(f->output = mcp_output_to(collect, f->sent));
    assert_non_null(f->client = mcp_client_start(f->output));
    listings = 0;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    mcp_client_stop(f->client);
    mcp_output_stop(f->output, 0);
    json_decref(f->sent);
    rbx_error err = {0};
    assert_int_equal(rbx_session_remove(f->engine, SESSION, 5, &err), RBX_OK);
    /* A call that nobody watches drops the session's kept listing: the next
     * test (whose engine may get this one's address) starts without it. */
    mcp_snapshot *before = mcp_changes_before(f->engine, NULL, SESSION, false);
    assert_null(before);
    rbx_engine_free(f->engine);
    remove_temp_tree(f->state_dir);
    free(f);
    return 0;
}

/* A tool call in the session that writes path: the listings around it,
 * as toolrun.c takes them. Returns the result's resource_link items. */
static json_t *call_writing(fixture *f, const char *path, const char *data, bool links)
{
    mcp_snapshot *before = mcp_changes_before(f->engine, f->output, SESSION, links);
    rbx_error err = {0};
    assert_int_equal(rbx_file_put(f->engine, SESSION, path, data, strlen(data), &err), RBX_OK);
    return mcp_changes_report(f->engine, f->output, SESSION, before);
}

/* The URIs of the notifications/resources/updated sent so far. */
static size_t updates_for(const fixture *f, const char *path)
{
    char *uri = mcp_resource_uri(SESSION, path);
    size_t i, found = 0;
    json_t *message;
    json_array_foreach(f->sent, i, message)
    {
        const char *method = json_string_value(json_object_get(message, "method"));
        json_t *params = json_object_get(message, "params");
        const char *told = json_string_value(json_object_get(params, "uri"));
        found += method && !strcmp(method, "notifications/resources/updated") && told &&
                 !strcmp(told, uri);
    }
    free(uri);
    return found;
}

static void nobody_subscribed_and_no_links_wanted_costs_no_listing(void **state)
{
    fixture *f = *state;
    mcp_client_set_version(f->client, "2025-03-26"); /* takes no resource_link */
    for (int call = 0; call < 3; call++)
        assert_null(call_writing(f, "a.txt", call % 2 ? "22" : "333", true));
    assert_int_equal(listings, 0);
    assert_int_equal(json_array_size(f->sent), 0);
    /* Nor does a subscription to another session's file, or a foreign URI. */
    char why[200];
    assert_true(mcp_client_subscribe(f->client, "runbox://sessions/other/files/a.txt", why,
                                     sizeof why));
    assert_true(mcp_client_subscribe(f->client, "https://example.com/a.txt", why, sizeof why));
    assert_null(call_writing(f, "a.txt", "4444", true));
    assert_int_equal(listings, 0);
}

static void a_subscriber_is_told_of_each_change_with_one_listing_a_call(void **state)
{
    fixture *f = *state;
    mcp_client_set_version(f->client, "2025-03-26");
    char *uri = mcp_resource_uri(SESSION, "a.txt"), why[200];
    assert_true(mcp_client_subscribe(f->client, uri, why, sizeof why));
    free(uri);
    /* The first call lists before and after; the next ones use the kept
     * listing as their before. The third is the same size in the same
     * second: compared by content, still told. A file it did not
     * subscribe to changes: a listing, nothing told. */
    static const struct {
        const char *path, *data;
        int listings, updates;
    } calls[] = {{"a.txt", "22", 2, 1}, {"a.txt", "333", 3, 2}, {"a.txt", "444", 4, 3},
                 {"b.txt", "b", 5, 3}};
    for (size_t i = 0; i < sizeof calls / sizeof *calls; i++) {
        json_decref(call_writing(f, calls[i].path, calls[i].data, true));
        assert_int_equal(listings, calls[i].listings);
        assert_int_equal(updates_for(f, "a.txt"), calls[i].updates);
    }
    assert_int_equal(updates_for(f, "b.txt"), 0);
}

/* A call that writes path links that one file alone, after listings in all. */
static void expect_linked_alone(fixture *f, const char *path, int after_listings)
{
    json_t *links = call_writing(f, path, "x", true);
    assert_int_equal(listings, after_listings);
    assert_int_equal(json_array_size(links), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(links, 0), "name")),
                        path);
    json_decref(links);
}

static void links_cost_one_listing_a_call_and_name_what_it_changed(void **state)
{
    fixture *f = *state;
    mcp_client_set_version(f->client, "2025-06-18"); /* takes resource_link items */
    expect_linked_alone(f, "made.txt", 2);
    expect_linked_alone(f, "second.txt", 3); /* made.txt is not reported again */
    /* close_session wants no links: with no subscriber, no listing. */
    assert_null(mcp_changes_before(f->engine, f->output, SESSION, false));
    assert_int_equal(listings, 3);
}

static void a_call_that_lists_nothing_drops_the_kept_listing(void **state)
{
    fixture *f = *state;
    mcp_client_set_version(f->client, "2025-06-18");
    json_decref(call_writing(f, "one.txt", "1", true)); /* lists twice, keeps the after */
    mcp_client_set_version(f->client, "2025-03-26");
    assert_null(call_writing(f, "two.txt", "2", true)); /* nobody needs it: lists nothing */
    assert_int_equal(listings, 2);
    mcp_client_set_version(f->client, "2025-06-18");
    /* two.txt was written by the call that listed nothing: had its kept
     * listing survived, this call would claim two.txt too. */
    expect_linked_alone(f, "three.txt", 4);
}

static void the_list_changes_concern_a_client_once_it_has_listed(void **state)
{
    fixture *f = *state;
    mcp_client_set_version(f->client, "2025-03-26");
    assert_false(mcp_client_watches(f->client, SESSION));
    mcp_client_set_listed(f->client);
    assert_true(mcp_client_watches(f->client, SESSION));
    json_decref(call_writing(f, "new.txt", "n", true));
    assert_int_equal(listings, 2);
    json_t *last = json_array_get(f->sent, json_array_size(f->sent) - 1);
    assert_string_equal(json_string_value(json_object_get(last, "method")),
                        "notifications/resources/list_changed");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(nobody_subscribed_and_no_links_wanted_costs_no_listing,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_subscriber_is_told_of_each_change_with_one_listing_a_call,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(links_cost_one_listing_a_call_and_name_what_it_changed,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_call_that_lists_nothing_drops_the_kept_listing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(the_list_changes_concern_a_client_once_it_has_listed,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
