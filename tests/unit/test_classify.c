/* Unit tests of classify.c: error_type and exception from what happened
 * (flags, exit status) and from the program's stderr. */
#include "unit_util.h"

#include "languages/classify.h"
#include "languages/runtime.h"

typedef struct classified {
    const char *error_type;
    char *exception;
} classified;

static classified classify_with(const char *language, rbx_outcome outcome, const char *stderr_text)
{
    const rbx_runtime *runtime = rbx_runtime_find(language);
    assert_non_null(runtime);
    classified c = {"unset", (char *)"unset"};
    rbx_classify(runtime, &outcome, stderr_text, stderr_text ? strlen(stderr_text) : 0,
                 &c.error_type, &c.exception);
    return c;
}

static classified classify_exit(const char *language, int exit_code, const char *stderr_text)
{
    rbx_outcome outcome = {.exit_code = exit_code};
    return classify_with(language, outcome, stderr_text);
}

/* Frees the exception before asserting, so a failing test leaks nothing. */
static void assert_classified(classified c, const char *error_type, const char *exception)
{
    char got[128] = "";
    bool got_exception = c.exception != NULL;
    if (c.exception)
        snprintf(got, sizeof got, "%s", c.exception);
    free(c.exception);
    if (error_type)
        assert_string_equal(c.error_type, error_type);
    else
        assert_null(c.error_type);
    if (exception) {
        assert_true(got_exception);
        assert_string_equal(got, exception);
    } else if (got_exception) {
        fail_msg("expected no exception, got '%s'", got);
    }
}

/* ---- stderr fixtures, as the interpreters print them ------------------ */

static const char py_module_not_found[] =
    "Traceback (most recent call last):\n"
    "  File \"<code>\", line 1, in <module>\n"
    "ModuleNotFoundError: No module named 'requests_nope'\n";

static const char py_import_error[] =
    "Traceback (most recent call last):\n"
    "  File \"<code>\", line 1, in <module>\n"
    "ImportError: cannot import name 'nope' from 'os' (/usr/lib/python3.11/os.py)\n";

static const char py_permission_error[] =
    "Traceback (most recent call last):\n"
    "  File \"<code>\", line 1, in <module>\n"
    "PermissionError: [Errno 13] Permission denied: '/etc/shadow'\n";

static const char py_memory_error[] =
    "Traceback (most recent call last):\n"
    "  File \"<code>\", line 1, in <module>\n"
    "MemoryError\n";

static const char py_dotted[] =
    "Traceback (most recent call last):\n"
    "  File \"/usr/lib/python3/dist-packages/urllib3/connection.py\", line 174, in _new_conn\n"
    "    conn = connection.create_connection(\n"
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "requests.exceptions.ConnectionError: HTTPConnectionPool(host='x', port=80): Max retries\n";

static const char py_zero_division[] =
    "Traceback (most recent call last):\n"
    "  File \"<code>\", line 3, in <module>\n"
    "    print(1 / 0)\n"
    "          ~~^~~\n"
    "ZeroDivisionError: division by zero\n";

static const char py_chained[] =
    "Traceback (most recent call last):\n"
    "  File \"<code>\", line 2, in <module>\n"
    "KeyError: 'x'\n"
    "\n"
    "During handling of the above exception, another exception occurred:\n"
    "\n"
    "Traceback (most recent call last):\n"
    "  File \"<code>\", line 4, in <module>\n"
    "ValueError: bad value\n";

static const char node_module_not_found[] =
    "node:internal/modules/cjs/loader:1210\n"
    "  throw err;\n"
    "  ^\n"
    "\n"
    "Error: Cannot find module 'nonexistent_mod_x'\n"
    "Require stack:\n"
    "- /work/[eval]\n"
    "    at Module._resolveFilename (node:internal/modules/cjs/loader:1207:15)\n"
    "    at Module._load (node:internal/modules/cjs/loader:1038:27) {\n"
    "  code: 'MODULE_NOT_FOUND',\n"
    "  requireStack: [ '/work/[eval]' ]\n"
    "}\n"
    "\n"
    "Node.js v20.20.2\n";

static const char node_esm_not_found[] =
    "node:internal/modules/esm/resolve:873\n"
    "  throw new ERR_MODULE_NOT_FOUND(packageName, fileURLToPath(base), null);\n"
    "        ^\n"
    "\n"
    "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'nope' imported from /work/x.mjs\n"
    "    at packageResolve (node:internal/modules/esm/resolve:873:9) {\n"
    "  code: 'ERR_MODULE_NOT_FOUND'\n"
    "}\n"
    "\n"
    "Node.js v20.20.2\n";

