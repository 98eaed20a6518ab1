"""Lambda entry point for DLQ redrive: the CLI's options in the event, the summary back.

Invoke it with ``aws lambda invoke`` or ``sam remote invoke``, e.g. the event
``{"job": "invoice-email", "error": "TimeoutError", "max": 500}`` or
``{"dry_run": true}``; ``{"native": true}``, ``{"status": true}`` and
``{"cancel": true}`` drive SQS's own move task. ``SQSJOBS_DLQ_URL``,
``SQSJOBS_QUEUE_URL`` and ``SQSJOBS_TABLE`` come from the template; the clients
are built on the first invocation. The run stops before the function's timeout
and reports what is left; invoke it again to continue.
"""

from sqsjobs.ops import redrive_handler

handler = redrive_handler()
