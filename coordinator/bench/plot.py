"""The run's PNG: decisions per second over time, latency percentiles, batch time vs pending.

matplotlib is imported here only (report.py skips the plot when it is missing), with the
non-interactive Agg backend: the benchmark runs headless.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def _rates(series: list[list[float]], bucket: float = 2.0) -> tuple[list[float], list[float]]:
    """Return (time, decisions per second) from (time, sent, decided) rows, per bucket."""
    times, rates = [], []
    last_t, last_n = None, None
    for t, _, n in series:
        if last_t is None:
            last_t, last_n = t, n
            continue
        if t - last_t >= bucket:
            assert last_n is not None
            times.append(t)
            rates.append((n - last_n) / (t - last_t))
            last_t, last_n = t, n
    return times, rates


def plot(result: dict[str, Any], path: Path) -> None:
    """Draw the three panels into `path`."""
    figure, (throughput, latency, pending) = plt.subplots(1, 3, figsize=(16, 4.8))
    for name, numbers in (result.get("paths") or {}).items():
        times, rates = _rates(numbers["series"])
        throughput.plot(times, rates, label=f"{name} path")
    peer = result.get("peer")
    if peer and peer.get("tx_per_s"):
        throughput.axhline(
            peer["tx_per_s"],
            linestyle="--",
            color="grey",
            label=f"peer ({peer['producers']} Kafka tx producers)",
        )
    java = (result.get("java_peer") or {}).get("shapes") or {}
    for (shape, numbers), style in zip(java.items(), ("-.", (0, (1, 3))), strict=False):
        if numbers.get("tx_per_s"):
            throughput.axhline(
                numbers["tx_per_s"],
                linestyle=style,
                color="tab:red",
                label=f"java peer, {shape} ({numbers['records_per_tx']} records/tx)",
            )
    ceiling = result.get("ceiling")
    if ceiling and ceiling.get("tx_per_s_equivalent"):
        throughput.axhline(
            ceiling["tx_per_s_equivalent"],
            linestyle=":",
            color="black",
            label="ceiling (Kafka→Delta records/s ÷ 2)",
        )
    throughput.set(
        title="decisions per second (2 s buckets)",
        xlabel="s since first send",
        ylabel="transactions / s",
    )
    throughput.legend(fontsize="small")

    labels, groups = [], []
    for name, numbers in (result.get("paths") or {}).items():
        labels.append(f"{name}: commit")
        groups.append(numbers["commit_to_visible_ms"])
        labels.append(f"{name}: checked")
        groups.append(numbers["checked_commit_to_visible_ms"])
    if peer:
        labels.append("peer")
        groups.append(peer["visible_latency_ms"])
    width = 0.27
    for offset, key in enumerate(("p50", "p95", "p99")):
        values = [g[key] or 0 for g in groups]
        latency.bar(
            [i + (offset - 1) * width for i in range(len(groups))], values, width, label=key
        )
    latency.set_xticks(range(len(labels)), labels, rotation=20, fontsize="small")
    latency.set_yscale("log")
    latency.set(title="commit → visible (ms, log scale)", ylabel="ms")
    latency.legend(fontsize="small")

    levels = (result.get("pending") or {}).get("levels") or []
    if levels:
        xs = [max(level["pending"], 1) for level in levels]
        for key in ("p50", "p95", "max"):
            pending.plot(
                xs,
                [level["coordinator_batch_ms"][key] for level in levels],
                marker="o",
                label=f"coordinator batch {key}",
            )
        pending.set_xscale("log")
        pending.legend(fontsize="small")
    pending.set(
        title="batch time vs unresolved transactions",
        xlabel="pending (0 plotted at 1)",
        ylabel="ms",
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
