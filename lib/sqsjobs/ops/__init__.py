"""The operator's side: status, redrive, DLQ letters, reading metrics (never on the worker's import path).

Its public name is the redrive function's handler, ``redrive_handler`` (handlers/redrive.py); the rest is
reached through the CLI and the console. It lives here, not in ``sqsjobs.__all__``, so that nothing the
worker imports leads to the operator's modules (tests/unit/test_handler_imports.py).
"""

from sqsjobs.ops._redrive_function import redrive_handler

__all__ = ["redrive_handler"]
