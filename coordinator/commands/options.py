"""Options several subcommands share: which configuration file, and overrides of its keys."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click


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
