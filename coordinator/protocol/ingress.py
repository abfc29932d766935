"""The Kafka ingress record format (contract 5.2), shared by the ingest stream, REST and the SDK.

Half messages go to the half topic (default `txcoord.half`), op records to the op topic
(default `txcoord.op`), or to the group's own topics `txcoord.half.<group>` and
`txcoord.op.<group>` with `[kafka] topics_per_group` (coordinator/core/topics.py). Ingress
topics use LogAppendTime: the broker's clock, not the producer's, is a record's store time.

Half message record
    key       transaction id (UTF-8, 1-128 printable ASCII characters)
    value     the message body (any bytes, at most max_message_size)
    headers   txcoord.producer_group   required  [A-Za-z0-9_-]{1,255}
              txcoord.topic            required  the real topic, RocketMQ's topic rule
              txcoord.queue_id         optional  0..1023 as JSON writes it (digits, no sign,
                                                 leading zero or space); default
                                                 crc32(id) % queues
              txcoord.keys             optional  JSON array of strings (strings only)
              txcoord.tags             optional  UTF-8
              txcoord.check_immunity_seconds optional  see "Immunity" below
              txcoord.born_at          optional  see "born_at" below
              prop.<name>              optional  one user property each, a UTF-8 value (a
                                                 header without one is refused); the
                                                 name 1-255 characters, no control characters
    Not accepted: txcoord.msg_id. The msg id is always msg_id_of(partition, offset) of the
    record, as the REST ingress reports it; a record that names one is quarantined, so no
    record can claim another message's id (topic rows, REST lookups and the coordinator's
    writer all key on it).

Op record
    key       transaction id
    value     empty (ignored)
    headers   txcoord.producer_group   required
              txcoord.op               required  COMMIT | ROLLBACK | UNKNOWN | RESUME (operator)
              txcoord.from_check       optional  true | false (an answer to a check request)
              txcoord.operator         optional  who, for an operator's op: 1-255 characters
              txcoord.reason           optional  why, for an operator's op: at most 4096
                                                 characters, and only with txcoord.operator
              txcoord.born_at          optional

Heartbeat (either topic): header `txcoord.kind: TICK`, no key, empty value. Written by the
ingest's ticker to every partition, so event time moves even when no producer writes.

Limits, the REST ingress's own (coordinator/rest imports these constants): keys, tags and
properties together take at most HEADER_BUDGET bytes (header names and values); all headers
of a record together at most MAX_HEADER_BYTES.

Names are matched as whole strings: "OrderPaid\\n" is not a topic. The patterns below are
anchored `^...$` for Python's `re.fullmatch` and Rust's regex (pydantic), where `$` is the
end; Java's `$` (Spark's rlike) also matches before a final line terminator, so the ingest
uses `java_full_match(pattern)`, which ends in `\\z`.

Immunity (txcoord.check_immunity_seconds), as the REST ingress: what REST refuses with a 4xx
is quarantined here. The value must be a decimal integer (digits only: no sign, no spaces,
no exponent) of at most max_check_immunity seconds (configuration, default 1 h); anything
else, including a number too large for any integer type, is quarantined with the reason.
0 means none (the timeout applies); a value below transaction_timeout counts as the timeout.

born_at: the producer's clock in epoch milliseconds, recorded only (the store time is the
broker's). Digits only, 0..MAX_BORN_AT_MS (2262-04-11T23:47:16.854Z): a negative value, an
exponent or a later instant is quarantined, because Spark's conversion overflows (a stopped
stream) or the readers of the tables cannot hold it (see MAX_BORN_AT_MS).

A header that appears twice, a missing required header, or a value that fails its rule
sends the record to `system/quarantine` with the reason; nothing else is written for it.
"""

from __future__ import annotations

from collections.abc import Iterable

from coordinator.core.state_machine import OPERATOR_ONLY_OPS, PRODUCER_OPS

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
#: On a check record (and a check claim): the producer instance that sent the half.
PRODUCER_INSTANCE = "txcoord.producer_instance"
PROPERTY_PREFIX = "prop."

KIND_TICK = "TICK"
#: A record of the check topic that is not a check: "instance X answered check N of T"
#: (coordinator/protocol/check_claim.py).
KIND_CHECK_CLAIM = "CHECK_CLAIM"
#: The half's property that names the producer instance which sent it, so that its checks go
#: to that instance first (contract 5.3). The SDK sets it; any producer may.
PRODUCER_INSTANCE_PROPERTY = "txcoord.producer_instance"
#: A producer instance's id: what fits a header and a query string without escaping.
PRODUCER_INSTANCE_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
#: The op kinds a producer sends: the state machine's producer events.
OPS: tuple[str, ...] = tuple(event.value for event in PRODUCER_OPS)
#: Ops only an operator may send (header txcoord.operator required): RESUME checks a
#: discarded transaction again with its count reset (RocketMQ's resumeCheckHalfMessage).
OPERATOR_OPS: tuple[str, ...] = tuple(event.value for event in OPERATOR_ONLY_OPS)

