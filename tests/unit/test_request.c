/* Unit tests of request.c: what rbx_request_validate() accepts and what it
 * rejects, with a message that says what is accepted. */
#include "unit_util.h"

#include "engine/engine.h"
#include "execution/request.h"
#include "languages/runtime.h"
#include "runbox.h"

#include <math.h>

/* Validation reads nothing but the engine's configuration, so the engine
 * here is a struct with the defaults (1 MiB of code, timeout 30 s, at most
 * 300 s), and no state directory. */
static rbx_engine engine;

static int setup(void **state)
{
    (void)state;
    memset(&engine, 0, sizeof engine);
    rbx_config_defaults(&engine.config);
    engine.sessions_fd = engine.trash_fd = -1;
    return 0;
}

static rbx_request python_request(void)
{
    rbx_request request;
    rbx_request_init(&request);
    request.language = "python";
    request.code = "print(1)";
    request.code_len = 8;
    return request;
}

static rbx_status validate(const rbx_request *request, const rbx_runtime **runtime, double *timeout,
                           rbx_error *err)
{
    memset(err, 0, sizeof *err);
    return rbx_request_validate(&engine, request, runtime, timeout, err);
}

static void assert_accepted(const rbx_request *request)
{
    const rbx_runtime *runtime = NULL;
    double timeout = -1;
    rbx_error err;
    rbx_status status = validate(request, &runtime, &timeout, &err);
    if (status != RBX_OK)
        fail_msg("rejected: %s", err.message);
    assert_non_null(runtime);
}

/* Asserts RBX_EINVAL and that the message contains each given fragment. */
static void assert_rejected(const rbx_request *request, const char *fragment1,
                            const char *fragment2)
{
    const rbx_runtime *runtime;
    double timeout;
    rbx_error err;
    assert_int_equal(validate(request, &runtime, &timeout, &err), RBX_EINVAL);
    assert_int_equal(err.status, RBX_EINVAL);
    assert_true(strlen(err.message) > 0);
    if (fragment1 && !strstr(err.message, fragment1))
        fail_msg("message '%s' lacks '%s'", err.message, fragment1);
    if (fragment2 && !strstr(err.message, fragment2))
        fail_msg("message '%s' lacks '%s'", err.message, fragment2);
}

static void assert_env_rejected(const char *const *env, size_t count, const char *fragment)
{
    rbx_request request = python_request();
    request.env = env;
    request.env_count = count;
    assert_rejected(&request, fragment, NULL);
}

static void assert_env_accepted(const char *const *env, size_t count)
{
    rbx_request request = python_request();
    request.env = env;
    request.env_count = count;
    assert_accepted(&request);
}

static void request_init_sets_the_defaults(void **state)
{
    (void)state;
    rbx_request request;
    memset(&request, 0x5a, sizeof request);
    rbx_request_init(&request);
    assert_null(request.language);
    assert_null(request.code);
    assert_int_equal(request.code_len, 0);
    assert_null(request.session_id);
    assert_true(request.timeout_s == 0);
    assert_null(request.env);
    assert_int_equal(request.env_count, 0);
    assert_null(request.stdin_data);
    assert_int_equal(request.stdin_len, 0);
    assert_int_equal(request.cancel_fd, -1);
    assert_int_equal(request.network, -1);
}

/* ---- language --------------------------------------------------------- */

static void minimal_request_is_accepted_with_default_timeout(void **state)
{
    (void)state;
    rbx_request request = python_request();
    const rbx_runtime *runtime = NULL;
    double timeout = -1;
    rbx_error err;
    assert_int_equal(validate(&request, &runtime, &timeout, &err), RBX_OK);
    assert_ptr_equal(runtime, rbx_runtime_find("python"));
    assert_true(timeout == 30.0);
}

