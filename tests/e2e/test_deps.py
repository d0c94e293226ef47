"""Dependencies: requirements installed once into cached environments, through the CLI, with
real installers (pip and npm), not mocks."""
import glob
import json
import os
import shutil

import pytest

from conftest import Runbox, serve_package_index

NPM_PACKAGE = "is-number@7.0.0"  # small, no dependencies, on the npm registry this machine uses


@pytest.fixture
def outside_network(runbox):
    """npm installs need the registry: skip where runbox check says there is no network."""
    checks = json.loads(runbox.cli("check", "--json").stdout)["checks"]
    if not next(c for c in checks if c["name"] == "network")["ok"]:
        pytest.skip("no network helper on this host for this user (see runbox check)")


def envs(runbox):
    return json.loads(runbox.cli("envs", "list", "--json").stdout)


def run_with(runbox, language, code, *requirements, env=None, extra=()):
    args = []
    for spec in requirements:
        args += ["--require", spec]
    return runbox.run(language, code, *args, *extra, env=env, timeout=400)


# --- a package index of our own on loopback (PyPI is not reachable here) -----------------

@pytest.fixture(scope="module")
def package_index(tmp_path_factory):
    """A PEP 503 simple index on 127.0.0.1 serving one wheel the test built itself."""
    with serve_package_index(tmp_path_factory.mktemp("index"), "rbxdemo", "1.2.3",
                             "GREETING = 'hello from a wheel served on loopback'\n") as index:
        yield index


def index_env(package_index):
    return {"PIP_INDEX_URL": package_index["url"], "RUNBOX_INSTALL_NETWORK": "host",
            "PIP_NO_CACHE_DIR": "1"}


# --- Python ------------------------------------------------------------------------------

def test_python_wheel_from_a_loopback_index_is_installed_and_imported(runbox, package_index):
    code = "import rbxdemo\nprint(rbxdemo.GREETING)"
    first = run_with(runbox, "python", code, "rbxdemo==1.2.3", env=index_env(package_index))
    assert first["success"], first["error"]
    assert first["output"] == "hello from a wheel served on loopback\n"
    assert first["install"]["reused"] is False
    assert any("rbxdemo" in path for path in package_index["requests"])
    served = len(package_index["requests"])
    second = run_with(runbox, "python", code, "rbxdemo==1.2.3", env=index_env(package_index))
    assert second["output"] == first["output"] and second["install"]["reused"] is True
    assert len(package_index["requests"]) == served  # no installer ran: the index saw nothing
    assert [e["requirements"] for e in envs(runbox)] == ["rbxdemo==1.2.3"]


def build_sdist(directory, name, version, setup_code):
    """Writes a source distribution whose setup.py runs setup_code when pip builds it."""
    import io
    import tarfile
    root = f"{name}-{version}"
    files = {
        f"{root}/PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{root}/setup.py": setup_code + f"\nfrom setuptools import setup\n"
                                         f"setup(name={name!r}, version={version!r}, py_modules=[])\n",
    }
    filename = f"{root}.tar.gz"
    with tarfile.open(os.path.join(directory, filename), "w:gz") as archive:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return filename


def serve_setuptools(index_dir):
    """Debian's setuptools and wheel wheels (python3-setuptools-whl, python3-wheel-whl) on the
    loopback index: pip builds an sdist in an environment of its own with its build backend
    from the index (Python 3.12 and later make venvs without setuptools, so the environment
    cannot lend it)."""
    for project in ("setuptools", "wheel"):
        wheels = glob.glob(f"/usr/share/python-wheels/{project}-*.whl")
        if not wheels:
            pytest.skip(f"no {project} wheel in /usr/share/python-wheels (python3-{project}-whl)")
        (index_dir / "simple" / project).mkdir(parents=True, exist_ok=True)
        wheel = os.path.basename(wheels[0])
        shutil.copy(wheels[0], index_dir / "simple" / project / wheel)
        (index_dir / "simple" / project / "index.html").write_text(
            f'<a href="{wheel}">{wheel}</a>')


