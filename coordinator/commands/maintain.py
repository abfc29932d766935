"""`txcoord maintain`: compact and vacuum the warehouse's Delta tables, safely."""

from __future__ import annotations

import os
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from coordinator.admin.maintenance import Maintenance
from coordinator.commands.options import configuration_options
from coordinator.core.config import load_config, parse_overrides
from coordinator.runtime.spark_session import SparkSettings, build_spark_session


@click.command()
@configuration_options("its warehouse and checkpoint folder are used")
@click.option(
    "--warehouse",
    type=click.Path(file_okay=False, path_type=Path),
    help="Root folder of the Delta tables (default: the configuration's).",
)
@click.option(
    "--optimize/--no-optimize",
    default=True,
    show_default=True,
    help="Compact small files (OPTIMIZE).",
)
@click.option(
    "--vacuum/--no-vacuum",
    default=True,
    show_default=True,
    help="Delete files no version within the retention needs (VACUUM).",
)
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")
def maintain(
    *,
    config_file: Path | None,
    overrides: tuple[str, ...],
    warehouse: Path | None,
    optimize: bool,
    vacuum: bool,
    master: str,
) -> None:
    """OPTIMIZE and VACUUM every table of the warehouse without breaking a running stream.

    VACUUM keeps removed files for each table's delta.deletedFileRetentionDuration (Delta's
    default: 7 days). The coordinator's two input tables (system/half_messages,
    system/op_records) are vacuumed only when that retention covers every version the
    coordinator's checkpoint may still read. Safe to run while `txcoord up`
    or the coordinator application runs.
    """
    chosen = {"warehouse": str(warehouse)} if warehouse is not None else {}
    config = load_config(config_file, os.environ, {**chosen, **parse_overrides(list(overrides))})
    console = Console(soft_wrap=True)
    spark = build_spark_session(
        SparkSettings(
            app_name="txcoord-maintain",
            master=master,
            warehouse=config.warehouse,
            driver_memory="2g",
        )
    )
    try:
        report = Table(title=f"maintenance of {config.warehouse}", title_justify="left")
        for column in ("table", "files before", "files after", "vacuumed", "retention", "note"):
            report.add_column(column)
        for done in Maintenance(spark, config).run(optimize, vacuum, progress=console.print):
            report.add_row(
                done.name,
                str(done.files_before),
                str(done.files_after),
                "yes" if done.vacuumed else "no",
                f"{done.retention_hours} h",
                done.note,
            )
        console.print(report)
    finally:
        spark.stop()
