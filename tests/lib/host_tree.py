"""A minimal root filesystem made of the host's own programs and their libraries, for tests that
import images: the links the host has on the way to each file (/bin, /lib64, ...) are made too,
so the programs run inside it as on the host.

As a program (tests that are not Python use it): host_tree.py TREE PROGRAM..."""
import os
import shutil
import subprocess
import sys


def add_host_path(tree, path):
    """Copies path from the host into tree at the same path, making on the way the links the
    host has there (a relative or absolute target, both inside the image)."""
    parts = path.strip("/").split("/")
    for i in range(len(parts)):
        here = "/" + "/".join(parts[:i + 1])
        if os.path.islink(here):
            target = os.readlink(here)
            if not os.path.lexists(tree + here):
                os.makedirs(os.path.dirname(tree + here), exist_ok=True)
                os.symlink(target, tree + here)
            resolved = os.path.normpath(os.path.join(os.path.dirname(here), target))
            add_host_path(tree, "/".join([resolved] + parts[i + 1:]))
            return
    os.makedirs(os.path.dirname(tree + path), exist_ok=True)
    if not os.path.exists(tree + path):
        shutil.copy2(path, tree + path)


def libraries(program):
    """The paths ldd names for program."""
    out = subprocess.run(["ldd", program], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        words = line.split()
        path = words[2] if "=>" in words and len(words) > 2 else words[0]
        if path.startswith("/"):
            found.append(path)
    return found


def host_programs_tree(tree, programs):
    """A minimal root filesystem at tree: the host's programs with their libraries, and the
    directories a sandbox's root needs (/tmp sticky and open to all)."""
    os.makedirs(tree, 0o755, exist_ok=True)
    for program in programs:
        add_host_path(tree, program)
        for library in libraries(program):
            add_host_path(tree, library)
    for directory in ("etc", "tmp", "home", "root", "proc", "dev", "sys", "run", "var/tmp"):
        os.makedirs(os.path.join(tree, directory), exist_ok=True)
    os.chmod(os.path.join(tree, "tmp"), 0o1777)
    return tree


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: host_tree.py TREE PROGRAM...")
    host_programs_tree(sys.argv[1], sys.argv[2:])
