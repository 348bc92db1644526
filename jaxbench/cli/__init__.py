"""The command line: ``app`` (the ``jaxbench`` command) and one thin module per command.

Each command module parses its options, calls a library function, and prints; none imports
another (``tests/test_layers.py``). What they share lives in :mod:`jaxbench.cli.options`.
"""

from jaxbench.cli.app import app, main

__all__ = ["app", "main"]
