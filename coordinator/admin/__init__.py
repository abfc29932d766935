"""Operator tools: what the warehouse says about transactions, operator ops, and consumer
groups (consumer_groups.py: members, lag, offset resets)."""

__all__ = ["consumer_groups", "inventory", "maintenance", "operator_ops"]
