"""The egress policy from the command line: `runbox run --egress-allow` narrows one run, the
operator's options (--egress-allow, --egress-deny, --egress-default, --egress-resolver,
--egress-file, and their RUNBOX_EGRESS_* variables) set the policy; every bad value is a
usage error (exit 2, one line naming what was wrong) before anything runs."""
import json
import os

import pytest

from conftest import public_address

VALID = "10.0.0.0/8,pypi.org,*.example.com"
IS_ROOT = os.geteuid() == 0


def connect_code(address):
    """Connects to the package index's address (public_address): allowed by the default
    policy, so only a request's narrowing refuses it."""
    return f'timeout 5 bash -c "exec 3<>/dev/tcp/{address}/443" && echo connected || echo refused'


def refused(proc, *needles):
    assert proc.returncode == 2, proc
    stderr = proc.stderr.decode()
    assert stderr.startswith("runbox: ") and len(stderr.strip().splitlines()) == 1, stderr
    for needle in needles:
        assert needle in stderr, stderr
    assert proc.stdout == b""
    return stderr


# --- runbox run --egress-allow --------------------------------------------------------------

@pytest.mark.parametrize("entry", ["10.0.0.0/33", "*", "http://x", "300.1.2.3", "a" * 300])
def test_a_bad_destination_is_a_usage_error_and_nothing_runs(runbox, entry):
    proc = runbox.cli("run", "bash", "-c", "echo ran > ran.txt", "--session", "egress-bad",
                      "--no-network", "--json", "--egress-allow", f"pypi.org,{entry}")
    refused(proc, "egress_allow")
    assert not os.path.exists(os.path.join(runbox.session_dir("egress-bad"), "ran.txt"))


def test_a_missing_list_and_too_many_destinations_are_usage_errors(runbox):
    refused(runbox.cli("run", "bash", "-c", "true", "--egress-allow"), "--egress-allow")
    most = ",".join(f"10.0.{i}.0/24" for i in range(64))
    refused(runbox.cli("run", "bash", "-c", "true", "--egress-allow", most + ",10.1.0.0/16"),
            "--egress-allow", "more than 64")
    # Split over repeated options, the 65th is counted all the same.
    refused(runbox.cli("run", "bash", "-c", "true", "--egress-allow", most, "--egress-allow",
                       "pypi.org"), "more than 64")
    result = runbox.run("bash", "echo ran", "--no-network", "--egress-allow", most)
    assert result["output"] == "ran\n"


def test_an_entry_that_is_not_utf8_is_a_usage_error(runbox):
    proc = runbox.cli("run", "bash", "-c", "true", "--egress-allow", b"pypi.org,\xff\xfe.com")
    refused(proc, "--egress-allow", "UTF-8")


def test_a_valid_list_with_the_network_off_runs_and_reports_nothing_denied(runbox):
    for args in (["--egress-allow", VALID], [f"--egress-allow={VALID}"],
                 ["--egress-allow", "10.0.0.0/8, pypi.org", "--egress-allow", "*.example.com"],
                 ["--egress-allow", ""]):
        result = runbox.run("bash", "echo ran", "--no-network", *args)
        assert result["output"] == "ran\n", args
        assert result["network"] is False
        assert result["egress_denied"] == 0 and result["egress_denied_to"] == [], args


def test_stream_mode_reports_the_fields_in_the_result_event(runbox):
    proc = runbox.cli("run", "bash", "-c", "echo hi", "--no-network", "--stream",
                      "--egress-allow", VALID)
    assert proc.returncode == 0, proc.stderr
    last = json.loads(proc.stdout.decode().splitlines()[-1])
    assert last["type"] == "result"
    assert last["egress_denied"] == 0 and last["egress_denied_to"] == []


def test_a_stateful_run_carries_the_list_to_the_process_that_holds_kernels(runbox):
    """Stateful calls go over the local socket to `runbox daemon`: a bad entry is refused
    there with the same message, a good list runs."""
    proc = runbox.cli("run", "python", "-c", "print(1)", "--stateful", "--session", "egress-k",
                      "--no-network", "--json", "--egress-allow", "pypi.org,10.0.0.0/33")
    refused(proc, "egress_allow")
    result = runbox.run("python", "6 * 7", "--stateful", "--session", "egress-k",
                        "--no-network", "--egress-allow", VALID)
    assert result["results"][0]["data"]["text/plain"] == "42"
    assert result["egress_denied"] == 0 and result["egress_denied_to"] == []


@pytest.mark.skipif(not IS_ROOT, reason="network-on needs runbox-net and the tun device, set up here only as root")
@pytest.mark.parametrize("stateful", [False, True])
def test_an_empty_list_reaches_nothing_and_live_mode_says_so(runbox, stateful):
    """'' is a list of none, not "no option": a connection anywhere is refused, the result
    names it, and live mode adds a line to stderr saying what the program may not."""
    extra = ["--stateful", "--session", "egress-live"] if stateful else []
    address = public_address()
    connect = connect_code(address)
    code = f"import subprocess; print(subprocess.run({connect!r}, shell=True, " \
           "capture_output=True, text=True).stdout, end='')" if stateful else connect
    language = "python" if stateful else "bash"
    result = runbox.run(language, code, "--network", "--egress-allow", "", "--timeout", "20",
                        *extra)
    assert result["network"] is True
    assert result["output"] == "refused\n", result
    assert result["egress_denied"] >= 1 and f"{address}:443" in result["egress_denied_to"], result
    live = runbox.cli("run", language, "-c", code, "--network", "--egress-allow", "",
                      "--timeout", "20", *extra)
    assert live.stdout == b"refused\n", live
    assert b"runbox: the egress policy refused " in live.stderr, live.stderr
    assert f"{address}:443".encode() in live.stderr


