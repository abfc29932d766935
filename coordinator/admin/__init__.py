"""Operator tools: what the warehouse says about transactions, and operator ops."""
