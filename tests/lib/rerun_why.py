"""Why a case was run again. CI runs each failing case once more (pytest-rerunfailures) and
names the ones it reran (-rR), but not why their first run failed: a flake that passes on its
retry leaves no trace to find it by. The suites' conftests take these two hooks; the summary
at the end says, for each case run again, the assertion or error of its first run."""

_why = {}  # nodeid: the lines that say why its first run failed
_told = [False]  # the e2e and http conftests both take the hooks: say it once


def pytest_runtest_logreport(report):
    if getattr(report, "outcome", "") != "rerun" or report.nodeid in _why:
        return
    text = getattr(report, "longreprtext", "") or ""
    lines = [line for line in text.splitlines() if line.startswith("E ")]
    _why[report.nodeid] = (lines or text.splitlines()[-3:])[:8]


def pytest_terminal_summary(terminalreporter):
    if not _why or _told[0]:
        return
    _told[0] = True
    terminalreporter.section("why cases were run again (their first run)")
    for nodeid, lines in _why.items():
        terminalreporter.write_line(nodeid)
        for line in lines:
            terminalreporter.write_line("    " + line[:300])
