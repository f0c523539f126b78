"""Adapters: one module per outside system, each with one narrow method that does the I/O."""
