"""The decision query: every ingress record in, every decision out, each batch written once.

decision_query.py  the one streaming query: reads the ingress topics, runs the stage,
                   hands each micro-batch to the batch writer
batch_writer.py    its foreachBatch: the stage's rows -> Delta tables, the check topic and
                   the delivery notices, in the order readers rely on
"""

__all__ = ["batch_writer", "decision_query"]
