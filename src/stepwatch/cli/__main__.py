"""`python -m stepwatch.cli`: the same as the `stepwatch` command."""

from . import main

main()
