"""tests/ci/layers.py (make layers): it passes on runbox's own build, and fails, naming the
files, on each kind of wrong arrow, shown on small objects compiled here."""
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import layers  # noqa: E402

LAYERS = """\
front  (front)   # a front end
top
low
"""


def compile_tree(tmp_path, sources, layer_text=LAYERS, header="void rbx_public(void);\n"):
    """Compiles {"src/folder/file.c": code} into a build tree laid out as CMake's (objects
    under CMakeFiles/runbox_engine.dir/...), and writes the layers and the public header."""
    build = tmp_path / "build"
    for source, code in sources.items():
        path = tmp_path / source
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
        obj = build / "CMakeFiles" / "runbox_engine.dir" / (source + ".o")
        obj.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cc", "-c", "-o", str(obj), str(path)], check=True)
    (tmp_path / "LAYERS").write_text(layer_text)
    (tmp_path / "runbox.h").write_text(header)
    return layers.check(str(build), str(tmp_path / "LAYERS"), str(tmp_path / "runbox.h"),
                        root=str(tmp_path))


FINE = {
    "src/front/cli.c": "void rbx_public(void); void cli(void) { rbx_public(); }\n",
    "src/top/flow.c": "void low_helper(void); void rbx_public(void) { low_helper(); }\n",
    "src/low/helper.c": "void low_helper(void) {}\n",
}


def test_arrows_that_point_down_pass(tmp_path):
    assert compile_tree(tmp_path, FINE) == []


def test_an_arrow_up_a_layer_fails_naming_both_files(tmp_path):
    tree = dict(FINE)
    tree["src/low/helper.c"] = "void top_thing(void); void low_helper(void) { top_thing(); }\n"
    tree["src/top/thing.c"] = "void top_thing(void) {}\n"
    problems = compile_tree(tmp_path, tree)
    assert problems == ["upward: src/low/helper.c (low) uses src/top/thing.c (top), a layer "
                        "above it: top_thing"], problems


def test_a_circle_of_files_fails_even_within_one_folder(tmp_path):
    tree = dict(FINE)
    tree["src/low/a.c"] = "void b(void); void a(void) { b(); }\n"
    tree["src/low/b.c"] = "void a(void); void b(void) { a(); }\n"
    problems = compile_tree(tmp_path, tree)
    assert len(problems) == 1 and problems[0].startswith("circle of 2 files: "), problems
    assert "src/low/a.c -> src/low/b.c (b)" in problems[0], problems
    assert "src/low/b.c -> src/low/a.c (a)" in problems[0], problems


def test_a_front_end_may_use_only_the_public_header(tmp_path):
    tree = dict(FINE)
    tree["src/front/cli.c"] = "void low_helper(void); void cli(void) { low_helper(); }\n"
    problems = compile_tree(tmp_path, tree)
    assert problems == ["front end: src/front/cli.c uses src/low/helper.c's low_helper, which "
                        "include/runbox.h does not declare"], problems


def test_objects_of_sources_that_are_gone_are_not_counted(tmp_path):
    """A build tree keeps the objects of moved or removed files: they are no part of runbox."""
    tree = dict(FINE)
    tree["src/low/old.c"] = "void top_thing(void); void old(void) { top_thing(); }\n"
    tree["src/top/thing.c"] = "void top_thing(void) {}\n"
    compile_tree(tmp_path, tree)
    (tmp_path / "src" / "low" / "old.c").unlink()
    assert layers.check(str(tmp_path / "build"), str(tmp_path / "LAYERS"),
                        str(tmp_path / "runbox.h"), root=str(tmp_path)) == []


def test_a_folder_missing_from_the_layers_fails(tmp_path):
    tree = dict(FINE)
    tree["src/stray/x.c"] = "void stray(void) {}\n"
    problems = compile_tree(tmp_path, tree)
    assert len(problems) == 1 and "folder 'stray' (src/stray/x.c) is not in" in problems[0]


def test_the_command_exits_1_with_the_problems_and_0_without(tmp_path):
    compile_tree(tmp_path, FINE)
    ok = subprocess.run([sys.executable, os.path.join(HERE, "layers.py"), "--build",
                         str(tmp_path / "build"), "--layers", str(tmp_path / "LAYERS"),
                         "--header", str(tmp_path / "runbox.h"), "--root", str(tmp_path)],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and "point down only" in ok.stdout, ok
    (tmp_path / "LAYERS").write_text("low\ntop\nfront (front)\n")  # upside down
    bad = subprocess.run([sys.executable, os.path.join(HERE, "layers.py"), "--build",
                          str(tmp_path / "build"), "--layers", str(tmp_path / "LAYERS"),
                          "--header", str(tmp_path / "runbox.h"), "--root", str(tmp_path)],
                         capture_output=True, text=True)
    assert bad.returncode == 1, bad
    assert "upward: src/top/flow.c (top) uses src/low/helper.c" in bad.stdout, bad.stdout


BUILT = os.path.isdir(os.path.join(ROOT, "build", "CMakeFiles", "runbox_engine.dir"))


@pytest.mark.skipif(not BUILT, reason="runbox is not built (make build)")
def test_runbox_itself_passes():
    assert layers.check(os.path.join(ROOT, "build"), os.path.join(ROOT, "src", "LAYERS"),
                        os.path.join(ROOT, "include", "runbox.h")) == []
