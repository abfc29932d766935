"""Operator tools: what the warehouse says about transactions, and operator ops."""

__all__ = ["inventory", "maintenance", "operator_ops"]
