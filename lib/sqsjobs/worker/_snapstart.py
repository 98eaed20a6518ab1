"""Lambda SnapStart: do the first batch's set-up before the snapshot, and make each restore unique again.

With the template's ``SnapStart=true``, Lambda runs the worker's init once per
published version, snapshots the memory, and resumes every new instance from
that snapshot. ``sqsjobs.prepare_snapstart(app)`` (called by handlers/worker.py)
registers two hooks with the runtime's ``snapshot_restore_py`` module; outside
Lambda's python3.12+ runtimes that module is absent and it does nothing:

- **before the snapshot** (``warm``): build what the first batch would build —
  the botocore session and the SQS and DynamoDB clients (``sqsjobs._clients``),
  the store with its request shapes, the batch processor, the logger — plus
  whatever the app's own client factories build
  (``prepare_snapstart(app, ses_client)``). No AWS call is made: a connection
  opened before the snapshot would be stale after a restore.
- **after each restore** (``reseed``): the snapshot holds the random
  generators' state, so every instance restored from it would draw the same
  backoff jitter. ``reseed`` seeds the app's ``random`` and the ``random``
  module again from the OS. Owner tokens (``uuid.uuid4``) come from
  ``os.urandom`` on every call and need nothing.

The trade-off is in docs/deploy.md, "The bundle and cold starts".
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable
from typing import TYPE_CHECKING

from sqsjobs._calls import check_sync

if TYPE_CHECKING:
    from sqsjobs._app import JobApp


def prepare_snapstart(app: JobApp, *factories: Callable[[], object]) -> bool:
    """With Lambda SnapStart, build ``app``'s clients before the snapshot and reseed ``random`` after each restore.

    Call it once at the top of the worker's handler file, after the app is
    built. ``factories`` are the app's own cached builders (a job's client
    made with ``sqsjobs.client``): each is called before the snapshot too, so
    each must be a plain function (an ``async def`` one would only make a
    coroutine there: it is refused).
    Returns False, having done nothing, where the runtime has no SnapStart
    hooks (outside Lambda, or before python3.12); no AWS call is ever made.

    Example (a stand-in for the Lambda runtime's ``snapshot_restore_py``):
        >>> import random, sys, types
        >>> from sqsjobs import JobApp, prepare_snapstart
        >>> app = JobApp(queue_url="https://sqs.eu-west-1.amazonaws.com/1/jobs", random=random.Random(7))
        >>> prepare_snapstart(app)  # not in Lambda: nothing to register
        False
        >>> hooks = types.ModuleType("snapshot_restore_py")
        >>> hooks.before, hooks.after = [], []
        >>> hooks.register_before_snapshot = lambda fn, *a: hooks.before.append((fn, a))
        >>> hooks.register_after_restore = lambda fn, *a: hooks.after.append((fn, a))
        >>> sys.modules["snapshot_restore_py"] = hooks
        >>> prepare_snapstart(app), [fn.__name__ for fn, _ in hooks.before + hooks.after]
        (True, ['warm', 'reseed'])
        >>> del sys.modules["snapshot_restore_py"]
    """
    for factory in factories:
        check_sync("prepare_snapstart", factory, "it is called before the snapshot, outside any batch")
    try:
        from snapshot_restore_py import register_after_restore, register_before_snapshot
    except ImportError:  # not in Lambda, or a runtime without SnapStart (before python3.12)
        return False
    register_before_snapshot(warm, app, *factories)
    register_after_restore(reseed, app)
    return True


def warm(app: JobApp, *factories: Callable[[], object]) -> None:
    """Build what the first batch would: clients, store, processor, logger, and the app's ``factories``."""
    app.runtime.sqs  # noqa: B018 - building it is the point
    app.runtime.consumer  # noqa: B018 - builds the store (DynamoDB client, table model) and the logger
    for factory in factories:
        factory()


def reseed(app: JobApp) -> None:
    """Seed the app's random source and the ``random`` module from the OS again (after a restore)."""
    seed = getattr(app.runtime.random, "seed", None)
    if callable(seed):
        seed()
    _random.seed()
