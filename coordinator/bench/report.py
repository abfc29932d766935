"""Writes a run's result: the JSON, a short markdown summary, and the PNG (plot.py).

Files, under the output folder, named by the run's start time:

    bench-<stamp>.json   everything measured, with what each number means (`notes`)
    bench-<stamp>.md     the summary: tables of the headline numbers, and the notes
    bench-<stamp>.png    throughput over time, latency percentiles, batch time vs pending
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from coordinator.bench.java_peer import SHAPES
from coordinator.bench.jit import Settling
from coordinator.bench.s3_model import project

log = logging.getLogger(__name__)


def _n(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and digits:
        return f"{value:,.{digits}f}"
    return f"{round(value):,}" if isinstance(value, int | float) else str(value)


def _pcts(summary: dict[str, Any] | None, keys: tuple[str, ...] = ("p50", "p95", "p99")) -> str:
    if not summary or not summary.get("count"):
        return "-"
    return " / ".join(_n(summary[k]) for k in keys)


def _mib(value: int | None) -> str:
    return "-" if not value else f"{value / 1024**2:,.0f} MiB"


def _paths_table(result: dict[str, Any]) -> list[str]:
    lines = [
        "| path | transactions | as expected | wrong | undecided | offered tx/s | "
        "**sustained tx/s** | end-to-end tx/s | commit→visible ms p50 / p95 / p99 | "
        "checked commit→visible ms p50 / p95 / p99 | first check delay ms p50 / p95 / max |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for path, p in (result.get("paths") or {}).items():
        t = p["transactions"]
        lines.append(
            f"| {path} | {_n(t['sent'])} | {_n(t['as_expected'])} | {_n(t['wrong'])} | "
            f"{_n(t['undecided'])} | {_n(p['offered_tx_per_s'], 1)} | "
            f"**{_n(p['sustained_tx_per_s'], 1)}** | {_n(p['end_to_end_tx_per_s'], 1)} | "
            f"{_pcts(p['commit_to_visible_ms'])} | {_pcts(p['checked_commit_to_visible_ms'])} | "
            f"{_pcts(p['check_timeliness_ms']['recorded'], ('p50', 'p95', 'max'))} |"
        )
    return lines


def _client_latency(result: dict[str, Any]) -> list[str]:
    """Return the gRPC path's Java client's own latencies (none for the other paths)."""
    lines = []
    for path, p in (result.get("paths") or {}).items():
        latency = p.get("client_latency_ms")
        if latency:
            lines += [
                "",
                f"{path} path, RocketMQ's Java client ({p.get('senders')} sender threads, one "
                f"transaction each at a time): send() ms p50 / p95 / p99 "
                f"{_pcts(latency['send'])}; commit()/rollback() ms p50 / p95 / p99 "
                f"{_pcts(latency['end'])}.",
            ]
    return lines


#: The rows of the check timeliness table: the first check, the later ones (n >= 2).
_TIMELINESS = (("first", "check_timeliness_ms"), ("later", "later_check_timeliness_ms"))


def _checks_table(result: dict[str, Any]) -> list[str]:
    """Return each path's check timeliness: the first check's, and the later checks'."""
    interval = (result.get("configuration") or {}).get("transaction_check_interval_s")
    due = f"check n-1 + {interval:g} s" if interval is not None else "check n-1 + interval"
    lines = [
        "",
        "Check timeliness: how late a check went out (recorded) and reached the producer "
        f"(received) after it was due: the first at the half + timeout, a later one at {due}.",
        "",
        "| path | check | count | recorded ms p50 / p95 / max | received ms p50 / p95 / max |",
        "|---|---|---:|---:|---:|",
    ]
    keys = ("p50", "p95", "max")
    for path, p in (result.get("paths") or {}).items():
        for name, field in _TIMELINESS:
            timeliness = p.get(field) or {}
            recorded = timeliness.get("recorded") or {}
            lines.append(
                f"| {path} | {name} | {_n(recorded.get('count'))} | {_pcts(recorded, keys)} | "
                f"{_pcts(timeliness.get('received_by_producer'), keys)} |"
            )
    return lines


