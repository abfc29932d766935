"""The coordinator as a Spark application: `deploy/submit-coordinator` runs this file.

One driver runs the whole engine: it creates the ingress topics and the system tables when
absent, starts the heartbeat ticker and the decision query, and waits.
SIGTERM or SIGINT stops the queries in order, letting the batches in flight finish
(coordinator/stop_signals.py; each micro-batch is idempotent, so even a kill -9 at
any point is safe: the next start replays from the checkpoints).

Exit codes: 0 stopped on request; 2 an error (the message says which); 3 fenced: a newer
coordinator claimed the warehouse (streams/writes/writer_fence.py), so this one stopped without
writing. A supervisor should restart on 2, never on 3 (a restart would fence the newer one).
A supervisor that tells only zero from non-zero (the Spark operator's `OnFailure`) is given
codes it can act on: `--fenced-exit-code 0 --stopped-exit-code 143` makes a fenced driver a
finished run and a drained one (SIGTERM) a failed run to restart (deploy/k8s/).

    deploy/submit-coordinator [--master URL] -- [--config FILE] [--set key=value ...]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from coordinator.core import failpoints
from coordinator.core.config import Config, load_config, parse_overrides
from coordinator.core.errors import TxcoordError, WriterFencedError
from coordinator.core.library_logs import demote_transient_library_errors
from coordinator.program_exit import leave
from coordinator.runtime.engine import Engine
from coordinator.runtime.spark_session import SparkSettings, build_spark_session
from coordinator.stop_signals import StopSignals
from streams.query.decision_query import check_coordinator_state

log = logging.getLogger("txcoord.app")

#: The exit code of a coordinator that stopped because a newer one took over the warehouse.
EXIT_FENCED = 3


def exit_code(text: str) -> int:
    """Return `text` as a process exit code (0-255), or refuse it as argparse does."""
    try:
        code = int(text)
    except ValueError:
        code = -1
    if not 0 <= code <= 255:
        raise argparse.ArgumentTypeError(f"an exit code is a whole number from 0 to 255: {text!r}")
    return code


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Return the application's arguments."""
    parser = argparse.ArgumentParser(
        prog="coordinator/app.py",
        description="Run the decision query until SIGTERM or SIGINT.",
    )
    parser.add_argument("--config", type=Path, help="TOML configuration file (contract 4)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one configuration key, e.g. --set transaction_timeout=10s",
    )
    parser.add_argument(
        "--fenced-exit-code",
        type=exit_code,
        default=EXIT_FENCED,
        metavar="N",
        help="exit code when a newer coordinator took over the warehouse (default 3; 0 for a"
        " supervisor that restarts every non-zero exit, so that it never restarts this one)",
    )
    parser.add_argument(
        "--stopped-exit-code",
        type=exit_code,
        default=0,
        metavar="N",
        help="exit code after a clean stop on SIGTERM or SIGINT (default 0; 143 for a supervisor"
        " that restarts only non-zero exits, so that a drained driver comes back)",
    )
    # Crash tests only (coordinator/core/failpoints.py): freeze at the N-th pass of a failpoint.
    parser.add_argument("--failpoint", action="append", default=[], help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def run(config: Config, signals: StopSignals) -> None:
    """Run the engine until SIGTERM or SIGINT asks it to stop, or a query fails."""
    # A checkpoint this configuration cannot resume is refused before Spark starts.
    check_coordinator_state(config)
    spark = build_spark_session(
        SparkSettings(
            app_name="txcoord-coordinator",
            master=None,  # whatever spark-submit was given
            warehouse=config.warehouse,
            shuffle_partitions=config.spark.shuffle_partitions,
            use_cached_jars=False,  # spark-submit --jars
            cancel_jobs_on_sigint=False,  # the engine stops the streams in order
        )
    )
    engine = Engine(spark, config)
    try:
        engine.start()
        where = f"; metrics at {engine.metrics_url}" if engine.metrics_url else ""
        print(f"txcoord coordinator running{where}", flush=True)
        while not signals.requested.wait(1.0):
            if (fenced := engine.fenced()) is not None:
                raise fenced
            if problems := engine.problems():
                raise TxcoordError("; ".join(problems))
    finally:
        engine.stop(signals.hurry)


def main(argv: list[str] | None = None) -> int:
    """Entry point under spark-submit."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)-5s %(name)s: %(message)s"
    )
    logging.getLogger("kafka").setLevel(logging.WARNING)
    demote_transient_library_errors()
    args = parse_args(sys.argv[1:] if argv is None else argv)
    signals = StopSignals().install()  # a stop request, never an exception mid-call
    try:
        failpoints.arm(",".join(args.failpoint))
        config = load_config(args.config, os.environ, parse_overrides(args.set))
        run(config, signals)
    except WriterFencedError as exc:  # not a failure to retry: someone else writes now
        print(f"error: {exc}", file=sys.stderr)
        return int(args.fenced_exit_code)
    except TxcoordError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("txcoord coordinator stopped cleanly", flush=True)
    return int(args.stopped_exit_code)


if __name__ == "__main__":
    leave(main())  # coordinator/program_exit.py: why not sys.exit
