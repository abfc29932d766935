"""instance_ids.py: a producer instance id stands for (token, id) behind an auth file."""

from __future__ import annotations

import re

from coordinator.protocol import ingress as fmt
from coordinator.rest.auth import OPEN_MODE, Principal, instance_namespace
from coordinator.rest.instance_ids import bound_instance, bound_properties

A = Principal("orders", False, "a", instance_namespace=instance_namespace(b"a" * 32))
B = Principal("orders", False, "b", instance_namespace=instance_namespace(b"b" * 32))


def test_two_tokens_naming_one_id_name_two_instances() -> None:
    assert bound_instance(A, "host-1") == f"{A.instance_namespace}.host-1"
    assert bound_instance(A, "host-1") != bound_instance(B, "host-1")
    assert bound_instance(A, bound_instance(B, "host-1")) != bound_instance(B, "host-1")
    assert len(A.instance_namespace) == 12


def test_a_bound_id_is_an_instance_id_however_long_the_given_one() -> None:
    pattern = re.compile(fmt.PRODUCER_INSTANCE_PATTERN)
    for given in ("x", "y" * 51, "z" * 52, "w" * 64):
        bound = bound_instance(A, given)
        assert pattern.fullmatch(bound), bound
    assert bound_instance(A, "z" * 52) != bound_instance(A, "z" * 53)


def test_open_mode_and_what_is_no_id_stay_as_written() -> None:
    assert bound_instance(OPEN_MODE, "host-1") == "host-1"
    assert bound_instance(A, "not an id") == "not an id"


def test_a_halfs_properties_carry_the_bound_id() -> None:
    key = fmt.PRODUCER_INSTANCE_PROPERTY
    assert bound_properties(A, {"p": "v", key: "h"}) == {"p": "v", key: bound_instance(A, "h")}
    assert bound_properties(A, {"p": "v"}) == {"p": "v"}
    assert bound_properties(A, None) is None
