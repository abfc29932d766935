"""Consumers of committed messages (contract 5.5): RocketMQ's consumer contract, Pythonic names.

A committed message is in its topic table at a dense (queue, offset); a consumer group's
members divide each topic's queues, read them by offset with delta-rs (no Spark), and
store their committed offsets in Kafka. Needs the `consumer` extra (deltalake, pyarrow).
docs/consumers.md tells the whole story.

    simple_consumer.py   SimpleConsumer: receive(max, wait), ack, invisible duration
    push_consumer.py     PushConsumer: a listener called per message (or in queue order)
    message_view.py      MessageView (what is received) and its Receipt
    tag_filter.py        RocketMQ's tag expressions ("*", "TagA || TagB")
    membership.py        the group's live members, from Kafka's group protocol
    allocation.py        which member reads which queue
    offset_store.py      committed offsets per (group, topic, queue), in a compacted topic
    queue_progress.py    one queue's bookkeeping: in flight, acknowledged, committed
    hand_out_limits.py   how much one member may hold unacknowledged (count and bytes)
    queue_reader.py      a queue's rows by offset, and the queues' ends, from Delta
"""

from coordinator.sdk.consumer.message_view import MessageView, Receipt
from coordinator.sdk.consumer.push_consumer import ConsumeResult, MessageListener, PushConsumer
from coordinator.sdk.consumer.simple_consumer import SimpleConsumer
from coordinator.sdk.consumer.tag_filter import TagFilter

__all__ = [
    "ConsumeResult",
    "MessageListener",
    "MessageView",
    "PushConsumer",
    "Receipt",
    "SimpleConsumer",
    "TagFilter",
    "allocation",
    "hand_out_limits",
    "membership",
    "message_view",
    "offset_store",
    "push_consumer",
    "queue_progress",
    "queue_reader",
    "simple_consumer",
    "tag_filter",
]
