"""The wire protocol: what producers, the REST ingress and the engine agree on.

No Spark, Delta, Kafka or web-framework import: the SDK, the REST ingress, the engine and the
tests read the same facts from here.

    ingress.py        header names, op kinds (from coordinator/core/state_machine.py's events),
                      id and msg-id formats, limits of the half and op records (contract 5.2)
    names.py          the name rules: topic, producer group, transaction id
    records.py        the half and op records' headers (SDK, REST and operator commands)
    check_record.py   the check topic's record and its one codec (encode / decode)
    check_claim.py    the check topic's other record: "the sending instance answered"
    deliveries.py     what consumers read: the topic tables' names, the delivery notices
"""

__all__ = ["check_claim", "check_record", "deliveries", "ingress", "names", "records"]