static const char node_eacces[] =
    "node:fs:573\n"
    "  return binding.open(\n"
    "                 ^\n"
    "\n"
    "Error: EACCES: permission denied, open '/etc/shadow'\n"
    "    at Object.openSync (node:fs:573:18)\n"
    "    at Object.readFileSync (node:fs:452:35) {\n"
    "  errno: -13,\n"
    "  code: 'EACCES',\n"
    "  syscall: 'open',\n"
    "  path: '/etc/shadow'\n"
    "}\n"
    "\n"
    "Node.js v20.20.2\n";

static const char node_heap[] =
    "\n"
    "<--- Last few GCs --->\n"
    "\n"
    "[12:0x5581]      812 ms: Mark-Compact 251.2 (258.6) -> 250.9 (259.6) MB\n"
    "\n"
    "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory\n"
    " 1: 0xb8ed4c node::Abort() [node]\n";

static const char node_type_error[] =
    "/work/<code>:1\n"
    "null.x\n"
    "     ^\n"
    "\n"
    "TypeError: Cannot read properties of null (reading 'x')\n"
    "    at Object.<anonymous> (/work/<code>:1:6)\n"
    "\n"
    "Node.js v20.20.2\n";

/* ---- Python ----------------------------------------------------------- */

static void python_module_not_found_is_import_error(void **state)
{
    (void)state;
    assert_classified(classify_exit("python", 1, py_module_not_found), "ImportError",
                      "ModuleNotFoundError");
}

static void python_import_error_is_import_error(void **state)
{
    (void)state;
    assert_classified(classify_exit("python", 1, py_import_error), "ImportError", "ImportError");
}

static void python_permission_error_is_permission_error(void **state)
{
    (void)state;
    assert_classified(classify_exit("python", 1, py_permission_error), "PermissionError",
                      "PermissionError");
}

static void python_memory_error_without_message_is_memory_error(void **state)
{
    (void)state;
    assert_classified(classify_exit("python", 1, py_memory_error), "MemoryError", "MemoryError");
}

static void python_os_error_on_read_only_file_system_is_permission_error(void **state)
{
    (void)state;
    assert_classified(classify_exit("python", 1,
                                    "Traceback (most recent call last):\n"
                                    "  File \"<code>\", line 1, in <module>\n"
                                    "OSError: [Errno 30] Read-only file system: '/usr/x'\n"),
                      "PermissionError", "OSError");
    assert_classified(classify_exit("python", 1,
                                    "Traceback (most recent call last):\n"
                                    "  File \"<code>\", line 1, in <module>\n"
                                    "OSError: [Errno 1] Operation not permitted\n"),
                      "PermissionError", "OSError");
}

static void python_other_os_error_is_runtime_error(void **state)
{
    (void)state;
    assert_classified(classify_exit("python", 1,
                                    "Traceback (most recent call last):\n"
                                    "  File \"<code>\", line 1, in <module>\n"
                                    "OSError: [Errno 28] No space left on device\n"),
                      "RuntimeError", "OSError");
}

static void python_dotted_exception_is_named_by_its_last_component(void **state)
{
    (void)state;
    assert_classified(classify_exit("python", 1, py_dotted), "RuntimeError", "ConnectionError");
}

static void python_other_exception_is_runtime_error(void **state)
{
    (void)state;
    assert_classified(classify_exit("python", 1, py_zero_division), "RuntimeError",
                      "ZeroDivisionError");
}

static void python_chained_exceptions_name_the_last_one(void **state)
{
    (void)state;
    assert_classified(classify_exit("python", 1, py_chained), "RuntimeError", "ValueError");
}

static void python_output_before_the_traceback_is_ignored(void **state)
{
    (void)state;
    char text[512];
    snprintf(text, sizeof text, "PermissionError: just a log line\nstarting\n%s",
             py_zero_division);
    assert_classified(classify_exit("python", 1, text), "RuntimeError", "ZeroDivisionError");
}

static void python_failure_without_traceback_has_no_exception(void **state)
{
    (void)state;
    assert_classified(classify_exit("python", 3, "something went wrong\n"), "RuntimeError", NULL);
    assert_classified(classify_exit("python", 1, ""), "RuntimeError", NULL);
    assert_classified(classify_exit("python", 1, NULL), "RuntimeError", NULL);
}

static void python_multi_line_message_keeps_the_exception_name(void **state)
{
    (void)state;
    /* pydantic v2 prints the failing field names at column 0. */
    const char text[] =
        "Traceback (most recent call last):\n"
        "  File \"<code>\", line 5, in <module>\n"
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for User\n"
        "name\n"
        "  Field required [type=missing, input_value={}, input_type=dict]\n";
    assert_classified(classify_exit("python", 1, text), "RuntimeError", "ValidationError");
    const char hint[] =
        "Traceback (most recent call last):\n"
        "  File \"<code>\", line 1, in <module>\n"
        "ValueError: bad config\n"
        "expected: an integer\n";
    assert_classified(classify_exit("python", 1, hint), "RuntimeError", "ValueError");
}

