"""A newer coordinator fences every older one, on the warehouse and on Kafka.

writer_fence.py   writer epochs: a newer coordinator fences every older one's Delta writes
kafka_fence.py    check records and notices sent in Kafka transactions a newer one fences
"""

__all__ = ["kafka_fence", "writer_fence"]