@pytest.mark.skipif(os.geteuid() != 0, reason="the link would be followed by root")
def test_an_install_script_cannot_make_runbox_write_outside_the_environment(runbox, tmp_path,
                                                                           package_index):
    """setup.py runs with the environment's directory writable: a link it plants where runbox
    then writes the environment's metadata must be replaced, not followed (as root)."""
    canary = tmp_path / "canary"
    canary.mkdir()
    victim = canary / "victim"
    victim.write_text("untouched")
    index_dir = package_index["dir"]
    name = "rbxplant"
    (index_dir / "simple" / name).mkdir(parents=True, exist_ok=True)
    sdist = build_sdist(str(index_dir / "simple" / name), name, "1.0",
                        "import os\n"
                        "target = '/opt/runbox/env/.runbox-env.json'\n"  # setup.py runs twice
                        f"if not os.path.lexists(target): os.symlink({str(victim)!r}, target)\n")
    (index_dir / "simple" / name / "index.html").write_text(f'<a href="{sdist}">{sdist}</a>')
    serve_setuptools(index_dir)
    env = index_env(package_index)
    result = run_with(runbox, "python", "print('ran')", f"{name}==1.0", env=env)
    assert result["install"] is not None, result
    assert victim.read_text() == "untouched"
    assert not victim.is_symlink()
    assert result["success"], result["error"]  # installed, and its metadata is a file of its own
    assert [e["requirements"] for e in envs(runbox)] == [f"{name}==1.0"]


def test_requirement_satisfied_by_a_system_package_needs_no_index(runbox):
    dead = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_NO_INDEX": "1"}
    result = run_with(runbox, "python", "import numpy\nprint(numpy.__file__)", "numpy>=1.0",
                      env=dead)
    assert result["success"], result["error"]
    assert result["output"].startswith("/usr/lib/python3/dist-packages/numpy/")
    assert result["install"]["reused"] is False


def test_unknown_package_is_an_import_error_nothing_is_cached_and_the_next_run_retries(
        runbox, package_index):
    for _ in range(2):
        result = run_with(runbox, "python", "print('ran')", "rbx-no-such-package",
                          env=index_env(package_index))
        assert result["error_type"] == "ImportError"
        assert result["output"] == ""  # the code did not run
        assert "No matching distribution found for rbx-no-such-package" in result["error"]
        assert result["install"]["reused"] is False
        assert envs(runbox) == []


def test_two_concurrent_first_runs_share_one_install(runbox, package_index):
    args = ["run", "python", "-c", "import rbxdemo; print(rbxdemo.GREETING)", "--json",
            "--require", "rbxdemo"]
    procs = [runbox.popen(*args, env=index_env(package_index)) for _ in range(2)]
    results = [json.loads(p.communicate(timeout=400)[0]) for p in procs]
    assert all(r["success"] for r in results), results
    assert sorted(r["install"]["reused"] for r in results) == [False, True]
    assert len(envs(runbox)) == 1


def test_environment_path_and_site_are_visible_read_only(runbox):
    code = ("import sys, os\nprint(sys.prefix)\n"
            "try:\n    open(sys.prefix + '/x', 'w')\nexcept OSError as e:\n    print(e.errno)")
    result = run_with(runbox, "python", code, "numpy", env={"PIP_NO_INDEX": "1"})
    assert result["output"] == "/opt/runbox/env\n30\n"  # EROFS


# --- JavaScript --------------------------------------------------------------------------

def test_npm_package_is_installed_once_and_imported_with_require_and_import(runbox,
                                                                            outside_network):
    required = run_with(runbox, "javascript",
                        "const isNumber = require('is-number'); console.log(isNumber(5))",
                        NPM_PACKAGE)
    assert required["success"], required["error"]
    assert required["output"] == "true\n" and required["install"]["reused"] is False
    # The registry is made unreachable: a second npm run would fail, reuse does not run npm.
    dead = {"npm_config_registry": "http://127.0.0.1:9/"}
    imported = run_with(runbox, "javascript",
                        "import isNumber from 'is-number';\nconsole.log(isNumber('x'))",
                        NPM_PACKAGE, env=dead)
    assert imported["success"], imported["error"]
    assert imported["output"] == "false\n" and imported["install"]["reused"] is True
    assert len(envs(runbox)) == 1