# --- the operator's options -----------------------------------------------------------------

def daemon_argv(state_dir):
    """The command line of the `runbox daemon` serving state_dir (started by a stateful run)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")[:-1]
        except OSError:
            continue
        if argv[1:4] == ["daemon", "--state-dir", state_dir]:
            return argv
    return None


@pytest.mark.skipif(not IS_ROOT, reason="network-on needs runbox-net and the tun device, set up here only as root")
def test_the_daemon_a_stateful_run_starts_gets_the_operators_policy(runbox):
    """The daemon holds the kernels and runs the stateful code: it applies the policy of the
    CLI that started it (here nothing is public), not one of its own."""
    code = ("import socket\ns = socket.socket(); s.settimeout(5)\n"
            "print(s.connect_ex(('1.1.1.1', 80)) != 0)")
    result = runbox.run("python", code, "--stateful", "--session", "egress-daemon", "--network",
                        "--timeout", "20", env={"RUNBOX_EGRESS_DEFAULT": "none",
                                                "RUNBOX_EGRESS_DENY": "203.0.113.0/24"})
    argv = daemon_argv(runbox.state_dir)
    assert argv, "a daemon serves the state directory"
    options = dict(zip(argv[4::2], argv[5::2]))
    assert options["--egress-default"] == "none" and options["--egress-deny"] == "203.0.113.0/24"
    assert result["output"] == "True\n", result
    assert result["egress_denied"] >= 1 and "1.1.1.1:80" in result["egress_denied_to"], result


@pytest.mark.parametrize("args,option", [
    (["--egress-default", "maybe"], "--egress-default"),
    (["--egress-default=all"], "--egress-default"),
    (["--egress-deny", "10.0.0.0/33"], "--egress-deny"),
    (["--egress-allow", "http://x"], "--egress-allow"),
    (["--egress-resolver", ""], "--egress-resolver"),
    (["--egress-resolver", "not an address"], "--egress-resolver"),
    (["--egress-file", ""], "--egress-file"),
])
def test_a_bad_operator_option_is_a_usage_error_before_or_after_the_command(runbox, args,
                                                                            option):
    before = refused(runbox.cli(*args, "run", "bash", "-c", "true"), option)
    if args[0] != "--egress-allow":  # after `run`, --egress-allow is the run's own
        refused(runbox.cli("run", "bash", "-c", "true", *args), option)
    refused(runbox.cli("sessions", "list", *args), option)
    if option == "--egress-default":
        assert "public" in before and "none" in before  # the accepted values


def test_a_missing_egress_file_is_refused_naming_it(runbox, tmp_path):
    missing = str(tmp_path / "no-such-egress")
    refused(runbox.cli("--egress-file", missing, "run", "bash", "-c", "true"), missing)
    proc = runbox.cli("run", "bash", "-c", "true", env={"RUNBOX_EGRESS_FILE": missing})
    refused(proc, missing)


@pytest.mark.parametrize("name,value", [
    ("RUNBOX_EGRESS_DEFAULT", "nnone"),
    ("RUNBOX_EGRESS_DENY", "10.0.0.0/33"),
    ("RUNBOX_EGRESS_ALLOW", "*"),
    ("RUNBOX_EGRESS_RESOLVER", "not an address"),
])
def test_a_bad_environment_default_is_refused_not_ignored(runbox, name, value):
    """A misspelt "none" must not leave the network open: it is an error, like the option."""
    refused(runbox.cli("run", "bash", "-c", "true", "--no-network", env={name: value}))


def test_an_option_overrides_a_bad_environment_default(runbox):
    result = runbox.run("bash", "echo ran", "--no-network", "--egress-default", "none",
                        env={"RUNBOX_EGRESS_DEFAULT": "nnone"})
    assert result["output"] == "ran\n"


def test_valid_operator_options_and_variables_are_taken(runbox, tmp_path):
    policy = tmp_path / "egress"
    policy.write_text("# a mirror inside\nallow 10.1.2.0/24, pypi.internal\n"
                      "deny 203.0.113.0/24\ndefault none\nresolver 127.0.0.53\n")
    for args, env in (
            (["--egress-default", "none", "--egress-allow", "10.1.2.0/24 pypi.internal",
              "--egress-deny", "203.0.113.7", "--egress-resolver", "[2001:db8::53]:5353"], None),
            (["--egress-file", str(policy)], None),
            ([], {"RUNBOX_EGRESS_DEFAULT": "public", "RUNBOX_EGRESS_ALLOW": "10.1.2.0/24",
                  "RUNBOX_EGRESS_DENY": "", "RUNBOX_EGRESS_RESOLVER": "10.0.0.53:53",
                  "RUNBOX_EGRESS_FILE": str(policy)})):
        proc = runbox.cli(*args, "run", "bash", "-c", "echo ran", "--no-network", "--json",
                          env=env)
        assert proc.returncode == 0, (args, env, proc.stderr)
        assert json.loads(proc.stdout)["output"] == "ran\n"


def test_help_names_every_egress_option(runbox):
    text = runbox.cli("--help").stdout.decode()
    for option in ("--egress-allow", "--egress-deny", "--egress-default public|none",
                   "--egress-resolver", "--egress-file", "RUNBOX_EGRESS_DEFAULT",
                   "/etc/runbox/egress"):
        assert option in text, option
    assert "--egress-allow LIST" in runbox.cli("run", "--help").stdout.decode()
