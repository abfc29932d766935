"""The Kafka ingress record format (SPEC 5.2), shared by the ingest stream and the producers.

Half messages go to the half topic (default `txcoord.half`), op records to the op topic
(default `txcoord.op`). Both topics use LogAppendTime: the broker's clock, not the
producer's, is a record's store time.

Half message record
    key       transaction id (UTF-8, 1-128 printable characters)
    value     the message body (any bytes, at most max_message_size)
    headers   txcoord.producer_group   required  [%|A-Za-z0-9_-]{1,255}
              txcoord.topic            required  the real topic, RocketMQ's topic rule
              txcoord.queue_id         optional  decimal 0..1023; default crc32(id) % queues
              txcoord.msg_id           optional  default: msg_id_of(partition, offset) of the record
              txcoord.keys             optional  JSON array of strings
              txcoord.tags             optional  UTF-8
              txcoord.check_immunity_seconds optional decimal seconds; invalid -> the timeout
              txcoord.born_at          optional  producer's clock, epoch milliseconds (recorded)
              prop.<name>              optional  one user property each, UTF-8 values

Op record
    key       transaction id
    value     empty (ignored)
    headers   txcoord.producer_group   required
              txcoord.op               required  COMMIT | ROLLBACK | UNKNOWN | RESUME (operator)
              txcoord.from_check       optional  true | false (an answer to a check request)
              txcoord.operator         optional  who, for an operator's op (admin path only)
              txcoord.reason           optional  why, for an operator's op
              txcoord.born_at          optional

Heartbeat (either topic): header `txcoord.kind: TICK`, no key, empty value. Written by the
ingest's ticker to every partition, so event time moves even when no producer writes.

A header that appears twice, a missing required header, or a value that fails its rule
sends the record to `system/quarantine` with the reason; nothing else is written for it.
"""

from __future__ import annotations

PRODUCER_GROUP = "txcoord.producer_group"
TOPIC = "txcoord.topic"
QUEUE_ID = "txcoord.queue_id"
MSG_ID = "txcoord.msg_id"
KEYS = "txcoord.keys"
TAGS = "txcoord.tags"
CHECK_IMMUNITY_SECONDS = "txcoord.check_immunity_seconds"
BORN_AT = "txcoord.born_at"
OP = "txcoord.op"
FROM_CHECK = "txcoord.from_check"
OPERATOR = "txcoord.operator"
REASON = "txcoord.reason"
KIND = "txcoord.kind"
PROPERTY_PREFIX = "prop."

KIND_TICK = "TICK"
OPS = ("COMMIT", "ROLLBACK", "UNKNOWN")
#: Ops only an operator may send (header txcoord.operator required): RESUME checks a
#: discarded transaction again with its count reset (RocketMQ's resumeCheckHalfMessage).
OPERATOR_OPS = ("RESUME",)

#: Queue ids a producer may name: RocketMQ topics rarely have more than a few dozen queues.
MAX_QUEUE_ID = 1023
MAX_TRANSACTION_ID_LENGTH = 128
#: RocketMQ's producer group rule (Validators.checkGroup).
GROUP_PATTERN = r"^[%|A-Za-z0-9_-]{1,255}$"
#: Printable, no whitespace other than the space, 1..128 characters.
TRANSACTION_ID_PATTERN = r"^[\x21-\x7e][\x20-\x7e]{0,127}$"


def msg_id_of(partition: int, offset: int) -> str:
    """Return the msg id ingest derives for the half at (partition, offset) of the half topic.

    Uppercase hex, zero padded (4 + 16 digits), like RocketMQ's offset-based msg ids: it is
    stable across replays because it is the record's position.
    """
    return f"{partition:04X}{offset:016X}"


def op_id_of(partition: int, offset: int) -> str:
    """Return the op id of the op record at (partition, offset) of the op topic.

    Fixed width, so op ids sort like positions within a partition (SPEC 3's tie-break).
    """
    return f"op-{partition:04X}-{offset:016X}"