static void unknown_language_is_rejected_listing_accepted_languages(void **state)
{
    (void)state;
    const char *unknown[] = {"ruby", "python2", "pyth", " python", "python ", "java", "bash5"};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        rbx_request request = python_request();
        request.language = unknown[i];
        assert_rejected(&request, "unknown language", "accepted: python, javascript, bash");
    }
    rbx_request request = python_request();
    request.language = "ruby";
    assert_rejected(&request, "'ruby'", "py, python3, js, node, nodejs, ts, tsx, sh, shell");
}

static void missing_language_is_rejected_listing_accepted_languages(void **state)
{
    (void)state;
    rbx_request request = python_request();
    request.language = NULL;
    assert_rejected(&request, "no language", "python, javascript, bash");
    request.language = "";
    assert_rejected(&request, "no language", "python, javascript, bash");
}

static void language_aliases_resolve_case_insensitively(void **state)
{
    (void)state;
    static const struct {
        const char *given, *canonical;
    } cases[] = {
        {"python", "python"},     {"py", "python"},       {"python3", "python"},
        {"PY", "python"},         {"Python3", "python"},  {"javascript", "javascript"},
        {"js", "javascript"},     {"node", "javascript"}, {"nodejs", "javascript"},
        {"NodeJS", "javascript"}, {"JS", "javascript"},   {"bash", "bash"},
        {"sh", "bash"},           {"shell", "bash"},      {"SHELL", "bash"},
        {"Bash", "bash"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rbx_request request = python_request();
        request.language = cases[i].given;
        const rbx_runtime *runtime = NULL;
        double timeout;
        rbx_error err;
        assert_int_equal(validate(&request, &runtime, &timeout, &err), RBX_OK);
        assert_non_null(runtime);
        assert_string_equal(runtime->name, cases[i].canonical);
    }
}

/* ---- code ------------------------------------------------------------- */

static void missing_code_is_rejected(void **state)
{
    (void)state;
    rbx_request request = python_request();
    request.code = NULL;
    request.code_len = 0;
    assert_rejected(&request, "no code", NULL);
}

static void empty_code_is_accepted(void **state)
{
    (void)state;
    rbx_request request = python_request();
    request.code = "";
    request.code_len = 0;
    assert_accepted(&request);
}

static void code_of_max_size_is_accepted(void **state)
{
    (void)state;
    char *code = calloc(1, engine.config.max_code_bytes);
    assert_non_null(code);
    rbx_request request = python_request();
    request.code = code;
    request.code_len = engine.config.max_code_bytes;
    assert_accepted(&request);
    free(code);
}

static void code_over_max_size_is_rejected(void **state)
{
    (void)state;
    size_t max = engine.config.max_code_bytes;
    char *code = calloc(1, max + 1);
    assert_non_null(code);
    rbx_request request = python_request();
    request.code = code;
    request.code_len = max + 1;
    assert_rejected(&request, "1048577 bytes", "limit of 1048576 bytes");
    free(code);
}

/* ---- timeout ---------------------------------------------------------- */

static double validated_timeout(double given)
{
    rbx_request request = python_request();
    request.timeout_s = given;
    const rbx_runtime *runtime;
    double timeout = -1;
    rbx_error err;
    assert_int_equal(validate(&request, &runtime, &timeout, &err), RBX_OK);
    return timeout;
}

static void zero_timeout_takes_the_configured_default(void **state)
{
    (void)state;
    assert_true(validated_timeout(0) == 30.0);
    engine.config.default_timeout_s = 7.5;
    assert_true(validated_timeout(0) == 7.5);
}

static void timeout_within_bounds_is_kept(void **state)
{
    (void)state;
    assert_true(validated_timeout(2.5) == 2.5);
    assert_true(validated_timeout(0.001) == 0.001);
    assert_true(validated_timeout(300) == 300.0);
}

static void out_of_bounds_timeouts_are_rejected(void **state)
{
    (void)state;
    const double bad[] = {-1, -0.001, -INFINITY, INFINITY, NAN, 300.001, 301, 1e300};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rbx_request request = python_request();
        request.timeout_s = bad[i];
        assert_rejected(&request, "out of bounds", "at most 300 seconds");
    }
}