/* ---- JavaScript ------------------------------------------------------- */

static void javascript_module_not_found_is_import_error(void **state)
{
    (void)state;
    assert_classified(classify_exit("javascript", 1, node_module_not_found), "ImportError",
                      "Error");
}

static void javascript_esm_module_not_found_is_import_error(void **state)
{
    (void)state;
    assert_classified(classify_exit("javascript", 1, node_esm_not_found), "ImportError", "Error");
    /* The bracketed code alone is enough. */
    assert_classified(classify_exit("js", 1, "Error [ERR_MODULE_NOT_FOUND]: Cannot find\n"),
                      "ImportError", "Error");
}

static void javascript_eacces_is_permission_error(void **state)
{
    (void)state;
    assert_classified(classify_exit("javascript", 1, node_eacces), "PermissionError", "Error");
}

static void javascript_heap_out_of_memory_is_memory_error(void **state)
{
    (void)state;
    classified c = classify_exit("javascript", 134, node_heap);
    assert_string_equal(c.error_type, "MemoryError");
    free(c.exception);
    assert_classified(classify_exit("node", 1, "fatal: JavaScript heap out of memory\n"),
                      "MemoryError", NULL);
}

static void javascript_other_error_is_runtime_error(void **state)
{
    (void)state;
    assert_classified(classify_exit("javascript", 1, node_type_error), "RuntimeError",
                      "TypeError");
}

static void javascript_failure_without_error_line_has_no_exception(void **state)
{
    (void)state;
    assert_classified(classify_exit("javascript", 2, "bye\n"), "RuntimeError", NULL);
}

static void javascript_coded_error_keeps_its_exception_name(void **state)
{
    (void)state;
    assert_classified(classify_exit("javascript", 1,
                                    "TypeError [ERR_INVALID_ARG_TYPE]: The \"path\" argument "
                                    "must be of type string. Received undefined\n"
                                    "    at Object.openSync (node:fs:573:18) {\n"
                                    "  code: 'ERR_INVALID_ARG_TYPE'\n}\n"),
                      "RuntimeError", "TypeError");
    /* A bracket that is not followed by ':' is not a coded error line. */
    assert_classified(classify_exit("javascript", 1, "TypeError [not a code] here\n"),
                      "RuntimeError", NULL);
}

static void javascript_exception_is_the_uncaught_error_not_an_earlier_log_line(void **state)
{
    (void)state;
    char text[1024];
    snprintf(text, sizeof text, "RetryError: attempt 1 failed, retrying\n%s", node_type_error);
    assert_classified(classify_exit("javascript", 1, text), "RuntimeError", "TypeError");
}

/* ---- Bash ------------------------------------------------------------- */

static void bash_exit_127_is_import_error(void **state)
{
    (void)state;
    assert_classified(classify_exit("bash", 127, "bash: line 1: jq: command not found\n"),
                      "ImportError", NULL);
}

static void bash_permission_denied_is_permission_error(void **state)
{
    (void)state;
    assert_classified(classify_exit("bash", 1, "bash: line 1: /etc/shadow: Permission denied\n"),
                      "PermissionError", NULL);
    assert_classified(classify_exit("sh", 1, "touch: cannot touch '/x': Read-only file system\n"),
                      "PermissionError", NULL);
}

static void bash_exit_126_is_permission_error(void **state)
{
    (void)state;
    assert_classified(classify_exit("bash", 126, "bash: line 1: ./run.sh: cannot execute\n"),
                      "PermissionError", NULL);
}

static void bash_other_failure_is_runtime_error(void **state)
{
    (void)state;
    assert_classified(classify_exit("bash", 1, ""), "RuntimeError", NULL);
    assert_classified(classify_exit("bash", 2, "grep: x: No such file or directory\n"),
                      "RuntimeError", NULL);
}

/* ---- what happened comes first ---------------------------------------- */

static void exit_zero_is_never_an_error_whatever_stderr_says(void **state)
{
    (void)state;
    assert_classified(classify_exit("python", 0, py_module_not_found), NULL, NULL);
    assert_classified(classify_exit("python", 0, "ImportError: not really\n"), NULL, NULL);
    assert_classified(classify_exit("javascript", 0, node_module_not_found), NULL, NULL);
    assert_classified(classify_exit("bash", 0, "bash: x: Permission denied\nImportError\n"), NULL,
                      NULL);
}

static void killed_by_signal_is_an_error_even_with_exit_zero(void **state)
{
    (void)state;
    rbx_outcome outcome = {.exit_code = 0, .signal = 9};
    assert_classified(classify_with("bash", outcome, ""), "RuntimeError", NULL);
    rbx_outcome segv = {.exit_code = 139, .signal = 11};
    assert_classified(classify_with("python", segv, "Segmentation fault\n"), "RuntimeError", NULL);
}

