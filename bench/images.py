"""Runtime images (issue 17): what running on the default image (Debian 13, bound read-only
from the image store) costs against running on the host's /usr. Interleaved in one run, per
language, network off: a cold `runbox run` on each (the sandbox built from its root's
prepared namespace), and through `runbox serve` with the pool off (cold) and on (served by a
prepared sandbox), one server per root. The store is the one `make deps` filled
(RUNBOX_BENCH_IMAGES, default /var/lib/runbox/images); without a default image there, the
section says so and measures nothing."""
import json
import os
import subprocess
import time

from common import SETTLE_S, Server, execute_hi, summary, timed, wait_refilled

STORE = os.environ.get("RUNBOX_BENCH_IMAGES", "/var/lib/runbox/images")

CODE = {"python": "print('hi')", "javascript": "console.log('hi')", "bash": "echo hi",
        "typescript": "const greeting: string = 'hi';\nconsole.log(greeting)"}
# TypeScript needs Node.js's type stripping, which the host's Node.js 20 lacks: it is
# measured on the image only, against JavaScript on the same image (issue 30: within 1.3 x).
IMAGE_ONLY = {"typescript"}
# The interpreters themselves, outside any sandbox: the host's, and the image's own in a
# chroot of its tree (root only), so the difference runbox adds is told from theirs.
BARE = {"python": ["/usr/bin/python3", "-c", CODE["python"]],
        "javascript": ["/usr/bin/node", "-e", CODE["javascript"]],
        "bash": ["/bin/bash", "-c", CODE["bash"]],
        "typescript": ["/usr/bin/node", "--experimental-strip-types",
                       "--input-type=commonjs-typescript", "-e", CODE["typescript"]]}


def _has_default(runbox, work):
    state = os.path.join(work, "images-probe-state")
    proc = subprocess.run([runbox, "--images", STORE, "--state-dir", state, "images", "list",
                           "--json"], capture_output=True)
    return proc.returncode == 0 and any(i["name"] == "default" for i in json.loads(proc.stdout))


def _cli(runbox, env, language, image):
    elapsed, out = timed([runbox, "run", language, "-c", CODE[language], "--json",
                          "--no-network", "--image", image], env=env)
    result = json.loads(out)
    if result["output"] != "hi\n" or result["image"] != image:
        raise RuntimeError(f"unexpected result: {out[:300]}")
    return elapsed


def _tree(runbox, work):
    state = os.path.join(work, "images-probe-state")
    out = subprocess.run([runbox, "--images", STORE, "--state-dir", state, "images", "list",
                          "--json"], capture_output=True).stdout
    digest = next(i["digest"] for i in json.loads(out) if i["name"] == "default")
    return os.path.join(STORE, digest.replace(":", "-"))


