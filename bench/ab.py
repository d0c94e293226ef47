#!/usr/bin/python3
"""Two builds side by side: pooled one-off executions through `runbox serve`, one server per
build, taken in turn, each sample at rest, with the CPU each server and its sandboxes spent.
For the change a commit makes (build the commit before it into another directory):

    bench/ab.py --a /tmp/before/build-bench/runbox --b build-bench/runbox [--runs 200]
                [--language bash] [--code 'echo hi'] [--network] [--cold | --daemon | --version]

Prints the median latency and the CPU per execution of each, and b's over a's. The CPU is
the servers' clock ticks (10 ms) added up over every sample: read it over a few hundred.
With --cold, each sample is a cold `runbox run` instead (no daemon), and its CPU that of the
CLI and its sandbox (the children's usage). With --daemon, each sample is `runbox run` handed to
a running daemon, each build's own on its own state directory, and its CPU the CLI's alone.
With --version, each sample is `runbox --version`, in turn with `/bin/true`: the CLI's start,
and each build's over /bin/true."""
import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time

from common import Server, execute_over_http, server_cpu_ms, summary, wait_refilled


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", required=True, help="runbox of the first build")
    parser.add_argument("--b", required=True, help="runbox of the second build")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--language", default="bash")
    parser.add_argument("--code", default="echo hi")
    parser.add_argument("--network", action="store_true")
    parser.add_argument("--cold", action="store_true",
                        help="cold `runbox run` samples instead of a server's")
    parser.add_argument("--daemon", action="store_true",
                        help="`runbox run` samples through each build's running daemon")
    parser.add_argument("--version", action="store_true",
                        help="`runbox --version` samples, against /bin/true")
    args = parser.parse_args()
    if args.version:
        return version(args)
    if args.cold or args.daemon:
        return cold(args)
    with tempfile.TemporaryDirectory(prefix="runbox-ab-") as work:
        servers = {name: Server(os.path.abspath(path), os.path.join(work, f"{name}-state"))
                   for name, path in (("a", args.a), ("b", args.b))}
        try:
            conns = {name: server.connection() for name, server in servers.items()}
            samples = {name: [] for name in servers}
            cpu = {name: 0.0 for name in servers}

            # Not /metrics polled until the pool is full again: each poll costs the server
            # CPU. A prepared sandbox is made within tens of milliseconds.
            refill_s = 0.08

            def one(name):
                server = servers[name]
                before = server_cpu_ms(server)
                elapsed, _ = execute_over_http(server, conns[name], args.language, args.code,
                                               args.network)
                time.sleep(refill_s)  # the next prepared sandbox is this execution's CPU too
                cpu[name] += server_cpu_ms(server) - before
                return elapsed
            for name in servers:  # warm-up
                for _ in range(5):
                    one(name)
                wait_refilled(servers[name])
                cpu[name] = 0.0
            for i in range(args.runs):
                for name in (("a", "b") if i % 2 == 0 else ("b", "a")):
                    samples[name].append(one(name))
        finally:
            for name, server in servers.items():
                server.stop()
                # As root a state directory's storage is a mounted image.
                subprocess.run([getattr(args, name), "--state-dir",
                                os.path.join(work, f"{name}-state"), "storage", "unmount"],
                               capture_output=True)
    for name in servers:
        s = summary(samples[name])
        print(f"{name}: median {s['median_ms']} ms, p90 {s['p90_ms']} ms, "
              f"CPU {cpu[name] / args.runs:.2f} ms per execution")
    a, b = summary(samples["a"])["median_ms"], summary(samples["b"])["median_ms"]
    print(f"b over a: latency {b / a:.3f} x, CPU "
          f"{(cpu['b'] / args.runs) / max(cpu['a'] / args.runs, 0.01):.3f} x")


def version(args):
    """The CLI's start: `runbox --version` of each build and /bin/true, in turn."""
    commands = {"true": ["/bin/true"], "a": [args.a, "--version"], "b": [args.b, "--version"]}
    samples = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, command in commands.items():
            start = time.perf_counter()
            subprocess.run(command, stdout=subprocess.DEVNULL, check=True)
            samples[name].append((time.perf_counter() - start) * 1000)
    median = {name: statistics.median(values) for name, values in samples.items()}
    for name in commands:
        print(f"{name}: {summary(samples[name])}")
    for name in ("a", "b"):
        print(f"{name} over /bin/true: +{median[name] - median['true']:.3f} ms")


def cold(args):
    """`runbox run` samples of each build, in turn, each after the machine settled: cold, or
    through the build's daemon (started by the warm-up, which it outlives: --daemon)."""
    samples = {"a": [], "b": []}
    cpu = {"a": 0.0, "b": 0.0}
    with tempfile.TemporaryDirectory(prefix="runbox-ab-") as work:
        def one(name):
            runbox = os.path.abspath(getattr(args, name))
            env = {"PATH": "/usr/bin:/bin",
                   "RUNBOX_USE_DAEMON": "always" if args.daemon else "never",
                   "RUNBOX_STATE_DIR": os.path.join(work, f"{name}-state")}
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run([runbox, "run", args.language, "-c", args.code,
                            "--network" if args.network else "--no-network"],
                           env=env, stdout=subprocess.DEVNULL, check=True)
            elapsed = (time.perf_counter() - start) * 1000
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name] += (after.ru_utime + after.ru_stime - before.ru_utime
                          - before.ru_stime) * 1000
            return elapsed
        try:
            for name in samples:  # warm-up: the state directory, the prepared namespace
                for _ in range(5):
                    one(name)
                cpu[name] = 0.0
            for i in range(args.runs):
                for name in (("a", "b") if i % 2 == 0 else ("b", "a")):
                    time.sleep(0.05)
                    samples[name].append(one(name))
        finally:
            for name in samples:
                subprocess.run([getattr(args, name), "--state-dir",
                                os.path.join(work, f"{name}-state"), "storage", "unmount"],
                               capture_output=True)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    for name in samples:
        print(f"{name}: median {medians[name]:.2f} ms, CPU {cpu[name] / args.runs:.2f} ms per "
              "execution " + ("(the CLI)" if args.daemon else "(the CLI and its sandbox)"))
    print(f"b over a: latency {medians['b'] / medians['a']:.3f} x, CPU "
          f"{cpu['b'] / max(cpu['a'], 0.01):.3f} x")


if __name__ == "__main__":
    main()