static void timeout_takes_precedence_over_stderr(void **state)
{
    (void)state;
    rbx_outcome outcome = {.exit_code = 124, .signal = 9, .timed_out = true};
    assert_classified(classify_with("python", outcome, py_module_not_found), "TimeoutError", NULL);
    assert_classified(classify_with("bash", outcome, "x: Permission denied\n"), "TimeoutError",
                      NULL);
}

static void oom_kill_takes_precedence_over_stderr(void **state)
{
    (void)state;
    rbx_outcome outcome = {.exit_code = 137, .signal = 9, .oom_killed = true};
    assert_classified(classify_with("python", outcome, py_permission_error), "MemoryError", NULL);
    assert_classified(classify_with("javascript", outcome, node_module_not_found), "MemoryError",
                      NULL);
}

static void syntax_error_takes_precedence_over_stderr(void **state)
{
    (void)state;
    rbx_outcome outcome = {.exit_code = 2, .syntax_error = true};
    assert_classified(classify_with("python", outcome, py_module_not_found), "SyntaxError",
                      "SyntaxError");
    assert_classified(classify_with("bash", outcome, NULL), "SyntaxError", "SyntaxError");
}

static void cancelled_run_is_runtime_error_without_exception(void **state)
{
    (void)state;
    rbx_outcome outcome = {.exit_code = 137, .signal = 9, .cancelled = true};
    assert_classified(classify_with("python", outcome, py_module_not_found), "RuntimeError", NULL);
}

static void only_stderr_len_bytes_are_read(void **state)
{
    (void)state;
    /* The exception line lies past the given length. */
    const rbx_runtime *python = rbx_runtime_find("python");
    rbx_outcome outcome = {.exit_code = 1};
    const char *error_type;
    char *exception;
    size_t cut = strstr(py_module_not_found, "ModuleNotFoundError") - py_module_not_found;
    rbx_classify(python, &outcome, py_module_not_found, cut, &error_type, &exception);
    assert_string_equal(error_type, "RuntimeError");
    assert_null(exception);
    const rbx_runtime *bash = rbx_runtime_find("bash");
    const char denied[] = "bash: line 1: /x: Permission denied\n";
    rbx_classify(bash, &outcome, denied, 10, &error_type, &exception);
    assert_string_equal(error_type, "RuntimeError");
    assert_null(exception);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(python_module_not_found_is_import_error),
        cmocka_unit_test(python_import_error_is_import_error),
        cmocka_unit_test(python_permission_error_is_permission_error),
        cmocka_unit_test(python_memory_error_without_message_is_memory_error),
        cmocka_unit_test(python_os_error_on_read_only_file_system_is_permission_error),
        cmocka_unit_test(python_other_os_error_is_runtime_error),
        cmocka_unit_test(python_dotted_exception_is_named_by_its_last_component),
        cmocka_unit_test(python_other_exception_is_runtime_error),
        cmocka_unit_test(python_chained_exceptions_name_the_last_one),
        cmocka_unit_test(python_output_before_the_traceback_is_ignored),
        cmocka_unit_test(python_failure_without_traceback_has_no_exception),
        cmocka_unit_test(python_multi_line_message_keeps_the_exception_name),
        cmocka_unit_test(javascript_module_not_found_is_import_error),
        cmocka_unit_test(javascript_esm_module_not_found_is_import_error),
        cmocka_unit_test(javascript_eacces_is_permission_error),
        cmocka_unit_test(javascript_heap_out_of_memory_is_memory_error),
        cmocka_unit_test(javascript_other_error_is_runtime_error),
        cmocka_unit_test(javascript_failure_without_error_line_has_no_exception),
        cmocka_unit_test(javascript_coded_error_keeps_its_exception_name),
        cmocka_unit_test(javascript_exception_is_the_uncaught_error_not_an_earlier_log_line),
        cmocka_unit_test(bash_exit_127_is_import_error),
        cmocka_unit_test(bash_permission_denied_is_permission_error),
        cmocka_unit_test(bash_exit_126_is_permission_error),
        cmocka_unit_test(bash_other_failure_is_runtime_error),
        cmocka_unit_test(exit_zero_is_never_an_error_whatever_stderr_says),
        cmocka_unit_test(killed_by_signal_is_an_error_even_with_exit_zero),
        cmocka_unit_test(timeout_takes_precedence_over_stderr),
        cmocka_unit_test(oom_kill_takes_precedence_over_stderr),
        cmocka_unit_test(syntax_error_takes_precedence_over_stderr),
        cmocka_unit_test(cancelled_run_is_runtime_error_without_exception),
        cmocka_unit_test(only_stderr_len_bytes_are_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
