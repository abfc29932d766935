"""How a micro-batch writes: Arrow rows appended to Delta tables once, by the newest writer.

arrow_rows.py       a batch's rows shaped for each table, as Arrow
batch_collect.py    a batch's rows brought into the driver as one Arrow table
delta_writes.py     idempotent Delta appends: the exactly-once half of every write
writer_fence.py     writer epochs: a newer coordinator fences every older one's writes
parallel_writes.py  independent writes of one batch, side by side
batch_gate.py       a stop that lets the batch in flight finish
compactor.py        the output tables' small files folded, off the batch's path
"""

__all__ = ["batch_gate", "compactor", "delta_writes", "writer_fence"]
