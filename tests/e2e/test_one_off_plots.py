"""Rich outputs of one-off Python runs (issue 30 item 3): a matplotlib figure shown or left open
comes back in "results" as image/png, exactly as a stateful call's does. The channel they come
through is the program's own (its bootstrap's report, kept open after the syntax check): what
the program writes there is held to the kernels' rules, a display event per line, 8 MiB in
all, the rest counted in truncated.results."""
import base64
import json

import pytest

PLOT = "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\n"
CAP = 8 << 20


def pngs(result):
    return [base64.b64decode(r["data"]["image/png"]) for r in result["results"]
            if "image/png" in r["data"]]


@pytest.fixture
def plotting(runbox):
    """runbox where the sandbox's Python has matplotlib (the default image; the host's root
    when it has it)."""
    probe = runbox.run("python", "import matplotlib")
    if not probe["success"]:
        pytest.skip("no matplotlib on the root the suite runs on: " + probe["error"][-200:])
    yield runbox
    runbox.remove_all_sessions()


def test_a_shown_figure_comes_back_as_png_like_a_stateful_calls(plotting):
    one_off = plotting.run("python", PLOT + "plt.show()\nprint('drawn')")
    assert one_off["success"] and one_off["output"] == "drawn\n", one_off
    assert one_off["stateful"] is False and one_off["truncated"]["results"] == 0
    (png,) = pngs(one_off)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000
    stateful = plotting.run("python", PLOT + "plt.show()", "--stateful")
    shape = [(r["kind"], sorted(r["data"])) for r in stateful["results"]]
    assert [(r["kind"], sorted(r["data"])) for r in one_off["results"]] == shape, stateful
    assert one_off["results"][0]["data"]["text/plain"] == \
        stateful["results"][0]["data"]["text/plain"] == "<Figure size 640x480 with 1 Axes>"


def test_figures_left_open_come_in_order_however_the_program_ends(plotting):
    two = ("import matplotlib.pyplot as plt\n"
           "for size in (3, 5):\n"
           "    plt.figure(figsize=(size, 2)); plt.plot([1, size])\n")
    ended = plotting.run("python", two)
    assert [r["data"]["text/plain"] for r in ended["results"]] == \
        ["<Figure size 300x200 with 1 Axes>", "<Figure size 500x200 with 1 Axes>"], ended
    failed = plotting.run("python", two + "1 / 0")
    assert failed["error_type"] == "RuntimeError" and failed["exception"] == "ZeroDivisionError"
    assert "ZeroDivisionError" in failed["error"] and len(pngs(failed)) == 2, failed
    exited = plotting.run("python", two + "import sys; sys.exit(3)")
    assert exited["exit_code"] == 3 and len(pngs(exited)) == 2, exited
    closed = plotting.run("python", two + "plt.close('all')")
    assert closed["success"] and closed["results"] == [], closed


def test_a_program_without_plots_has_no_results_and_its_children_no_channel(plotting):
    plain = plotting.run("python", "print(1)")
    assert plain["results"] == [] and plain["truncated"]["results"] == 0, plain
    # The channel is fd 4, write-only and close-on-exec: a program it starts never has it.
    code = ("import os, subprocess\n"
            "flags = int(open('/proc/self/fdinfo/4').read().split('flags:')[1].split()[0], 8)\n"
            "print(flags & os.O_ACCMODE == os.O_WRONLY, bool(flags & 0o2000000))\n"
            "os.system('ls /proc/self/fd')\n")
    r = plotting.run("python", code)
    lines = r["output"].split("\n")
    assert lines[0] == "True True", r
    assert "4" not in lines[1:], r["output"]


