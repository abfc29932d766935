"""Where the Spark JVM's CPU goes: async-profiler on a running engine, summed by pipeline step.

JFR started on a loaded engine deoptimised it (the bench's Kafka phase fell from ~2,500 to
~580 tx/s while it recorded), so its samples describe a JVM that no longer runs as it does
unprofiled. async-profiler samples CPU time through perf events, with no safepoint bias
and no deoptimisation (one-run cost here: within the run-to-run noise). This resolves it
from Maven Central into `.cache/async-profiler/` on first use (like every other JVM artifact
of the project: never committed), attaches it to the Spark JVM (the process running
`SparkSubmit`, or `--pid`), samples for `--seconds`, writes the raw stacks (collapsed
format, one line per distinct stack, with thread names) and prints the summary below.

    .venv/bin/python bench/profile_jvm.py --seconds 30 --out /tmp/spark.collapsed
    .venv/bin/python bench/profile_jvm.py --summarize /tmp/spark.collapsed

Run it while `txcoord bench` (or any load) runs, e.g. a few seconds into the bench's
measured phase. Executor-task samples are attributed to the first step whose pattern one
of their frames matches, in this order (so the stage's state work is not counted under the
Arrow job that drives it); the other threads are grouped by name. "Across steps" counts
samples anywhere in the JVM holding a frame of each pattern.
"""

from __future__ import annotations

import argparse
import platform
import re
import subprocess
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path

from coordinator.bench.resources import spark_jvm_pids

VERSION = "3.0"
ARTIFACT = f"tools.profiler:async-profiler:{VERSION}"
CACHE = Path(__file__).resolve().parent.parent / ".cache" / "async-profiler" / VERSION

#: The frame every executor task's stack holds.
TASK_FRAME = "org/apache/spark/executor/Executor$TaskRunner.run"

#: Executor-task steps: (name, pattern); first match wins.
TASK_STEPS = [
    (
        "stage: state store (RocksDB, timers, state encoders)",
        r"TimerStateImpl|ValueStateImpl|StateTypesEncoder|RocksDBStateStore|/RocksDB\.|rocksdb::",
    ),
    ("stage: its output rows made Spark rows (serializer)", r"serializefromobject"),
    (
        "stage: the processor's own Java (txcoord)",
        r"txcoord/(TransactionProcessor|Lifecycle|StageRows|Landing)",
    ),
    ("collect: rows to Arrow", r"ArrowWriter|ArrowConverters\$\.serializeBatch|MessageSerializer"),
    ("read: Kafka consumer", r"KafkaDataConsumer|KafkaBatchPartitionReader|org/apache/kafka/"),
    (
        "parse: ingress rules (UDF, its argument conversion)",
        r"txcoord/Ingress|ToScalaUDF|CatalystTypeConverters",
    ),
    (
        "shuffle: write and read",
        r"DiskBlockObjectWriter|ShuffleBlockFetcherIterator|"
        r"UnsafeRowSerializer|writePartitionedData",
    ),
    ("code generation (per task)", r"CodeGenerator|CodegenContext|janino"),
]

#: Other threads, by name: (group, pattern on the thread name); first match wins.
THREAD_GROUPS = [
    ("RocksDB background (compaction, flush)", r"rocksdb:"),
    ("JIT compilers", r"CompilerThre"),
    ("garbage collector", r"GC Thread|G1 "),
    ("stream execution (planning, commits)", r"stream execution thread"),
    ("state store maintenance (snapshots)", r"state-store-maintenance"),
]

#: Patterns counted wherever they occur.
ACROSS = [
    ("RocksDB row-count tracking (a get per put and remove)", r"handleMetricsUpdate"),
    ("timer registration (an existence get, two puts)", r"TimerStateImpl\.registerTimer"),
    ("C++ exception unwinding in RocksDB's JNI", r"_Unwind|libgcc_s|KVException|__cxa_"),
    ("LZ4 (changelogs, shuffle)", r"LZ4"),
]

_ATTACH_JAVA = """\
import com.sun.tools.attach.VirtualMachine;
public class Attach {
  public static void main(String[] a) throws Exception {
    VirtualMachine vm = VirtualMachine.attach(a[0]);
    try { vm.loadAgentPath(a[1], a[2]); } finally { vm.detach(); }
  }
}
"""


