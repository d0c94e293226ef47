"""E2B's released e2b-code-interpreter SDK, unmodified, running its code on runbox
(`runbox serve --e2b-listen`): what the issue's "done when" lists, through the SDK, each way
the SDK finds the server (the `sandbox` fixture: E2B_SANDBOX_URL, and debug mode for the cases
marked BOTH_WAYS)."""
import base64
import json
import os
import threading
import time

import pytest
from e2b_code_interpreter import Sandbox
from e2b.exceptions import NotFoundException, SandboxException, TimeoutException


# What runs through E2B_SANDBOX_URL and through debug mode alike: the cases whose outcome
# depends on how the SDK reaches the server and which contexts serve it (a sandbox's, or the
# server's default ones). The rest run once, through E2B_SANDBOX_URL.
BOTH_WAYS = pytest.mark.parametrize("sandbox", ["sandbox_url", "debug"], indirect=True)


@BOTH_WAYS
def test_state_persists_between_calls_and_the_main_result_is_text(sandbox):
    first = sandbox.run_code("x = 1")
    assert first.error is None and first.results == []
    second = sandbox.run_code("x += 1; x")
    assert second.text == "2"
    assert second.results[0].is_main_result
    assert second.execution_count == first.execution_count + 1


def test_stdout_and_stderr_arrive_while_the_code_runs(sandbox):
    seen = []
    code = ("import sys, time\n"
            "print('first', flush=True)\n"
            "print('warned', file=sys.stderr, flush=True)\n"
            "time.sleep(1.5)\n"
            "print('last')")
    execution = sandbox.run_code(
        code, on_stdout=lambda m: seen.append(("out", m.line, time.monotonic())),
        on_stderr=lambda m: seen.append(("err", m.line, time.monotonic())))
    ended = time.monotonic()
    assert "".join(execution.logs.stdout) == "first\nlast\n"
    assert execution.logs.stderr == ["warned\n"]
    first = next(t for kind, line, t in seen if kind == "out" and "first" in line)
    warned = next(t for kind, line, t in seen if kind == "err")
    # Both came during the sleep, not with the end.
    assert ended - first > 1.0 and ended - warned > 1.0, seen


def test_a_matplotlib_plot_arrives_as_png(sandbox):
    execution = sandbox.run_code("import matplotlib.pyplot as plt\n"
                                 "plt.plot([1, 3, 2])\n"
                                 "plt.title('runbox')\n"
                                 "None")
    pngs = [r.png for r in execution.results if r.png]
    assert len(pngs) == 1, execution.results
    assert base64.b64decode(pngs[0]).startswith(b"\x89PNG\r\n\x1a\n")
    figure = next(r for r in execution.results if r.png)
    assert not figure.is_main_result  # a display, as Jupyter's inline backend makes it


def test_a_dataframe_arrives_as_html(sandbox):
    execution = sandbox.run_code("import pandas as pd\n"
                                 "pd.DataFrame({'city': ['Oslo', 'Lima'], 'n': [1, 2]})")
    result = execution.results[0]
    assert result.is_main_result
    assert "<table" in result.html and "Lima" in result.html
    assert "Oslo" in result.text


def test_an_exception_is_the_executions_error_and_keeps_state(sandbox):
    sandbox.run_code("kept = 'yes'")
    execution = sandbox.run_code("def f():\n    raise ValueError('bad input 42')\nf()")
    error = execution.error
    assert error.name == "ValueError"
    assert error.value == "bad input 42"
    assert "Traceback" in error.traceback and "in f" in error.traceback
    assert sandbox.run_code("kept").text == "yes"


def test_the_value_of_an_exception_class_made_in_a_function_is_its_message(sandbox):
    # Python prints such a class with its path (Tool.forward.<locals>.Done: ...); Jupyter's
    # evalue, which agent frameworks read back (smolagents' final answer), is str(exception).
    execution = sandbox.run_code("class Tool:\n    def forward(self):\n"
                                 "        class Done(BaseException):\n            pass\n"
                                 "        raise Done('safe: 42')\nTool().forward()")
    assert execution.error.name == "Done"
    assert execution.error.value == "safe: 42"


def test_shell_lines_run_as_in_ipython(sandbox):
    # E2B's run_code is IPython's: `!command` runs a shell command, `x = !command` keeps its lines.
    execution = sandbox.run_code("n = 6\n!echo shell says $((6 * 7))\nlines = !printf 'a\\nb\\n'\n"
                                 "print(n, lines)")
    assert execution.error is None, execution.error
    assert "".join(execution.logs.stdout) == "shell says 42\n6 ['a', 'b']\n"
    failed = sandbox.run_code("!exit 3\nprint('went on')")
    assert failed.error is None and failed.logs.stdout == ["went on\n"]
    # Python keeps its meaning: only a cell that does not compile is read for `!` lines.
    assert sandbox.run_code("x = 1 != 2\nx").text == "True"
    assert sandbox.run_code("y = 1 if n else !2").error.name == "SyntaxError"


def test_a_syntax_error_is_an_error_and_nothing_ran(sandbox):
    execution = sandbox.run_code("ran = 1\nif :")
    assert execution.error.name == "SyntaxError"
    assert sandbox.run_code("'ran' in globals()").text == "False"


