"""``python -m stepwatch.server``: the collector as containers and scripts start it, with the
options of ``stepwatch server``."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    """Serve until SIGINT/SIGTERM; a mistake is one line and exit status 1."""
    from ..cli import main as stepwatch

    args = sys.argv[1:] if argv is None else list(argv)
    stepwatch.main(["server", *args], prog_name="stepwatch")


if __name__ == "__main__":
    main()
