"""The pure core: decisions over frozen dataclasses, with no I/O, clock or environment."""