/* ---- memory ----------------------------------------------------------- */

static void memory_limit_zero_or_within_bounds_is_accepted(void **state)
{
    (void)state;
    const uint32_t good[] = {0, 16, 512, 8192};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        rbx_request request = python_request();
        request.memory_mb = good[i];
        assert_accepted(&request);
    }
}

static void memory_limit_out_of_bounds_is_rejected(void **state)
{
    (void)state;
    const uint32_t bad[] = {1, 15, 8193, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rbx_request request = python_request();
        request.memory_mb = bad[i];
        assert_rejected(&request, "memory limit", "16 to 8192 MiB");
    }
}

/* ---- session id ------------------------------------------------------- */

static void hostile_session_ids_are_rejected(void **state)
{
    (void)state;
    char too_long[66];
    memset(too_long, 'a', 65);
    too_long[65] = 0;
    const char *hostile[] = {"..",    "../x", "a/b",         "",    too_long, ".hidden", "-rf",
                             "_x",    "a\nb", "caf\xc3\xa9", "a b", "/abs",   "a\\b",    "*",
                             "$(id)", "a;b"};
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        rbx_request request = python_request();
        request.session_id = hostile[i];
        assert_rejected(&request, "invalid session id", "[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
    }
    assert_false(rbx_session_id_valid(NULL));
}

static void valid_session_ids_are_accepted(void **state)
{
    (void)state;
    char longest[65];
    memset(longest, 'z', 64);
    longest[0] = '9';
    longest[64] = 0;
    const char *valid[] = {"a", "Z", "0", longest, "a.b-c_d", "a..b", "rbx-0123abcd", "A-", "x."};
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
        assert_true(rbx_session_id_valid(valid[i]));
        rbx_request request = python_request();
        request.session_id = valid[i];
        assert_accepted(&request);
    }
}

static void no_session_id_is_accepted(void **state)
{
    (void)state;
    rbx_request request = python_request();
    request.session_id = NULL;
    assert_accepted(&request);
}

/* ---- stdin ------------------------------------------------------------ */

static void stdin_length_without_data_is_rejected(void **state)
{
    (void)state;
    rbx_request request = python_request();
    request.stdin_len = 5;
    assert_rejected(&request, "stdin", NULL);
    request.stdin_data = "hello";
    assert_accepted(&request);
}

/* ---- environment ------------------------------------------------------ */

static void valid_env_entries_are_accepted(void **state)
{
    (void)state;
    const char *env[] = {"A=1", "_x=", "lower=ok", "WITH_EQ=a=b", "N9=", "LANGUAGE=x y\nz"};
    assert_env_accepted(env, sizeof env / sizeof env[0]);
}

static void env_entry_without_equals_is_rejected(void **state)
{
    (void)state;
    const char *env[] = {"A=1", "JUSTNAME"};
    assert_env_rejected(env, 2, "'JUSTNAME'");
}

