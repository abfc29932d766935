"""What a real object store's latency would do to the S3 phase's figures: a model, not a run.

The bench's S3 phase runs against an S3 API on loopback, whose requests take a few
milliseconds; AWS S3 and its peers take 20-100 ms per request (more for a conditional PUT
of a Delta commit). From what the phase measured (its coordinator batches' median duration,
the S3 requests per batch, the commit→visible median and the sustained rate) the model
projects a batch's duration at a per-request latency L between two bounds:

- at best, only the requests one batch must wait for one after another cost L each:
  CRITICAL_REQUESTS, counted from the S3 server's request log of a bench run: the offset log
  entry (s3a: a HEAD, a LIST, the PUT: 3), the state store's changelog (its partitions side by
  side: 3), the chain of Delta appends (topic tables, then `system/transactions`, then
  `system/op_verdicts`: streams/query/batch_writer.py), each a delta-rs commit (list the log,
  read the new commits, PUT the data file, PUT the commit: 4, so 12), and the commit log entry
  (4): 22;
- at worst, every request of the batch costs L in sequence.

A commit waits on average half a batch for the next one to start, then that batch: its
commit→visible grows by 1.5 times the batch's growth. The sustained rate falls with the batch
duration at the same rows per batch (a closed loop fills larger batches, so this is a floor).
"""

from __future__ import annotations

from typing import Any

#: Requests one coordinator batch waits for in sequence (see above).
CRITICAL_REQUESTS = 22
#: Per-request latencies of real object stores the model projects to (ms).
LATENCIES_MS = (20, 50, 100)


def project(s3: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Return, per latency of LATENCIES_MS, the projected batch, commit→visible and rate
    ranges (best, worst) from the bench's S3 phase `s3`; [] without the numbers it needs."""
    path = ((s3 or {}).get("paths") or {}).get("kafka")
    requests = (s3 or {}).get("requests") or {}
    if not path or not requests.get("per_batch"):
        return []
    batches = next(iter(path["where_time_went"].values()))["duration_ms"]
    batch_ms, per_batch = batches["p50"], requests["per_batch"]
    visible_ms = (path.get("commit_to_visible_ms") or {}).get("p50")
    rate = path.get("sustained_tx_per_s")
    rows = []
    for latency in LATENCIES_MS:
        best, worst = batch_ms + CRITICAL_REQUESTS * latency, batch_ms + per_batch * latency
        rows.append(
            {
                "request_ms": latency,
                "batch_p50_ms": [round(best), round(worst)],
                "commit_to_visible_p50_ms": (
                    [round(visible_ms + 1.5 * (d - batch_ms)) for d in (best, worst)]
                    if visible_ms is not None
                    else None
                ),
                "sustained_tx_per_s": (
                    [round(rate * batch_ms / d, 1) for d in (best, worst)] if rate else None
                ),
            }
        )
    return rows
