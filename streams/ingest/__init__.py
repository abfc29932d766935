"""Ingress records in: parsed, classified, and landed as they came.

transforms.py        Kafka ingress records -> halves, ops, quarantine (pure transforms)
rules.py             what the JVM's ingest rules (txcoord.Ingress) are given
topic_admission.py   the new topics halves may bring in (max_topics, per group)
land_rows.py         LAND rows: the batch's raw records, riding with the decisions
landing_query.py     the landing writer: a batch's ingress records -> three Delta tables
landing_coverage.py  which ingress records are landed, recorded in every landing commit
"""

__all__ = ["landing_query"]
