"""Receipts handed to REST consumers: opaque, signed, bound to one member of one group.

A REST client acknowledges a message by sending back the `receipt` string it came with. The
SDK's Receipt (topic, queue, offset, lease) is enough for a Python caller holding its own
consumer; over HTTP it would let a client name any offset of any queue, and ack messages
handed to someone else, or never handed out at all. So the string also carries who it was
issued to (group, member, and the member's incarnation: a member closed and made anew under
the same name does not honour the old one's receipts) and which delivery of the message it
came with (RocketMQ makes a new receipt handle at every delivery: the receipt of attempt 1
does not settle attempt 2), and ends with an HMAC-SHA256 of all of it under a key of this
process only::

    r2.<base64url(JSON [group, member, incarnation, topic, queue_id, queue_offset, lease,
                        attempt])>.<mac>

A receipt another process issued (or this one before a restart) does not verify: the member
it names is gone with that process anyway, and its message is delivered again. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

from coordinator.sdk.consumer import Receipt

__all__ = ["MAX_RECEIPT_LENGTH", "IssuedReceipt", "ReceiptCodec"]

#: r1 (no attempt) was signed with the key of a process gone since: no receipt to read.
_VERSION = "r2"
#: Bytes of the HMAC kept: 128 bits make a forgery hopeless, and receipts stay short.
_MAC_BYTES = 16
#: The longest receipt this codec makes (255-character group and member, 127-character topic,
#: every character escaped by JSON at worst): longer strings are refused unread.
MAX_RECEIPT_LENGTH = 4096


@dataclass(frozen=True)
class IssuedReceipt:
    """What a verified receipt says: to whom it was issued, and the SDK's receipt."""

    group: str
    member: str
    incarnation: str
    receipt: Receipt


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class ReceiptCodec:
    """Make and verify receipt strings with one secret key (random per process by default)."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else secrets.token_bytes(32)

    def encode(self, group: str, member: str, incarnation: str, receipt: Receipt) -> str:
        """Return the receipt string of `receipt`, issued to `member` of `group`."""
        fields = [
            group,
            member,
            incarnation,
            receipt.topic,
            receipt.queue_id,
            receipt.queue_offset,
            receipt.lease,
            receipt.attempt,
        ]
        payload = _b64(json.dumps(fields, separators=(",", ":")).encode())
        return f"{_VERSION}.{payload}.{_b64(self._mac(payload))}"

    def decode(self, text: str) -> IssuedReceipt | None:
        """Return what `text` says if this codec made it unaltered, else None."""
        if len(text) > MAX_RECEIPT_LENGTH:
            return None
        parts = text.split(".")
        if len(parts) != 3 or parts[0] != _VERSION:
            return None
        _, payload, mac = parts
        try:
            presented = _unb64(mac)
            if not hmac.compare_digest(presented, self._mac(payload)):
                return None
            fields = json.loads(_unb64(payload))
        except (binascii.Error, ValueError):  # ValueError: bad base64 text, bad JSON
            return None
        # Signed by this codec, so well formed; checked anyway (a key shared by mistake).
        if not (isinstance(fields, list) and len(fields) == 8):
            return None
        group, member, incarnation, topic, queue_id, offset, lease, attempt = fields
        if not all(isinstance(s, str) for s in (group, member, incarnation, topic)):
            return None
        if not all(type(n) is int for n in (queue_id, offset, lease, attempt)):
            return None
        receipt = Receipt(topic, queue_id, offset, lease, attempt)
        return IssuedReceipt(group, member, incarnation, receipt)

    def _mac(self, payload: str) -> bytes:
        digest = hmac.new(self._key, f"{_VERSION}.{payload}".encode(), hashlib.sha256).digest()
        return digest[:_MAC_BYTES]