def test_a_forged_channel_keeps_only_display_events_under_the_cap(plotting):
    """The program may write the channel itself (as it may a kernel's): a display event is a
    rich output, anything else is left out and counted, and so is what passes the cap."""
    code = ("import json\n"
            "def event(data, kind='display_data'):\n"
            "    return (json.dumps({'type': 'display', 'kind': kind, 'data': data}) + '\\n')"
            ".encode()\n"
            "junk = [b'not json\\n', b'{\"type\": \"done\", \"id\": 1, \"status\": \"ok\"}\\n',\n"
            "        event({}, 'stream'), b'{\"type\": \"display\", \"kind\": \"display_data\", '\n"
            "        b'\"data\": \"x\"}\\n', b'[' * 100000 + b']' * 100000 + b'\\n', b'\\xff\\xfe\\n']\n"
            "with open(4, 'wb', closefd=False) as w:\n"
            "    w.write(event({'text/plain': 'forged'}))\n"
            "    for line in junk: w.write(line)\n"
            "    w.write(event({'text/markdown': '*kept*'}, 'execute_result'))\n"
            "    w.write(event({'text/plain': 'unfinished'})[:-1])\n")
    r = plotting.run("python", code)
    assert r["success"], r
    assert r["results"] == [{"kind": "display_data", "data": {"text/plain": "forged"}},
                            {"kind": "execute_result", "data": {"text/markdown": "*kept*"}}], r
    assert r["truncated"]["results"] > 200000, r["truncated"]


def test_rich_outputs_past_the_cap_are_counted_not_kept(plotting):
    """A line longer than anything that could be kept is skipped as it comes; of three
    outputs of 3 MiB, the third would pass the 8 MiB cap."""
    code = ("import json\n"
            "with open(4, 'wb', closefd=False) as w:\n"
            f"    w.write(b'x' * {CAP + (2 << 20)} + b'\\n')\n"
            "    for c in 'abc':\n"
            "        w.write((json.dumps({'type': 'display', 'kind': 'display_data',\n"
            "                             'data': {'text/plain': c * (3 << 20)}}) + '\\n').encode())\n")
    r = plotting.run("python", code)
    assert r["success"], r["error"][-500:]
    assert [x["data"]["text/plain"][0] for x in r["results"]] == ["a", "b"]
    assert r["truncated"]["results"] >= CAP + (2 << 20) + (3 << 20), r["truncated"]


def test_a_huge_figure_is_left_out_and_counted_and_the_run_still_succeeds(plotting):
    """A figure whose PNG is larger than the whole results cap (noise does not compress)."""
    code = ("import numpy as np, matplotlib.pyplot as plt\n"
            "plt.figure(figsize=(25, 25), dpi=100)\n"
            "plt.imshow(np.random.default_rng(1).random((2500, 2500, 3)))\n"
            "plt.figure(); plt.plot([1, 2])\n")
    r = plotting.run("python", code, "--timeout", "120", "--memory", "2048", timeout=180)
    assert r["success"], r["error"][-500:]
    assert r["truncated"]["results"] > CAP, r["truncated"]
    assert [x["data"]["text/plain"] for x in r["results"]] == \
        ["<Figure size 640x480 with 1 Axes>"], [x["data"].get("text/plain") for x in r["results"]]


def test_the_cli_and_mcp_show_a_one_off_plot(plotting):
    live = plotting.cli("run", "python", "-c", PLOT)
    assert live.returncode == 0 and live.stdout == b"", live
    assert b"[runbox: display_data: image/png text/plain (see --json)]" in live.stderr, live
    streamed = plotting.cli("run", "python", "-c", PLOT, "--stream")
    kinds = [json.loads(line)["type"] for line in streamed.stdout.splitlines()]
    assert kinds == ["display", "result"], kinds
    reply = plotting.mcp_call("execute_python", {"code": PLOT})
    content = reply["result"]["content"]
    images = [c for c in content if c["type"] == "image"]
    assert len(images) == 1 and images[0]["mimeType"] == "image/png", content
    assert base64.b64decode(images[0]["data"]).startswith(b"\x89PNG")
    assert reply["result"]["structuredContent"]["results"][0]["kind"] == "display_data"
