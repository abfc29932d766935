"""Fixtures of the stream tests: a configuration with topics and folders of the test's own."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from coordinator.config import Config, load_config

ConfigFactory = Callable[..., Config]


@pytest.fixture
def make_config(bootstrap_servers: str, tmp_path: Path) -> ConfigFactory:
    """Return a factory of configurations with uuid-named topics and a private warehouse."""

    def make(**overrides: str) -> Config:
        suffix = uuid.uuid4().hex[:8]
        return load_config(
            overrides={
                "warehouse": str(tmp_path / "warehouse"),
                "kafka.bootstrap_servers": bootstrap_servers,
                "kafka.half_topic": f"half-{suffix}",
                "kafka.op_topic": f"op-{suffix}",
                "kafka.check_topic": f"check-{suffix}",
                "kafka.partitions": "2",
                "streams.checkpoint_dir": str(tmp_path / "checkpoints"),
                **overrides,
            }
        )

    return make