@BOTH_WAYS
def test_contexts_are_created_listed_restarted_and_removed(sandbox):
    context = sandbox.create_code_context(cwd="/tmp")
    assert context.language == "python" and context.cwd == "/tmp"
    listed = {c.id: c for c in sandbox.list_code_contexts()}
    assert context.id in listed
    # E2B lists a default Python and JavaScript context from the start.
    assert {"python", "javascript"} <= {c.language for c in listed.values()}

    assert sandbox.run_code("import os; os.getcwd()", context=context).text == "/tmp"
    sandbox.run_code("y = 5", context=context)
    assert sandbox.run_code("y", context=context).text == "5"
    # Contexts do not share variables.
    assert sandbox.run_code("'y' in globals()").text == "False"

    sandbox.restart_code_context(context)
    after = sandbox.run_code("'y' in globals()", context=context)
    assert after.text == "False"  # state gone
    assert sandbox.run_code("import os; os.getcwd()", context=context).text == "/tmp"

    sandbox.remove_code_context(context)
    assert context.id not in {c.id for c in sandbox.list_code_contexts()}
    with pytest.raises(NotFoundException):
        sandbox.run_code("1", context=context)
    with pytest.raises(NotFoundException):
        sandbox.restart_code_context(context)


def test_javascript_top_level_await_and_state(sandbox):
    execution = sandbox.run_code("const answer = await Promise.resolve(41);\nanswer + 1",
                                 language="javascript")
    assert execution.error is None, execution.error
    assert execution.text == "42"
    assert sandbox.run_code("answer * 2", language="js").text == "82"


@pytest.mark.skipif(not os.environ.get("RUNBOX_TEST_ON_IMAGE"),
                    reason="TypeScript needs the default image's Node.js (the host's is 20)")
def test_typescript_types_are_stripped_and_state_kept(sandbox):
    context = sandbox.create_code_context(language="typescript")
    assert context.language == "typescript"
    assert sandbox.run_code("typeof answer", context=context).text == "undefined"
    execution = sandbox.run_code("const n: number = 41;\nn + 1", language="ts")
    assert execution.error is None, execution.error
    assert execution.text == "42"
    typed = sandbox.run_code("const twice = (x: number): number => x * 2;\ntwice(n)",
                             language="typescript")
    assert typed.text == "82", typed
    enum = sandbox.run_code("enum Color { Red }", language="typescript")
    assert enum.error is not None and enum.error.name == "SyntaxError", enum


def test_bash_keeps_its_working_directory(sandbox):
    sandbox.run_code("mkdir -p work && cd work && export GREETING=hi", language="bash")
    execution = sandbox.run_code("pwd; echo $GREETING", language="bash")
    # pwd and echo write separately: the stream may carry them as one chunk or two.
    assert "".join(execution.logs.stdout) == "/home/user/work\nhi\n"


def test_envs_are_set_for_one_execution_only(sandbox):
    seen = sandbox.run_code("import os; os.environ.get('RUNBOX_E2B_VAR')",
                            envs={"RUNBOX_E2B_VAR": "only-now"})
    assert seen.text == "only-now"
    assert sandbox.run_code("import os; os.environ.get('RUNBOX_E2B_VAR')").results == []
    js = sandbox.run_code("process.env.RUNBOX_E2B_VAR", language="javascript",
                          envs={"RUNBOX_E2B_VAR": "js-too"})
    assert js.text == "js-too"
    assert sandbox.run_code("process.env.RUNBOX_E2B_VAR", language="javascript").results == []


def test_a_client_timeout_interrupts_the_code_and_the_context_stays(sandbox):
    sandbox.run_code("counter = 7")
    started = time.monotonic()
    with pytest.raises(TimeoutException):
        sandbox.run_code("while True:\n    counter += 0", timeout=2)
    assert time.monotonic() - started < 30
    # The kernel was interrupted, not killed: its state is there, and it answers at once.
    after = sandbox.run_code("counter", timeout=30)
    assert after.text == "7"
    assert after.error is None


@BOTH_WAYS
def test_the_code_runs_in_runboxs_sandbox(sandbox):
    execution = sandbox.run_code("import os, socket\n"
                                 "print(os.getuid(), socket.gethostname(), os.path.exists('/root'))")
    assert execution.logs.stdout == ["1000 runbox False\n"]


def test_display_data_and_the_text_quoting_rule(sandbox):
    execution = sandbox.run_code("display(3 * 7)\n'quoted'")
    assert [(r.is_main_result, r.text) for r in execution.results] == [(False, "21"),
                                                                        (True, "quoted")]
    assert execution.text == "quoted"  # the repr's quotes go, as E2B's server does


def test_a_busy_context_makes_the_next_execution_wait_and_others_run(sandbox):
    context = sandbox.create_code_context()
    sandbox.run_code("import time\norder = []", context=context)
    done = {}

    def slow():
        done["slow"] = sandbox.run_code("order.append('slow-start'); time.sleep(2); "
                                        "order.append('slow-end')", context=context)

    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(0.5)
    # Another context runs meanwhile: it is done while the slow one still runs.
    assert sandbox.run_code("1 + 1").text == "2"
    assert thread.is_alive()
    # The same context: this one waits its turn.
    waited = sandbox.run_code("order.append('second'); list(order)", context=context)
    thread.join()
    assert waited.text == "['slow-start', 'slow-end', 'second']"