def _bare(command, chroot=None):
    elapsed, out = timed((["/usr/sbin/chroot", chroot] if chroot else []) + command,
                         env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    if out.strip() != b"hi":
        raise RuntimeError(f"unexpected output: {out[:200]}")
    return elapsed


def _http(server, conn, language, pooled):
    """pooled: whether it must have been served by a prepared sandbox (None: either, while
    the pool's shelves grow to what sequential calls need)."""
    if pooled:
        wait_refilled(server)  # a prepared sandbox waits, as it would for a steady client
    elapsed, result = execute_hi(server, conn, {"language": language, "code": CODE[language],
                                                "network": False})
    if pooled is not None and result.get("pooled", False) != pooled:
        raise RuntimeError(f"expected pooled={pooled}: {result}")
    return elapsed


def run(runbox, work, runs):
    if not _has_default(runbox, work):
        return {"skipped": f"no default image in {STORE} (make deps builds it)"}
    env = {"PATH": "/usr/bin:/bin", "RUNBOX_STATE_DIR": os.path.join(work, "images-state"),
           "RUNBOX_IMAGES": STORE, "RUNBOX_USE_DAEMON": "never"}
    servers = {}
    for root in ("default", "host"):
        for pool in ("cold", "pooled"):
            args = ("--images", STORE, "--default-image", root)
            if pool == "cold":
                args += ("--pool", "0")
            servers[(root, pool)] = Server(runbox, os.path.join(work, f"img-{root}-{pool}-state"),
                                           global_args=args)
    try:
        conns = {key: server.connection() for key, server in servers.items()}
        tree = _tree(runbox, work) if os.geteuid() == 0 else None
        # Every language's variants in one interleaved loop, so that TypeScript's ratio to
        # JavaScript (and each image's to the host's) compares samples of the same moments.
        variants = {}
        for language in CODE:
            roots = ("default",) if language in IMAGE_ONLY else ("host", "default")
            if tree:
                if "host" in roots:
                    variants[(language, "bare_host")] = \
                        lambda lang=language, check=True: _bare(BARE[lang])
                variants[(language, "bare_default")] = \
                    lambda lang=language, check=True: _bare(BARE[lang], tree)
            for root in roots:
                variants[(language, f"cli_{root}")] = \
                    lambda lang=language, r=root, check=True: _cli(runbox, env, lang, r)
                for pool in ("cold", "pooled"):
                    key = (root, pool)
                    variants[(language, f"http_{pool}_{root}")] = \
                        lambda lang=language, k=key, check=True: _http(
                            servers[k], conns[k], lang, k[1] == "pooled" if check else None)
        for variant in variants.values():  # warm-up: namespaces, pool shelves
            for _ in range(5):
                variant(check=False)
                time.sleep(SETTLE_S)
        samples = {key: [] for key in variants}
        for i in range(runs):
            keys = list(variants) if i % 2 == 0 else list(reversed(variants))
            for key in keys:
                time.sleep(SETTLE_S)
                samples[key].append(variants[key]())
        results = {}
        for (language, name), values in samples.items():
            results.setdefault(language, {})[name] = summary(values)
        for language, stats in results.items():
            for kind in ("bare", "cli", "http_cold", "http_pooled"):
                if f"{kind}_host" in stats:
                    host, image = stats[f"{kind}_host"], stats[f"{kind}_default"]
                    image["ratio_to_host"] = round(image["median_ms"] / host["median_ms"], 2)
                javascript = results["javascript"].get(f"{kind}_default")
                if language in IMAGE_ONLY and javascript and f"{kind}_default" in stats:
                    stats[f"{kind}_default"]["ratio_to_javascript"] = round(
                        stats[f"{kind}_default"]["median_ms"] / javascript["median_ms"], 2)
        return {"latency": results, "store": STORE}
    finally:
        for server in servers.values():
            server.stop()


def markdown(results):
    r = results.get("images")
    if not r:
        return []
    lines = ["", "## Runtime images (issue 17)", ""]
    if "skipped" in r:
        return lines + [f"Not measured: {r['skipped']}."]
    lines += ["One execution printing hi, network off, every language's variants "
              "interleaved in one run: on the host's /usr (`--image host`) and on the default image (Debian 13, Python 3.13, the "
              "official Node.js 24, bound read-only from the store), by a cold `runbox run`, and through "
              "`runbox serve` with its pool off (`http_cold`) and on (`http_pooled`); `bare` is "
              "the interpreter alone, the host's and the image's own (in a chroot of its tree), "
              "outside any sandbox. The last column is the image's median over the host's.", "",
              "| runtime | variant | host median ms | image median ms | image p90 | x host |",
              "|---|---|---|---|---|---|"]
    for language, stats in r["latency"].items():
        for kind in ("bare", "cli", "http_cold", "http_pooled"):
            if f"{kind}_host" not in stats:
                continue
            host, image = stats[f"{kind}_host"], stats[f"{kind}_default"]
            lines.append(f"| {language} | {kind} | {host['median_ms']} | {image['median_ms']} | "
                         f"{image['p90_ms']} | {image['ratio_to_host']} |")
    typescript = r["latency"].get("typescript")
    if typescript:
        lines += ["", "TypeScript (types stripped by the image's Node.js; the host's has no type "
                  "stripping) against JavaScript on the same image, same run:", "",
                  "| variant | TypeScript median ms | p90 | x JavaScript |", "|---|---|---|---|"]
        for kind in ("bare", "cli", "http_cold", "http_pooled"):
            s = typescript.get(f"{kind}_default")
            if s:
                lines.append(f"| {kind} | {s['median_ms']} | {s['p90_ms']} | "
                             f"{s.get('ratio_to_javascript', '')} |")
    return lines
