"""Raw Kafka ingress records for property-based tests: random, extreme and near-valid.

Keys, values and headers of every shape the ingest must survive: invalid UTF-8, huge
numbers, empty and oversize fields, repeated headers, names with trailing newlines, and
records one field away from valid (tests/streams/ingest/test_fuzz_ingress.py sends them to the
real broker; tests/streams/ingest/test_ingest_twin.py runs them through both sets of rules).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from coordinator.protocol import ingress as fmt
from tests.harness import TOPIC

MAX_MESSAGE = 64 * 1024
FUZZ_GROUPS = [b"orders", b"g", b"orders\n", b"%|A-z_-", b"", b"x" * 256, b"\xff"]

NUMBERS = [
    b"0",
    b"1",
    b"-1",
    b"3600",
    b"3601",
    b"2147483647",
    b"9223372036854775807",
    b"-9223372036854775808",
    b"99999999999999999999999",
    b"300000000000000",
    b"3e14",
    b"1e999",
    b"NaN",
    b" 5",
    b"5 ",
    b"+5",
    b"0x10",
    b"1.5",
    b"",
    b"\xff\xfe",
    b"253402300800000",
    str(fmt.MAX_BORN_AT_MS).encode(),
    b"1023",
    b"1024",
    b"007",
]
NAMES = [
    fmt.PRODUCER_GROUP,
    fmt.TOPIC,
    fmt.QUEUE_ID,
    fmt.MSG_ID,
    fmt.KEYS,
    fmt.TAGS,
    fmt.CHECK_IMMUNITY_SECONDS,
    fmt.BORN_AT,
    fmt.OP,
    fmt.FROM_CHECK,
    fmt.OPERATOR,
    fmt.REASON,
    fmt.KIND,
    "prop.",
    "prop.a",
    "prop.a\nb",
    "prop." + "p" * 300,
    "x-other",
    "",
    "txcoord.unknown",
]
WORDS = [
    b"COMMIT",
    b"ROLLBACK",
    b"UNKNOWN",
    b"RESUME",
    b"commit",
    b"COMMIT\n",
    b"true",
    b"false",
    b"TICK\n",
    b"HALF",
    b"OrderPaid",
    b"OrderPaid\n",
    b"../x",
    b"system",
    b"RMQ_SYS_X",
    b'["k"]',
    b"[null]",
    b"[[[[[]]]]]",
    b'{"a": 1}',
    b"[" * 500,
    b"ops",
]


def value_bytes() -> st.SearchStrategy[bytes | None]:
    """A header value: numbers, words, groups, any bytes, huge ones, or none at all (Kafka
    allows a header without a value; kafka-python cannot send one, librdkafka can)."""
    big = st.sampled_from([b"v" * fmt.HEADER_BUDGET, b"\x00" * 70_000, b"9" * 5000])
    return st.one_of(
        st.sampled_from(NUMBERS + WORDS + FUZZ_GROUPS),
        st.binary(max_size=40),
        st.text(max_size=40).map(str.encode),
        big,
        st.none(),
    )


def header() -> st.SearchStrategy[tuple[str, bytes | None]]:
    names = st.one_of(st.sampled_from(NAMES), st.text(max_size=20))
    return st.tuples(names, value_bytes())


def near_valid(topic: str) -> st.SearchStrategy[list[tuple[str, bytes | None]]]:
    """The headers of a valid half or op with a few replaced or added."""
    base = (
        [(fmt.PRODUCER_GROUP, b"orders"), (fmt.TOPIC, TOPIC.encode())]
        if topic == "half"
        else [(fmt.PRODUCER_GROUP, b"orders"), (fmt.OP, b"COMMIT")]
    )

    def mutate(
        extra: list[tuple[str, bytes | None]], replace: bool
    ) -> list[tuple[str, bytes | None]]:
        if replace:
            names = {name for name, _ in extra}
            return [h for h in base if h[0] not in names] + extra
        return base + extra

    return st.builds(mutate, st.lists(header(), max_size=3), st.booleans())


#: A body above 1 MiB: past Kafka's default record size, which the ingress topics raise.
LARGE_BODY = (1 << 20) + 1


@st.composite
def raw_record(draw: st.DrawFn, large_bodies: int | None = None) -> dict[str, Any]:
    """A raw record for the half or op topic.

    `large_bodies` is the ingest's max_message_size when it is above 1 MiB: then now and then
    (one record in 16, so that a flood stays a few MiB) a body of 1 MiB + 1, exactly that size,
    or one byte more comes instead.
    """
    topic = draw(st.sampled_from(["half", "op"]))
    headers = draw(st.one_of(st.lists(header(), max_size=12), near_valid(topic)))
    key = draw(
        st.one_of(
            st.none(),
            st.sampled_from([b"fz-1", b"fz-1\n", b"", b"\xff", b"x" * 200]),
            st.binary(max_size=30),
        )
    )
    limit = large_bodies or MAX_MESSAGE
    over = b"b" * (MAX_MESSAGE + 1) if large_bodies is None else b"b" * 65
    value = draw(st.one_of(st.none(), st.binary(max_size=64), st.just(over)))
    if large_bodies is not None and draw(st.integers(0, 15)) == 0:
        value = b"b" * draw(st.sampled_from([LARGE_BODY, limit, limit + 1]))
    # Never exactly a valid heartbeat (see the module docstring).
    headers = [(n, b"TICK\n" if n == fmt.KIND and v == b"TICK" else v) for n, v in headers]
    if key is None and value is None:  # a record with neither is not worth a case
        value = b""
    return {"topic": topic, "key": key, "value": value, "headers": headers}
