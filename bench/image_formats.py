#!/usr/bin/python3
"""How an image is stored (issue 17): the default image's directory tree, as runbox keeps it,
against the same tree packed into a squashfs (zstd) and loop-mounted in its place. Cold
`runbox run` executions on each, interleaved, network off; then the disk each takes. Root
only (mksquashfs, mount); leaves nothing mounted.

    bench/image_formats.py --runbox build-bench/runbox [--images /var/lib/runbox/images]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

CODE = {"python": "import numpy, pandas; print('hi')", "javascript": "console.log('hi')",
        "bash": "echo hi"}


def tree_of(runbox, images, work):
    out = subprocess.run([runbox, "--images", images, "--state-dir",
                          os.path.join(work, "probe-state"), "images", "list", "--json"],
                         capture_output=True, check=True).stdout
    image = next(i for i in json.loads(out) if i["name"] == "default")
    return image["digest"].replace(":", "-")


def run_once(runbox, store, state, language):
    env = {"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": state, "RUNBOX_IMAGES": store,
           "RUNBOX_USE_DAEMON": "never"}
    start = time.perf_counter()
    out = subprocess.run([runbox, "run", language, "-c", CODE[language], "--json",
                          "--no-network"], env=env, capture_output=True).stdout
    elapsed = (time.perf_counter() - start) * 1000
    result = json.loads(out)
    if result["output"] != "hi\n" or result["image"] != "default":
        raise RuntimeError(f"unexpected result: {out[:300]}")
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runbox", default="build-bench/runbox")
    parser.add_argument("--images", default="/var/lib/runbox/images")
    parser.add_argument("--runs", type=int, default=25)
    args = parser.parse_args()
    runbox = os.path.abspath(args.runbox)
    with tempfile.TemporaryDirectory(prefix="runbox-formats-", dir="/var/tmp") as work:
        digest_dir = tree_of(runbox, args.images, work)
        tree = os.path.join(args.images, digest_dir)
        # A store of its own whose default is the same content, as a mounted squashfs.
        squash_store = os.path.join(work, "squash-store")
        os.makedirs(os.path.join(squash_store, "names"))
        os.makedirs(os.path.join(squash_store, digest_dir))
        os.symlink("../" + digest_dir, os.path.join(squash_store, "names", "default"))
        shutil.copy(tree + ".json", squash_store)
        image_file = os.path.join(work, "default.sqfs")
        subprocess.run(["mksquashfs", tree, image_file, "-comp", "zstd", "-quiet",
                        "-no-progress"], check=True, stdout=subprocess.DEVNULL)
        mount_point = os.path.join(squash_store, digest_dir)
        subprocess.run(["mount", "-t", "squashfs", "-o", "loop,ro", image_file, mount_point],
                       check=True)
        stores = {"tree": args.images, "squashfs": squash_store}
        try:
            for language in CODE:
                samples = {name: [] for name in stores}
                for i in range(args.runs + 3):  # the first three warm the page cache
                    order = list(stores) if i % 2 == 0 else list(reversed(stores))
                    for name in order:
                        state = os.path.join(work, f"{name}-state")
                        elapsed = run_once(runbox, stores[name], state, language)
                        if i >= 3:
                            samples[name].append(elapsed)
                        time.sleep(0.05)
                medians = {name: round(statistics.median(v), 1) for name, v in samples.items()}
                print(f"{language}: tree {medians['tree']} ms, squashfs {medians['squashfs']} ms,"
                      f" x {medians['squashfs'] / medians['tree']:.2f}")
        finally:
            subprocess.run(["umount", mount_point], check=False)
            for name in stores:
                subprocess.run([runbox, "--state-dir", os.path.join(work, f"{name}-state"),
                                "storage", "unmount"], capture_output=True)
            subprocess.run([runbox, "--state-dir", os.path.join(work, "probe-state"), "storage",
                            "unmount"], capture_output=True)
        tree_bytes = int(subprocess.run(["du", "-sb", tree], capture_output=True,
                                        text=True).stdout.split()[0])
        print(f"disk: tree {tree_bytes >> 20} MiB, squashfs "
              f"{os.path.getsize(image_file) >> 20} MiB")


if __name__ == "__main__":
    main()
