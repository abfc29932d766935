"""An operator's COMMIT, ROLLBACK or RESUME, sent as an op record to the op topic.

The record carries who (`txcoord.operator`) and why (`txcoord.reason`), and the half's own
producer group, so the coordinator applies it like any op and records it in
`system/op_records` and `system/op_verdicts`: an operator may end a PREPARED, CHECKING or
DISCARDED transaction, and RESUME a DISCARDED one (checked again at once, count reset to 0,
RocketMQ's resumeCheckHalfMessage). Before sending, the command refuses what can only be
ignored (a second decision for a transaction already COMMITTED or ROLLED_BACK, a RESUME of
one that is not DISCARDED), so the operator hears "no" at once instead of reading a verdict.
The coordinator stays the authority: a race with a producer's op is judged by store order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kafka import KafkaProducer
from kafka.errors import KafkaError

from coordinator.core.errors import KafkaUnavailableError, TxcoordError
from coordinator.core.kafka_security import AuthenticationWatch, KafkaSecurity
from coordinator.core.state_machine import applies_in, event_for_op
from coordinator.kafka_clients.options import kafka_python_options
from coordinator.protocol import ingress as fmt
from coordinator.protocol.ingress import op_id_of
from coordinator.protocol.records import op_headers
from delta_tables.lookup import TransactionState

#: Operator op -> the states in which the coordinator would apply it: the state machine's
#: table for the event an operator's op becomes (COMMIT, ROLLBACK: PREPARED, CHECKING or
#: DISCARDED; RESUME: DISCARDED). An op that applies nowhere (UNKNOWN) is no operator's op.
APPLIES_IN: dict[str, tuple[str, ...]] = {
    op: states
    for op in (*fmt.OPS, *fmt.OPERATOR_OPS)
    if (states := tuple(s.name for s in applies_in(event_for_op(op, by_operator=True))))
}
MAX_OPERATOR_LENGTH = fmt.MAX_OPERATOR_LENGTH
MAX_REASON_LENGTH = fmt.MAX_REASON_LENGTH


def either(names: tuple[str, ...]) -> str:
    """Return names as prose: "A", "A or B", "A, B or C"."""
    return " or ".join(filter(None, (", ".join(names[:-1]), names[-1])))


class OperatorOpRefusedError(TxcoordError):
    """The operator's op would change nothing, or is malformed; nothing was sent."""


@dataclass(frozen=True)
class SentOp:
    """An operator op durable in the op topic."""

    op_id: str
    transaction_id: str
    op: str


def refusal(state: TransactionState, op: str, operator: str, reason: str) -> str | None:
    """Return why `op` by `operator` must not be sent for a transaction in `state`, or None."""
    if op not in APPLIES_IN:
        return f"an operator's op is {either(tuple(APPLIES_IN))}, not {op!r}"
    if not operator.strip() or len(operator) > MAX_OPERATOR_LENGTH:
        return f"--operator must be 1-{MAX_OPERATOR_LENGTH} characters"
    if not reason.strip() or len(reason) > MAX_REASON_LENGTH:
        return f"--reason must be 1-{MAX_REASON_LENGTH} characters: say why"
    if state.producer_group is None:
        return f"transaction {state.transaction_id} has no producer group in the tables"
    if state.state not in APPLIES_IN[op]:
        return (
            f"transaction {state.transaction_id} is {state.state}: {op} applies only to a "
            f"{either(APPLIES_IN[op])} transaction"
        )
    return None


def send_operator_op(
    bootstrap_servers: str,
    op_topic: str,
    state: TransactionState,
    op: str,
    *,
    operator: str,
    reason: str,
    security: KafkaSecurity | None = None,
) -> SentOp:
    """Send `op` for the transaction in `state`; return once the broker acknowledged it."""
    problem = refusal(state, op, operator, reason)
    if problem is not None or state.producer_group is None:
        raise OperatorOpRefusedError(problem or "no producer group")
    headers = op_headers(
        state.producer_group,
        op,
        from_check=False,
        born_at_ms=time.time_ns() // 1_000_000,
        operator=operator,
        reason=reason,
    )
    watch = AuthenticationWatch(bootstrap_servers, security)
    try:
        with watch:
            producer = KafkaProducer(
                bootstrap_servers=bootstrap_servers,
                acks="all",
                max_block_ms=15_000,
                request_timeout_ms=15_000,
                **kafka_python_options(security),
            )
    except KafkaError as exc:
        raise KafkaUnavailableError(
            f"cannot reach Kafka at {bootstrap_servers}: {exc}{watch.hint}"
        ) from exc
    try:
        future = producer.send(
            op_topic, key=state.transaction_id.encode(), value=b"", headers=headers
        )
        metadata = future.get(timeout=30)
    except KafkaError as exc:
        raise KafkaUnavailableError(f"the op was not stored in {op_topic}: {exc}") from exc
    finally:
        producer.close(timeout=10)
    return SentOp(op_id_of(metadata.partition, metadata.offset), state.transaction_id, op)