#: Room for headers (group, topic, keys, properties) on top of the body, in the ingress
#: topics' max.message.bytes (streams/kafka_io/ingress_topics.py) and the Kafka transport's
#: requests.
HEADER_ALLOWANCE_BYTES = 256 * 1024
#: Queue ids a producer may name: RocketMQ topics rarely have more than a few dozen queues.
MAX_QUEUE_ID = 1023
#: The longest transaction id a producer may send, in characters.
MAX_TRANSACTION_ID_LENGTH = 128
#: The characters of every name that becomes a table path or a Kafka name (topics, producer
#: and consumer groups, members): RocketMQ's alphabet without '%' and '|'. delta-rs and
#: object_store percent-decode a table's path (a topic "%2e%2e" wrote one folder and read
#: another; "Payment%73" appended into topics/Payments on S3), and neither character is
#: allowed in a Kafka topic. RocketMQ itself uses '%' only in its system names (%RETRY%).
NAME_CHARACTERS = "A-Za-z0-9_-"
#: The same, as a reader is told it.
NAME_CHARACTERS_TEXT = "letters, digits, '_' or '-'"
#: The producer group rule (RocketMQ's Validators.checkGroup, less '%' and '|').
GROUP_PATTERN = rf"^[{NAME_CHARACTERS}]{{1,255}}$"
#: Printable, no whitespace other than the space, 1..MAX_TRANSACTION_ID_LENGTH characters.
TRANSACTION_ID_PATTERN = rf"^[\x21-\x7e][\x20-\x7e]{{0,{MAX_TRANSACTION_ID_LENGTH - 1}}}$"
#: Property names become header keys `prop.<name>`: 1..255 characters, no control characters
#: (RocketMQ itself separates properties with \x01 and \x02).
PROPERTY_NAME_PATTERN = r"^[^\x00-\x1f\x7f]{1,255}$"
#: Keys, tags and properties together (header names and values, in bytes): RocketMQ keeps
#: a message's properties behind a 2-byte length (MessageDecoder, Short.MAX_VALUE).
HEADER_BUDGET = 32767
#: Every header of a record together (names and values, in bytes): the header budget plus
#: room for the fixed headers, and well inside the topics' HEADER_ALLOWANCE_BYTES.
MAX_HEADER_BYTES = 64 * 1024
#: An operator's name and reason, in characters.
MAX_OPERATOR_LENGTH = 255
MAX_REASON_LENGTH = 4096
#: born_at is epoch milliseconds in 0 .. 2262-04-11T23:47:16.854Z, the last millisecond a
#: 64-bit count of nanoseconds holds: Spark writes timestamps to Parquet as INT96, which
#: pyarrow (deltalake, the operator commands) reads as nanoseconds, so a later instant would
#: come back as garbage or an error (and past year 9999 not even Python's datetime holds it).
MAX_BORN_AT_MS = (2**63 - 1) // 1_000_000


def java_full_match(pattern: str) -> str:
    """Return an anchored `^...$` pattern as a Java regex (Spark's rlike) for the whole string.

    Java's `$`, like Python's, also matches just before a final line terminator, so
    `^[a-z]+$` accepts "abc\\n"; `\\z` is the very end of the input. rlike finds a match
    anywhere, so the leading `^` stays.
    """
    if not (pattern.startswith("^") and pattern.endswith("$")):
        raise ValueError(f"not an anchored ^...$ pattern: {pattern!r}")
    return pattern[:-1] + r"\z"


def budgeted_bytes(headers: Iterable[tuple[str, bytes | None]]) -> int:
    """Return the bytes that count against HEADER_BUDGET: keys, tags and prop.* headers."""
    return sum(
        len(name.encode()) + len(value or b"")
        for name, value in headers
        if name in (KEYS, TAGS) or name.startswith(PROPERTY_PREFIX)
    )


def msg_id_of(partition: int, offset: int) -> str:
    """Return the msg id ingest derives for the half at (partition, offset) of the half topic.

    Uppercase hex, zero padded (4 + 16 digits), like RocketMQ's offset-based msg ids: it is
    stable across replays because it is the record's position.
    """
    return f"{partition:04X}{offset:016X}"


def op_id_of(partition: int, offset: int) -> str:
    """Return the op id of the op record at (partition, offset) of the op topic.

    Fixed width, so op ids sort like positions within a partition (contract 3's tie-break).
    """
    return f"op-{partition:04X}-{offset:016X}"
