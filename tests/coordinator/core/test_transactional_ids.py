"""The engine's transactional ids: one pair per warehouse, and the grants they need."""

from __future__ import annotations

import os
import re

import pytest

from coordinator.core.config import load_config
from coordinator.core.topics import (
    CHECKS_TRANSACTIONAL_PREFIX,
    NOTICES_TRANSACTIONAL_PREFIX,
    engine_grants,
    transactional_id,
)

PREFIXES = (CHECKS_TRANSACTIONAL_PREFIX, NOTICES_TRANSACTIONAL_PREFIX)


@pytest.mark.parametrize("prefix", PREFIXES)
def test_every_coordinator_of_a_warehouse_shares_its_id_and_no_other_warehouse_does(
    prefix: str,
) -> None:
    mine = transactional_id(prefix, "s3a://bucket/txcoord/warehouse")
    assert mine == transactional_id(prefix, "s3a://bucket/txcoord/warehouse/")
    assert mine != transactional_id(prefix, "s3a://bucket/txcoord/warehouse-2")
    assert re.fullmatch(re.escape(prefix) + "[0-9a-f]{16}", mine)


def test_the_checks_and_the_notices_have_ids_of_their_own() -> None:
    checks, notices = (transactional_id(prefix, "/data/warehouse") for prefix in PREFIXES)
    assert checks != notices


def test_a_relative_warehouse_is_named_by_its_absolute_path() -> None:
    relative = load_config(overrides={"warehouse": "some/warehouse"}).warehouse
    assert relative == os.path.abspath("some/warehouse")
    assert transactional_id(CHECKS_TRANSACTIONAL_PREFIX, relative) == transactional_id(
        CHECKS_TRANSACTIONAL_PREFIX, os.path.abspath("some/warehouse")
    )


def test_the_engine_is_granted_write_and_describe_on_both_ids() -> None:
    granted = {(g.principal, g.operation, g.resource, g.name) for g in engine_grants("e", "/w")}
    assert granted == {
        ("e", operation, "TRANSACTIONAL_ID", transactional_id(prefix, "/w"))
        for prefix in PREFIXES
        for operation in ("WRITE", "DESCRIBE")
    }
