"""Producer instance ids bound to the token that names them (issue 61, finding 11).

A check goes first to the producer instance that sent its half (contract 5.3): the half
carries the instance's id (property `txcoord.producer_instance`), and a check poll that names
the same id gets the check at once, before any other poller of the group. The id is the
producer's own word, so two tokens of one group could name the same id, and the second took
the first one's checks. Behind an auth file an id therefore stands for (token, id): the
ingress writes it into the half, and reads it from a poll, as

    <namespace>.<id>        namespace: 12 hex digits of a digest of the token's sha256

(`<namespace>.<sha256 of the id, 51 hex digits>` when that would pass the 64 characters of
PRODUCER_INSTANCE_PATTERN), so the ids of one token are its own: another token naming the same
id names another instance. A client sees the bound form only in the properties of its checks
and messages; it sends and polls with its own id, as before. In open mode (no tokens), and
on the Kafka path, where a group's principal writes the check topic's claims itself, an id
remains what the producer says it is: a hint for routing, not a credential.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from coordinator.protocol import ingress as fmt
from coordinator.rest.auth import Principal

__all__ = ["bound_instance", "bound_properties"]

_INSTANCE = re.compile(fmt.PRODUCER_INSTANCE_PATTERN)
#: The longest instance id (PRODUCER_INSTANCE_PATTERN).
_MAX_LENGTH = 64


def bound_instance(who: Principal, instance: str) -> str:
    """Return the instance id `instance` stands for when `who` names it (itself in open mode).

    Only an id of PRODUCER_INSTANCE_PATTERN is bound: anything else names no instance (the
    coordinator addresses no check to it) and stays as written."""
    if not who.instance_namespace or not _INSTANCE.fullmatch(instance):
        return instance
    bound = f"{who.instance_namespace}.{instance}"
    if len(bound) <= _MAX_LENGTH:
        return bound
    digest = hashlib.sha256(instance.encode()).hexdigest()
    return f"{who.instance_namespace}.{digest[: _MAX_LENGTH - len(who.instance_namespace) - 1]}"


def bound_properties(who: Principal, properties: Mapping[str, str] | None) -> dict[str, str] | None:
    """Return a half's `properties` with its producer instance (if any) bound to `who`."""
    if properties is None or fmt.PRODUCER_INSTANCE_PROPERTY not in properties:
        return None if properties is None else dict(properties)
    instance = properties[fmt.PRODUCER_INSTANCE_PROPERTY]
    return {**properties, fmt.PRODUCER_INSTANCE_PROPERTY: bound_instance(who, instance)}
