"""torch-bisect-bot: bisect PyTorch nightlies to the build that broke a reproducer."""

__version__ = "0.1.0"
