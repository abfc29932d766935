"""Options several subcommands share: which configuration file, and overrides of its keys;
and, for the operator commands, which warehouse and broker (the local stack's by default)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from coordinator.core.config import Config, load_config, parse_overrides
from coordinator.runtime.local_stack.kafka_broker import pid_is_our_broker, read_info


def configuration_options(uses: str) -> Callable[[Any], Any]:
    """Add `--config FILE` (help: what of it the command `uses`) and repeatable `--set`."""

    def decorate(command: Any) -> Any:
        command = click.option(
            "--set",
            "overrides",
            multiple=True,
            metavar="KEY=VALUE",
            help="Override one configuration key (repeatable).",
        )(command)
        return click.option(
            "--config",
            "config_file",
            type=click.Path(dir_okay=False, exists=True, path_type=Path),
            help=f"TOML configuration file ({uses}).",
        )(command)

    return decorate


def where_options(kafka_help: str) -> Callable[[Any], Any]:
    """Add the options that say which configuration, warehouse and broker an operator command
    uses (`kafka_help`: what it does with the broker); see `local_config`."""

    def decorate(command: Any) -> Any:
        options = [
            click.option(
                "--config",
                "config_file",
                type=click.Path(dir_okay=False, exists=True, path_type=Path),
                help="TOML configuration file (see deploy/txcoord.example.toml).",
            ),
            click.option(
                "--set",
                "overrides",
                multiple=True,
                metavar="KEY=VALUE",
                help="Override one configuration key (repeatable).",
            ),
            click.option(
                "--warehouse",
                type=click.Path(file_okay=False, path_type=Path),
                help="Root folder of the Delta tables (default: the configuration's).",
            ),
            click.option("--bootstrap-servers", help=kafka_help),
            click.option(
                "--state-dir",
                type=click.Path(file_okay=False, path_type=Path),
                default=Path("var"),
                show_default=True,
                help="The state folder of `txcoord up` (to find its broker).",
            ),
        ]
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def local_config(
    config_file: Path | None,
    overrides: tuple[str, ...],
    warehouse: Path | None,
    bootstrap_servers: str | None,
    state_dir: Path,
) -> Config:
    """Return the configuration of `where_options`: the file, the environment and the `--set`s,
    with `--warehouse`, and the broker `--bootstrap-servers` names, else the one `txcoord up`
    runs from `state_dir` (its port is recorded there), else the configuration's."""
    chosen = {"warehouse": str(warehouse)} if warehouse is not None else {}
    config: Config = load_config(
        config_file, os.environ, {**chosen, **parse_overrides(list(overrides))}
    )
    if bootstrap_servers is None:
        data_dir = (state_dir / "kafka").resolve()
        info = read_info(data_dir)
        if info is not None and info.pid and pid_is_our_broker(info.pid, data_dir):
            bootstrap_servers = info.bootstrap_servers
    if bootstrap_servers is None:
        return config
    return replace(config, kafka=replace(config.kafka, bootstrap_servers=bootstrap_servers))