def test_unknown_npm_package_is_an_import_error(runbox, outside_network):
    result = run_with(runbox, "javascript", "console.log('ran')", "rbx-no-such-package-xyz-123")
    assert result["error_type"] == "ImportError" and result["output"] == ""
    assert "404" in result["error"] or "E404" in result["error"]
    assert envs(runbox) == []


# --- hostile specs -----------------------------------------------------------------------

@pytest.mark.parametrize("language,spec", [
    ("python", "--index-url=http://evil/simple"), ("python", "-e ."), ("python", "-r"),
    ("python", "-rreq.txt"), ("python", "numpy; rm -rf /"), ("python", "numpy\nos"),
    ("python", "../x"), ("python", "/etc/passwd"), ("python", "./pkg"),
    ("python", "http://x/y.whl"), ("python", "numpy @ https://x/n.whl"), ("python", "`id`"),
    ("python", "$(id)"), ("python", "numpy==1.0 && id"), ("python", "x" * 201),
    ("python", ""), ("python", "numpy>=1;python_version>'3'"),
    ("javascript", "--registry=http://evil"), ("javascript", "file:../x"),
    ("javascript", "git+https://x/y.git"), ("javascript", "../x"), ("javascript", "/abs"),
    ("javascript", "lodash@$(id)"), ("javascript", "@scope"), ("javascript", "lodash@"),
    ("javascript", "lodash@file:/etc"), ("javascript", "lodash@http://x/y.tgz"),
    ("javascript", "a;b"), ("javascript", "lodash\n"),
    ("bash", "jq"),
])
def test_hostile_specs_are_refused_before_any_installer_runs(runbox, language, spec):
    proc = runbox.cli("run", language, "-c", "true", "--require", spec, "--json")
    assert proc.returncode == 2, proc.stdout
    message = proc.stderr.decode()
    assert message.startswith("runbox: ") and len(message.strip().splitlines()) == 1
    assert envs(runbox) == []


def test_ten_thousand_specs_are_refused(runbox):
    args = []
    for i in range(10000):
        args += ["--require", f"pkg{i}"]
    proc = runbox.cli("run", "python", "-c", "1", *args, "--json")
    assert proc.returncode == 2 and b"too many requirements" in proc.stderr


@pytest.mark.parametrize("spec,normalized", [
    ("NumPy", "numpy"), ("requests[socks]==2.28.1", "requests[socks]==2.28.1"),
    ("Foo_Bar.baz >= 1.0", "foo-bar-baz>=1.0"),
])
def test_python_specs_are_normalized_into_one_environment(runbox, spec, normalized):
    proc = runbox.cli("run", "python", "-c", "1", "--require", spec, "--json",
                      env={"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_NO_INDEX": "1"})
    result = json.loads(proc.stdout)
    assert result["install"] is not None
    listed = envs(runbox)
    if listed:  # only installable ones (numpy) leave an environment
        assert listed[0]["requirements"] == normalized


# --- the cache ---------------------------------------------------------------------------

def test_envs_gc_removes_unused_environments_but_never_one_in_use(runbox):
    first = run_with(runbox, "python", "print(1)", "numpy", env={"PIP_NO_INDEX": "1"})
    assert first["success"]
    busy = runbox.start("python", "import time; print('using it', flush=True); time.sleep(3)",
                        "--require", "numpy", until="using it", env={"PIP_NO_INDEX": "1"})
    gc = runbox.cli("envs", "gc", "--unused", "0")
    assert gc.returncode == 0 and "removed 0" in gc.stdout.decode()
    assert len(envs(runbox)) == 1
    busy.communicate(timeout=60)
    assert busy.returncode == 0
    gc = runbox.cli("envs", "gc", "--unused", "0")
    assert "removed 1" in gc.stdout.decode()
    assert envs(runbox) == []
