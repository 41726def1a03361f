"""The `stepwatch` command: one entry point, each subcommand a thin call into its layer.

Imports happen inside the commands so `stepwatch --help` stays fast and a command only loads
what it uses. Each module adds its commands to the group as it is imported.
"""

from . import (  # noqa: F401  (they add the commands)
    _clients,
    _collector,
    _forecast,
    _keys,
    _node,
    _recorded,
    _tokens,
    _trace,
    _tsdb,
)
from ._base import main

__all__ = ["main"]
