"""The pure core: decisions over frozen dataclasses; no network, subprocess, files, clock or environment."""
