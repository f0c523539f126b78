"""The local nightly mirror and index server, shared by tests (they live in the package for the demo)."""

from bot.demo.index_server import Fault, IndexServer
from bot.demo.mirror import Mirror, build_mirror, regression_from

__all__ = ["Fault", "IndexServer", "Mirror", "build_mirror", "regression_from"]
