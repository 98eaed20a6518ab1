"""The operator's side: status, redrive, DLQ letters, reading metrics (never on the worker's import path)."""