static void env_entry_with_bad_name_is_rejected(void **state)
{
    (void)state;
    const char *bad[] = {"1A=x", "A-B=x", "=x", "A B=x", "A.B=x", "\xC3\x84=x", " A=x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_env_rejected(&bad[i], 1, "expected NAME=VALUE");
}

static void reserved_env_names_are_rejected(void **state)
{
    (void)state;
    const char *reserved[] = {"HOME=/tmp", "PWD=/", "OLDPWD=/", "USER=root", "LOGNAME=root"};
    const char *names[] = {"HOME", "PWD", "OLDPWD", "USER", "LOGNAME"};
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        assert_env_rejected(&reserved[i], 1, names[i]);
    /* Names that only start like a reserved one are fine. */
    const char *near[] = {"HOMEDIR=x", "PWDX=x", "USERNAME=x", "XHOME=x"};
    assert_env_accepted(near, sizeof near / sizeof near[0]);
}

static void missing_env_entry_is_rejected(void **state)
{
    (void)state;
    const char *env[] = {"A=1", NULL};
    assert_env_rejected(env, 2, "missing");
}

static void at_most_256_env_entries_are_accepted(void **state)
{
    (void)state;
    static char names[257][16];
    const char *env[257];
    for (size_t i = 0; i < 257; i++) {
        snprintf(names[i], sizeof names[i], "V%zu=1", i);
        env[i] = names[i];
    }
    assert_env_accepted(env, 256);
    assert_env_rejected(env, 257, "too many environment variables: 257");
}

static void oversized_environment_is_rejected(void **state)
{
    (void)state;
    size_t len = 64 * 1024 + 1;
    char *big = malloc(len + 1);
    assert_non_null(big);
    memcpy(big, "BIG=", 4);
    memset(big + 4, 'x', len - 4);
    big[len] = 0;
    const char *env[] = {big};
    assert_env_rejected(env, 1, "environment too large");
    free(big);
}

static void env_name_validity_bounds(void **state)
{
    (void)state;
    char name[130];
    memset(name, 'N', sizeof name);
    assert_true(rbx_env_name_valid(name, 128));
    assert_false(rbx_env_name_valid(name, 129));
    assert_false(rbx_env_name_valid(name, 0));
    assert_true(rbx_env_name_valid("_", 1));
    assert_false(rbx_env_name_valid("9", 1));
    /* The length is what counts, not a terminator. */
    assert_true(rbx_env_name_valid("AB-C", 2));
    assert_false(rbx_env_name_valid("AB-C", 3));
}

/* A kernel's starting directory: absolute, UTF-8, bounded, and only for a
 * stateful call (a one-off run has no kernel to start). */
static void kernel_cwd_is_checked(void **state)
{
    (void)state;
    rbx_request request = python_request();
    request.stateful = true;
    request.kernel_cwd = "/home/user/project";
    assert_accepted(&request);
    request.kernel_cwd = "relative/dir";
    assert_rejected(&request, "absolute path", NULL);
    request.kernel_cwd = "/home/\xff";
    assert_rejected(&request, "UTF-8", NULL);
    char *long_path = malloc(RBX_KERNEL_CWD_MAX + 2);
    memset(long_path, 'a', RBX_KERNEL_CWD_MAX + 1);
    long_path[0] = '/';
    long_path[RBX_KERNEL_CWD_MAX + 1] = 0;
    request.kernel_cwd = long_path;
    assert_rejected(&request, "at most", NULL);
    free(long_path);
    request.stateful = false;
    request.kernel_cwd = "/tmp";
    assert_rejected(&request, "stateful", NULL);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup(f, setup)
    const struct CMUnitTest tests[] = {
        T(request_init_sets_the_defaults),
        T(kernel_cwd_is_checked),
        T(minimal_request_is_accepted_with_default_timeout),
        T(unknown_language_is_rejected_listing_accepted_languages),
        T(missing_language_is_rejected_listing_accepted_languages),
        T(language_aliases_resolve_case_insensitively),
        T(missing_code_is_rejected),
        T(empty_code_is_accepted),
        T(code_of_max_size_is_accepted),
        T(code_over_max_size_is_rejected),
        T(zero_timeout_takes_the_configured_default),
        T(timeout_within_bounds_is_kept),
        T(out_of_bounds_timeouts_are_rejected),
        T(memory_limit_zero_or_within_bounds_is_accepted),
        T(memory_limit_out_of_bounds_is_rejected),
        T(hostile_session_ids_are_rejected),
        T(valid_session_ids_are_accepted),
        T(no_session_id_is_accepted),
        T(stdin_length_without_data_is_rejected),
        T(valid_env_entries_are_accepted),
        T(env_entry_without_equals_is_rejected),
        T(env_entry_with_bad_name_is_rejected),
        T(reserved_env_names_are_rejected),
        T(missing_env_entry_is_rejected),
        T(at_most_256_env_entries_are_accepted),
        T(oversized_environment_is_rejected),
        T(env_name_validity_bounds),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
