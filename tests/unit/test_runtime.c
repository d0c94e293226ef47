/* Unit tests of runtime.c: the table of languages and name resolution. */
#include "unit_util.h"

#include "languages/runtime.h"
#include "runbox.h"

#include <strings.h>

static const char *const canonical_names[] = {"python", "javascript", "bash", "typescript"};
#define LANGUAGES (sizeof canonical_names / sizeof *canonical_names)

static void table_has_python_javascript_bash_and_typescript(void **state)
{
    (void)state;
    assert_int_equal(rbx_runtime_count(), LANGUAGES);
    for (size_t i = 0; i < LANGUAGES; i++)
        assert_string_equal(rbx_runtime_name(i), canonical_names[i]);
}

static void runtime_name_out_of_range_is_null(void **state)
{
    (void)state;
    assert_null(rbx_runtime_name(LANGUAGES));
    assert_null(rbx_runtime_name((size_t)-1));
}

static void canonical_names_resolve_to_themselves(void **state)
{
    (void)state;
    for (size_t i = 0; i < LANGUAGES; i++)
        assert_string_equal(rbx_runtime_canonical(canonical_names[i]), canonical_names[i]);
}

static void aliases_resolve_to_canonical_names(void **state)
{
    (void)state;
    static const struct {
        const char *alias, *canonical;
    } cases[] = {
        {"py", "python"},         {"python3", "python"},     {"js", "javascript"},
        {"ts", "typescript"},     {"tsx", "typescript"},
        {"node", "javascript"},   {"nodejs", "javascript"},  {"sh", "bash"},
        {"shell", "bash"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_string_equal(rbx_runtime_canonical(cases[i].alias), cases[i].canonical);
}

static void resolution_is_case_insensitive(void **state)
{
    (void)state;
    assert_string_equal(rbx_runtime_canonical("PYTHON"), "python");
    assert_string_equal(rbx_runtime_canonical("Py"), "python");
    assert_string_equal(rbx_runtime_canonical("JavaScript"), "javascript");
    assert_string_equal(rbx_runtime_canonical("NODEJS"), "javascript");
    assert_string_equal(rbx_runtime_canonical("Shell"), "bash");
}

static void unknown_names_resolve_to_null(void **state)
{
    (void)state;
    const char *unknown[] = {"ruby", "", "pyth", "python ", " python", "python2",
                             "javascript1", "ecmascript", "zsh", "bash\n", "p"};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        assert_null(rbx_runtime_canonical(unknown[i]));
        assert_null(rbx_runtime_find(unknown[i]));
    }
    assert_null(rbx_runtime_canonical(NULL));
    assert_null(rbx_runtime_find(NULL));
}

static void find_returns_the_same_entry_for_name_and_aliases(void **state)
{
    (void)state;
    const rbx_runtime *python = rbx_runtime_find("python");
    assert_non_null(python);
    assert_ptr_equal(rbx_runtime_find("py"), python);
    assert_ptr_equal(rbx_runtime_find("PYTHON3"), python);
    const rbx_runtime *js = rbx_runtime_find("javascript");
    assert_non_null(js);
    assert_ptr_equal(rbx_runtime_find("node"), js);
    assert_ptr_not_equal(js, python);
    const rbx_runtime *bash = rbx_runtime_find("bash");
    assert_non_null(bash);
    assert_ptr_equal(rbx_runtime_find("sh"), bash);
}

static void each_interpreter_is_an_absolute_path(void **state)
{
    (void)state;
    for (size_t i = 0; i < rbx_runtime_count(); i++) {
        const rbx_runtime *runtime = rbx_runtime_find(rbx_runtime_name(i));
        assert_non_null(runtime);
        const char *interpreter = runtime->interpreter;
        assert_non_null(interpreter);
        assert_int_equal(interpreter[0], '/');
        assert_null(strstr(interpreter, "/../"));
        assert_null(strstr(interpreter, "/./"));
        assert_null(strchr(interpreter, ' '));
    }
}

static void each_runtime_is_complete(void **state)
{
    (void)state;
    static const char *const extensions[] = {".py", ".js", ".sh", ".ts"};
    for (size_t i = 0; i < rbx_runtime_count(); i++) {
        const rbx_runtime *runtime = rbx_runtime_find(rbx_runtime_name(i));
        assert_string_equal(runtime->name, canonical_names[i]);
        assert_string_equal(runtime->extension, extensions[i]);
        assert_non_null(runtime->classify);
        assert_non_null(runtime->argv[0]);
        /* argv is NULL-terminated within its array. */
        size_t n = 0;
        while (n < sizeof runtime->argv / sizeof runtime->argv[0] && runtime->argv[n])
            n++;
        assert_true(n >= 2 && n < sizeof runtime->argv / sizeof runtime->argv[0]);
    }
}

static void aliases_belong_to_one_runtime_only(void **state)
{
    (void)state;
    for (size_t i = 0; i < rbx_runtime_count(); i++) {
        const rbx_runtime *runtime = rbx_runtime_find(rbx_runtime_name(i));
        for (size_t a = 0; a < 4 && runtime->aliases[a]; a++) {
            assert_ptr_equal(rbx_runtime_find(runtime->aliases[a]), runtime);
            for (size_t k = 0; k < rbx_runtime_count(); k++)
                assert_true(strcasecmp(runtime->aliases[a], rbx_runtime_name(k)) != 0);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_has_python_javascript_bash_and_typescript),
        cmocka_unit_test(runtime_name_out_of_range_is_null),
        cmocka_unit_test(canonical_names_resolve_to_themselves),
        cmocka_unit_test(aliases_resolve_to_canonical_names),
        cmocka_unit_test(resolution_is_case_insensitive),
        cmocka_unit_test(unknown_names_resolve_to_null),
        cmocka_unit_test(find_returns_the_same_entry_for_name_and_aliases),
        cmocka_unit_test(each_interpreter_is_an_absolute_path),
        cmocka_unit_test(each_runtime_is_complete),
        cmocka_unit_test(aliases_belong_to_one_runtime_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
