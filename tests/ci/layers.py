#!/usr/bin/python3
"""make layers: the engine's dependencies point down only.

Reads, with nm, which object of the build defines and which uses each symbol, and so which
source file depends on which. Fails, naming the files and the symbols, on:
  - a circle of files (each depends on the next, the last on the first): none of them could be
    understood, tested or changed alone;
  - an arrow from a folder of src/ to a folder above it in src/LAYERS;
  - a front end (the folders src/LAYERS marks `front`) using anything of the engine but what
    include/runbox.h declares (the local socket's folder, marked `socket`, is theirs to use).
Generated objects (the kernels' drivers, the playground's files) count as part of the folder
whose files use them.

    tests/ci/layers.py [--build DIR] [--layers FILE] [--header FILE] [--root DIR] [--graph]
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The build's targets whose objects are runbox itself (not tests, fuzzers or probes).
TARGETS = ("runbox_engine", "runbox_cli", "runbox-serve", "runbox")


def objects(build, root=ROOT):
    """{source path ('src/x/y.c' or 'generated/z.c'): object path}, one object per source."""
    found = {}
    for target in TARGETS:
        top = os.path.join(build, "CMakeFiles", f"{target}.dir")
        for where, _, names in os.walk(top):
            for name in names:
                if name.endswith(".c.o"):
                    path = os.path.join(where, name)
                    source = os.path.relpath(path, top)[:-2]
                    # An object whose source is gone (moved, removed) is a stale
                    # leftover of an earlier build: not part of runbox now.
                    origin = os.path.join(build if source.startswith("generated/") else root,
                                          source)
                    if os.path.exists(origin):
                        found.setdefault(source, path)
    return found


def symbols(path):
    """(defined global symbols, undefined symbols) of one object."""
    out = subprocess.run(["nm", "-g", path], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
        elif len(parts) == 3 and parts[1] not in "Uw":
            defined.add(parts[2])
    return defined, used


def read_layers(path):
    """[(rank, folders, marks)], top first; folders of one line are one layer."""
    layers = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            words = line.split()
            marks = {w[1:-1] for w in words if w.startswith("(")}
            folders = [w for w in words if not w.startswith("(")]
            if not folders:
                sys.exit(f"layers: {path}:{number}: a layer names no folder")
            layers.append((len(layers), folders, marks))
    return layers


def public_names(header):
    """The identifiers include/runbox.h declares: functions, types' and constants' names."""
    with open(header) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    return set(re.findall(r"\b(rbx_\w+|runbox_\w+|RBX_\w+)\b", text))


def folder_of(source):
    """src/sandbox/net.c -> 'sandbox'; src/engine/engine.c -> '.' (a file of src/ itself)."""
    parts = source.split("/")
    return parts[1] if len(parts) > 2 else "."


def circles(graph):
    """The strongly connected components of more than one file (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def check(build, layers_path, header, show_graph=False, root=ROOT):
    found = objects(build, root)
    if not found:
        return [f"no objects of runbox in {build}: build it first (make build)"]
    defined_by, uses = {}, {}
    for source, path in found.items():
        defined, used = symbols(path)
        uses[source] = used
        for name in defined:
            defined_by.setdefault(name, source)
    # edges[a][b] = the symbols a uses that b defines
    edges = {s: {} for s in found}
    for source, used in uses.items():
        for name in used:
            owner = defined_by.get(name)
            if owner and owner != source:
                edges[source].setdefault(owner, set()).add(name)
    folders = {s: folder_of(s) for s in found if s.startswith("src/")}
    for source in found:
        if source.startswith("generated/"):
            users = {folders[s] for s in found if source in edges[s] and s in folders}
            folders[source] = users.pop() if len(users) == 1 else "generated"
    layers = read_layers(layers_path)
    rank = {folder: r for r, names, _ in layers for folder in names}
    marks = {folder: m for _, names, m in layers for folder in names}
    problems = []
    for folder in sorted(set(folders.values()) - set(rank)):
        where = sorted(s for s, f in folders.items() if f == folder)
        problems.append(f"folder {folder!r} ({', '.join(where)}) is not in "
                        f"{os.path.relpath(layers_path, ROOT)}")
    public = public_names(header)
    for a in sorted(edges):
        for b in sorted(edges[a]):
            fa, fb = folders[a], folders[b]
            names = sorted(edges[a][b])
            if fa in rank and fb in rank and rank[fb] < rank[fa]:
                problems.append(f"upward: {a} ({fa}) uses {b} ({fb}), a layer above it: "
                                f"{', '.join(names[:6])}")
            engine = "front" not in marks.get(fb, ()) and "socket" not in marks.get(fb, ())
            if "front" in marks.get(fa, ()) and engine:
                private = [n for n in names if n not in public]
                if private:
                    problems.append(f"front end: {a} uses {b}'s {', '.join(private[:6])}, "
                                    "which include/runbox.h does not declare")
    graph = {s: set(edges[s]) for s in edges}
    for component in circles(graph):
        inside = set(component)
        arrows = [f"{a} -> {b} ({', '.join(sorted(edges[a][b])[:3])})"
                  for a in component for b in sorted(edges[a]) if b in inside]
        problems.append(f"circle of {len(component)} files: " + "; ".join(arrows))
    if show_graph:
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f"{a} -> {b}: {' '.join(sorted(edges[a][b]))}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--layers", default=os.path.join(ROOT, "src", "LAYERS"))
    parser.add_argument("--header", default=os.path.join(ROOT, "include", "runbox.h"))
    parser.add_argument("--root", default=ROOT, help="the tree the build was made from")
    parser.add_argument("--graph", action="store_true", help="print every arrow too")
    args = parser.parse_args()
    problems = check(args.build, args.layers, args.header, args.graph, args.root)
    for problem in problems:
        print(f"layers: {problem}")
    if problems:
        print(f"layers: {len(problems)} problem(s); the layers are listed in "
              f"{os.path.relpath(args.layers, ROOT)}")
        return 1
    print(f"layers: the dependencies of {len(objects(args.build, args.root))} objects point down "
          "only")
    return 0


if __name__ == "__main__":
    sys.exit(main())
