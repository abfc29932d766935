"""The decision query's checkpoint: Spark's own files, in generations.

generations.py       the checkpoint's generations, and what each holds (Spark's own files)
checkpoint_files.py  a checkpoint's small files, local or through Hadoop
"""

__all__ = ["checkpoint_files", "generations"]
