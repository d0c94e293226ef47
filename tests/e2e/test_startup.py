"""What the CLI loads to start (issue 31): libc, nothing more (jansson and libresolv's DNS
parser are linked in whole: CMakeLists.txt).

libarchive (with its compressors, libxml2 and ICU), libnettle, libnftnl and libmnl are
loaded only by the commands that use them (src/base/*_lib.c). A new heavy dependency
of the CLI fails here: add it to the list only after measuring what it costs
`runbox --version` against /bin/true."""
import os
import re
import subprocess

import pytest

from conftest import RUNBOX

# Basenames, the dynamic loader aside.
STARTUP_LIBRARIES = {"libc.so.6"}


def linked_libraries():
    needed = subprocess.run(["readelf", "-d", RUNBOX], capture_output=True, text=True,
                            check=True).stdout
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", needed))


# A sanitizer build links its runtimes (and what they need): the lists are the
# product's, which the normal build is.
sanitized = pytest.mark.skipif(
    any(name.startswith(("libasan", "libubsan")) for name in linked_libraries()),
    reason="a sanitizer build loads the sanitizers' runtimes too")


def libraries_loaded(stderr, pid):
    """The libraries process pid initialised, by LD_DEBUG=libs's "calling init" lines
    (at start and at every dlopen); children's lines carry their own pids."""
    names = set()
    for line in stderr.splitlines():
        found = re.match(r"\s*(\d+):\s+calling init: (\S+)", line)
        if found and int(found.group(1)) == pid:
            names.add(os.path.basename(found.group(2)))
    return {name for name in names if not name.startswith("ld-linux")}


def run_traced(args, env=None):
    proc = subprocess.Popen([RUNBOX, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**(env or os.environ), "LD_DEBUG": "libs"})
    out, err = proc.communicate(timeout=120)
    return proc, out, err


@sanitized
def test_version_loads_only_libc():
    proc, out, err = run_traced(["--version"])
    assert proc.returncode == 0, err
    assert out.startswith("runbox")
    assert libraries_loaded(err, proc.pid) == STARTUP_LIBRARIES


@sanitized
def test_run_without_network_loads_no_archive_nettle_or_nftables(runbox):
    proc, out, err = run_traced(["run", "bash", "--no-network", "-c", "echo started"],
                                env=runbox.env())
    assert proc.returncode == 0, err
    assert out == "started\n"
    assert libraries_loaded(err, proc.pid) == STARTUP_LIBRARIES


@sanitized
def test_binary_does_not_link_the_heavy_libraries():
    assert linked_libraries() == STARTUP_LIBRARIES
