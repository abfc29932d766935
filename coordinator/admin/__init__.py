"""Operator tools: what the warehouse says about transactions, operator ops, and consumer
groups (consumer_groups.py: members, lag, offset resets); whether a cluster keeps the shared
topics the engine's alone (shared_topics.py) and each consumer group's offsets topic its own
(offsets_acls.py), for `txcoord provision`."""

__all__ = [
    "consumer_groups",
    "inventory",
    "maintenance",
    "offsets_acls",
    "operator_ops",
    "shared_topics",
]
