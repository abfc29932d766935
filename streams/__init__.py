"""Streaming transforms (pure DataFrame -> DataFrame) and their readStream/writeStream edges."""