def library() -> Path:
    """Return async-profiler's agent library, fetched from Maven Central on first use."""
    arch = {"x86_64": "linux-x64", "aarch64": "linux-arm64"}.get(platform.machine())
    if arch is None or sys.platform != "linux":
        raise SystemExit(f"async-profiler {VERSION} is packaged here for Linux x64/arm64 only")
    lib = CACHE / arch / "libasyncProfiler.so"
    if lib.exists():
        return lib
    CACHE.mkdir(parents=True, exist_ok=True)
    jar = CACHE / f"async-profiler-{VERSION}.jar"
    if not jar.exists():
        print(f"fetching {ARTIFACT} from Maven Central ...", file=sys.stderr)
        subprocess.run(
            [
                "mvn",
                "-B",
                "-q",
                "dependency:copy",
                f"-Dartifact={ARTIFACT}",
                f"-DoutputDirectory={CACHE}",
            ],
            check=True,
        )
    with zipfile.ZipFile(jar) as archive:
        archive.extract(f"{arch}/libasyncProfiler.so", CACHE)
    return lib


def attach(pid: int, options: str) -> None:
    """Load the agent into JVM `pid` with `options` (jcmd splits them at commas, Java not)."""
    source = CACHE / "Attach.java"
    CACHE.mkdir(parents=True, exist_ok=True)
    if not source.exists() or source.read_text() != _ATTACH_JAVA:
        source.write_text(_ATTACH_JAVA)
    subprocess.run(["java", str(source), str(pid), str(library()), options], check=True)


def spark_pid() -> int:
    """Return the pid of the one process running Spark's SparkSubmit."""
    found = spark_jvm_pids()
    if len(found) != 1:
        raise SystemExit(f"expected one Spark JVM, found {found or 'none'}: give --pid")
    return found[0]


def profile(pid: int, seconds: float, interval_ms: float, out: Path) -> None:
    """Sample JVM `pid`'s CPU for `seconds`, then write its stacks to `out` (collapsed)."""
    attach(pid, f"start,event=cpu,interval={int(interval_ms * 1e6)},threads")
    time.sleep(seconds)
    attach(pid, f"stop,file={out.resolve()},collapsed,threads")


def _first(patterns: list[tuple[str, str]], text: str) -> str | None:
    return next((name for name, pattern in patterns if re.search(pattern, text)), None)


def summarize(collapsed: Path) -> str:
    """Return the summary of a collapsed-stacks file, as markdown."""
    steps: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    across: Counter[str] = Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        thread, _, frames = stack.partition(";")
        total += count
        for name, pattern in ACROSS:
            if re.search(pattern, frames):
                across[name] += count
        # A task's samples are known by its stack: the thread's name is read when the
        # profile is dumped, and Spark renames a pooled thread "idle worker" between tasks.
        if TASK_FRAME in frames:
            steps[_first(TASK_STEPS, frames) or "other task work"] += count
            threads["executor tasks"] += count
        else:
            threads[_first(THREAD_GROUPS, thread) or "other threads"] += count
    if not total:
        return "no samples"
    tasks = threads["executor tasks"]

    def share(n: int, of: int) -> str:
        return f"{100 * n / of:.1f}%" if of else "-"

    lines = [f"{total:,} samples", "", "| threads | share of the JVM's CPU |", "|---|---:|"]
    lines += [f"| {name} | {share(n, total)} |" for name, n in threads.most_common()]
    lines += ["", "| executor-task step | share of task CPU | of the JVM's |", "|---|---:|---:|"]
    lines += [
        f"| {name} | {share(n, tasks)} | {share(n, total)} |" for name, n in steps.most_common()
    ]
    lines += ["", "| across steps | share of the JVM's CPU |", "|---|---:|"]
    lines += [f"| {name} | {share(across[name], total)} |" for name, _ in ACROSS]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pid", type=int, help="the JVM (default: the one running SparkSubmit)")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to sample")
    parser.add_argument("--interval-ms", type=float, default=5.0, help="CPU time per sample")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("spark.collapsed"),
        help="where the raw stacks go (collapsed format)",
    )
    parser.add_argument(
        "--summarize",
        type=Path,
        metavar="FILE",
        help="only summarize a collapsed file written before",
    )
    args = parser.parse_args()
    if args.summarize:
        print(summarize(args.summarize))
        return
    pid = args.pid or spark_pid()
    print(f"sampling JVM {pid} for {args.seconds:g} s ...", file=sys.stderr)
    profile(pid, args.seconds, args.interval_ms, args.out)
    print(f"stacks: {args.out}", file=sys.stderr)
    print(summarize(args.out))


if __name__ == "__main__":
    main()
