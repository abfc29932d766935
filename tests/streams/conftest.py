"""Fixtures of the stream tests: `make_config` lives in tests/conftest.py (shared)."""

from __future__ import annotations

from tests.conftest import ConfigFactory

__all__ = ["ConfigFactory"]