def _java_peer(java: dict[str, Any]) -> list[str]:
    lines = [
        "",
        f"Java peer: {java['what']}.",
        "",
        "| shape | --transaction-duration-ms | transactions | records per tx | **tx/s** | "
        "records/s | send→ack ms avg / p50 / p95 / p99 / p99.9 / max |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for shape, s in java["shapes"].items():
        latency = " / ".join(
            _n(s["latency_ms"][k], 1) for k in ("avg", "p50", "p95", "p99", "p99_9", "max")
        )
        lines.append(
            f"| {shape} | {s['transaction_duration_ms']} | {_n(s['transactions'])} | "
            f"{_n(s['records_per_tx'], 1)} | **{_n(s['tx_per_s'], 1)}** | "
            f"{_n(s['records_per_s'], 1)} | {latency} |"
        )
    return lines


def _references(result: dict[str, Any]) -> list[str]:
    peer, ceiling, ratios = result.get("peer"), result.get("ceiling"), result.get("ratios") or {}
    java = result.get("java_peer")
    lines = [
        "| reference | what | tx/s | visible latency ms p50 / p95 / p99 |",
        "|---|---|---:|---:|",
    ]
    if peer:
        lines.append(
            f"| peer | {peer['what']} | {_n(peer['tx_per_s'], 1)} | "
            f"{_pcts(peer['visible_latency_ms'])} |"
        )
    if ceiling:
        lines.append(
            f"| ceiling | {ceiling['what']}: {_n(ceiling['rows_per_s_median'])} records/s "
            f"(median of {len(ceiling['repeats'])}) | {_n(ceiling['tx_per_s_equivalent'])} "
            "(records/s ÷ 2) | - |"
        )
    if java:
        lines += _java_peer(java)
    lines += [
        "",
        "| path | ours / peer | ours / ceiling | ours / java short (tx, records) | "
        "ours / java batch (tx, records) |",
        "|---|---:|---:|---:|---:|",
    ]
    for path, r in ratios.items():
        java_cells = " | ".join(
            f"{_n(r.get(f'ours_over_java_{shape}'), 3)}, "
            f"{_n(r.get(f'ours_over_java_{shape}_records'), 3)}"
            for shape in SHAPES
        )
        lines.append(
            f"| {path} | {_n(r['ours_over_peer'], 3)} | {_n(r['ours_over_ceiling'], 3)} | "
            f"{java_cells} |"
        )
    return lines


def _pending(result: dict[str, Any]) -> list[str]:
    pending = result.get("pending")
    if not pending:
        return ["(not measured)"]
    lines = [
        pending["what"] + ".",
        "",
        "| pending | state rows (median) | coordinator batch ms p50 / p95 / max | "
        "steady commit→visible ms p50 / p95 |",
        "|---:|---:|---:|---:|",
    ]
    for level in pending["levels"]:
        lines.append(
            f"| {_n(level['pending'])} | {_n(level['state_rows_median'])} | "
            f"{_pcts(level['coordinator_batch_ms'], ('p50', 'p95', 'max'))} | "
            f"{_pcts(level['commit_to_visible_ms'], ('p50', 'p95'))} |"
        )
    return lines


def _time(result: dict[str, Any]) -> list[str]:
    lines = [
        "| phase | query | batches (with rows) | batch ms p50 / p95 | busy | phase shares |",
        "|---|---|---:|---:|---:|---|",
    ]
    phases = [
        (f"{path} path", p["where_time_went"]) for path, p in (result.get("paths") or {}).items()
    ]
    for key, name in (("resting", "resting engine"), ("idle", "idle engine")):
        if result.get(key):
            phases.insert(0, (name, result[key]["where_time_went"]))
    for phase, where in phases:
        for query, q in where.items():
            shares = ", ".join(
                f"{k} {v:.0%}"
                for k, v in sorted(q["phase_share"].items(), key=lambda kv: -kv[1])
                if v >= 0.01
            )
            lines.append(
                f"| {phase} | {query} | {q['batches']} ({q['batches_with_rows']}) | "
                f"{_pcts(q['duration_ms'], ('p50', 'p95'))} | {q['busy_ms'] / 1000:,.1f} s | "
                f"{shares} |"
            )
    return lines


def _commits(result: dict[str, Any]) -> list[str]:
    commits = result.get("delta_commits")
    if not commits:
        return []
    seconds = commits["engine_seconds"] or 1
    tables = ", ".join(
        f"{table} {n:,} ({n / seconds:.2f}/s)" for table, n in commits["tables"].items()
    )
    return [
        "",
        f"Delta commits over the engine's {seconds:.0f} s (warm-up, idle, both paths): {tables}.",
    ]


def _consume(result: dict[str, Any]) -> list[str]:
    consume = result.get("consume")
    if not consume:
        return []
    return [
        "",
        f"Consumers (coordinator/bench/consume.py): {consume['committed']:,} commits at "
        f"{consume['rate_tx_per_s']:g} tx/s to {consume['topic']}, read by one SimpleConsumer "
        f"process ({consume['consumed']:,} received, {consume['deliveries']:,} deliveries).",
        "",
        "| same transactions | p50 / p95 / p99 ms |",
        "|---|---|",
        f"| commit → visible | {_pcts(consume['commit_to_visible_ms'])} |",
        f"| commit → consumed | {_pcts(consume['commit_to_consumed_ms'])} |",
    ]


def _s3(result: dict[str, Any]) -> list[str]:
    s3 = result.get("s3")
    if not s3:
        return []
    stores = [("local disk", (result.get("paths") or {}).get("kafka"), result.get("delta_commits"))]
    stores.append(("S3 API (moto)", s3["paths"]["kafka"], s3.get("delta_commits")))
    lines = [
        "",
        "## The warehouse on an S3 API (kafka path)",
        "",
        "| warehouse | sustained tx/s | commit→visible ms p50/p95/p99 | batch ms p50/p95 "
        "| Delta commits/s, busiest table |",
        "|---|---|---|---|---|",
    ]
    for name, path, commits in stores:
        if not path:
            continue
        batches = next(iter(path["where_time_went"].values()))["duration_ms"]
        busiest = max((commits or {}).get("tables", {}).values(), default=0)
        seconds = (commits or {}).get("engine_seconds") or 1
        lines.append(
            f"| {name} | {_n(path['sustained_tx_per_s'], 1)} "
            f"| {_pcts(path['commit_to_visible_ms'])} | {_pcts(batches, ('p50', 'p95'))} "
            f"| {busiest / seconds:.2f} |"
        )
    requests = s3.get("requests") or {}
    lines += [
        "",
        f"S3 requests during the path: {requests.get('by_method')} over "
        f"{requests.get('seconds')} s, {requests.get('per_batch')} per coordinator batch.",
    ]
    if model := project(s3):
        lines += [
            "",
            "Model of a real object store (coordinator/bench/s3_model.py; best to worst):",
            "",
            "| ms per request | batch p50 ms | commit→visible p50 ms | sustained tx/s |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {row['request_ms']} | {row['batch_p50_ms'][0]} to {row['batch_p50_ms'][1]} "
            f"| {' to '.join(map(str, row['commit_to_visible_p50_ms'] or []))} "
            f"| {' to '.join(map(str, row['sustained_tx_per_s'] or []))} |"
            for row in model
        ]
    return lines


def _resources(result: dict[str, Any]) -> list[str]:
    resources = result.get("resources") or {}
    phases = resources.get("phases") or {}
    names = sorted({name for phase in phases.values() for name in phase["processes"]})
    lines = [
        "| process | "
        + " | ".join(f"{phase} ({p['seconds']:.0f} s)" for phase, p in phases.items())
        + " | peak RSS |",
        "|---|" + "---:|" * (len(phases) + 1),
    ]
    peaks = resources.get("peak_rss_bytes") or {}
    for name in names:
        cells = []
        for phase in phases.values():
            used = phase["processes"].get(name)
            cells.append(
                f"{used['cpu_seconds']:.1f} s ({used['cores']:.2f} cores)"
                if used and used["cores"] is not None
                else "-"
            )
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {_mib(peaks.get(name))} |")
    for name, peak in peaks.items():
        if name not in names:
            lines.append(f"| {name} | " + " | ".join("-" for _ in phases) + f" | {_mib(peak)} |")
    jit = [phase.get("jit_compile_seconds") for phase in phases.values()]
    if any(seconds is not None for seconds in jit):
        cells = [
            "-" if seconds is None else f"{seconds:.1f} s ({seconds / p['seconds']:.2f} cores)"
            for seconds, p in zip(jit, phases.values(), strict=True)
        ]
        lines.append("| … of spark: JIT compiling | " + " | ".join(cells) + " | - |")
    return lines


def _cpu_per_transaction(result: dict[str, Any]) -> list[str]:
    costs = result.get("cpu_per_transaction") or {}
    if not costs:
        return []
    names = sorted({name for cost in costs.values() for name in cost["by_process"]})
    lines = [
        "",
        "CPU per decided transaction, each path's phase (ms):",
        "",
        "| path | **all processes** | "
        + " | ".join(names)
        + " | Java peer CPU per record (µs) | **in Java peer records** |",
        "|---|" + "---:|" * (len(names) + 3),
    ]
    for path, cost in costs.items():
        cells = [_n(cost["by_process"].get(name), 3) for name in names]
        lines.append(
            f"| {path} | **{_n(cost['ms'], 3)}** | "
            + " | ".join(cells)
            + f" | {_n(cost['java_short_us_per_record'], 1)} | "
            f"**{_n(cost['in_java_records'], 2)}** |"
        )
    return lines


def _warmup(warmup: dict[str, Any] | None) -> str:
    if not warmup:
        return " No warm-up."
    text = f" Warm-up: {warmup['transactions']:,} transactions in {warmup['seconds']:g} s"
    settled = warmup.get("jit_settled")
    if settled is None:
        return text + "."
    share = warmup.get("jit_share_at_end")
    state = "had settled" if settled else "had not settled"
    return text + (
        f"; the Spark JVM's JIT compilers {state} ({share:.0%} of the last "
        f"{Settling().window:g} s compiling)."
        if share is not None
        else f"; the Spark JVM's JIT compilers {state}."
    )


def _interval(configuration: dict[str, Any]) -> str:
    interval = configuration.get("transaction_check_interval_s")
    return "" if interval is None else f", transaction_check_interval {interval:g} s"


def markdown(result: dict[str, Any], image: str | None) -> str:
    """Return the summary of `result` as markdown."""
    m, s = result["machine"], result["settings"]
    load = f"{s['duration']:g} s" if s.get("duration") else f"{s['count']:,} transactions"
    lines = [
        f"# txcoord bench, {result['started_at'][:19]}Z",
        "",
        f"{m['cpus']} cores, {m['memory_bytes'] / 1024**3:.0f} GiB, {m['platform']}; "
        f"load average {m['load_average_at_start']} → {m.get('load_average_at_end')}. "
        f"Load per path: {load}, mix `{s['mix']}`, window {s['window']:,}"
        + (f", rate {s['rate']:g} tx/s" if s.get("rate") else ", as fast as it goes")
        + f". transaction_timeout {result['configuration']['transaction_timeout_s']:g} s"
        + _interval(result["configuration"])
        + f". Run took {result['wall_seconds']:.0f} s."
        + _warmup(result.get("warmup")),
        "",
    ]
    if image:
        lines += [f"![throughput and latency]({image})", ""]
    lines += [
        "## Throughput and latency",
        "",
        *_paths_table(result),
        *_client_latency(result),
        *_checks_table(result),
        *_consume(result),
        "",
        "## References (same machine, same broker)",
        "",
        *_references(result),
        "",
        "## Batch time against pending (unresolved) state",
        "",
        *_pending(result),
        "",
        "## Where the time went",
        "",
        *_time(result),
        *_commits(result),
        *_s3(result),
        "",
        "## CPU and memory",
        "",
        *_resources(result),
        *_cpu_per_transaction(result),
        "",
        "## What the numbers mean",
        "",
    ]
    lines += [f"- {note}" for note in result.get("notes", [])]
    return "\n".join(lines) + "\n"


def write(result: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    """Write the JSON, the PNG (when matplotlib is installed) and the markdown; return paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = result["started_at"][:19].replace("-", "").replace(":", "")
    base = out_dir / f"bench-{stamp}Z"
    written = {"json": base.with_suffix(".json")}
    written["json"].write_text(json.dumps(result, indent=2) + "\n")
    image: str | None = None
    try:
        from coordinator.bench.plot import plot  # noqa: PLC0415

        plot(result, base.with_suffix(".png"))
        written["png"] = base.with_suffix(".png")
        image = written["png"].name
    except ImportError as exc:
        log.warning("no plot: %s (pip install matplotlib)", exc)
    written["md"] = base.with_suffix(".md")
    written["md"].write_text(markdown(result, image))
    return written
