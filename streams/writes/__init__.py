"""A micro-batch's writes (foreachBatch): the stage's rows -> Delta tables, exactly once.

batch_writer.py     the stage's rows -> Delta tables, the check topic and the notices
delta_writes.py     idempotent Delta appends: the exactly-once half of every write
batch_collect.py    a batch's rows brought into the driver as one Arrow table
arrow_rows.py       those rows shaped for each table
parallel_writes.py  independent writes of one batch, side by side
batch_gate.py       a stop that lets the batch in flight finish
compactor.py        the output tables' small files folded, off the batch's path
"""

__all__ = ["batch_gate", "batch_writer", "compactor", "delta_writes"]
