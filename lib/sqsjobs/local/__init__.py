"""The local cloud: a SAM template running on a moto server on 127.0.0.1.

moto answers the AWS APIs but runs nothing: it never invokes functions, never
polls queues for Lambda, never evaluates alarms. This package adds those parts
(event source mappings, schedules, timeouts, alarm evaluation) around a moto
server child process, so a developer gets the real SQS + Lambda semantics on a
laptop.

It is developer tooling: no runtime path of ``sqsjobs`` (``JobApp``, the
consumer, the handlers) may import it, and its imports (moto, samtranslator)
are paid only by ``sqsjobs local``, the pytest plugin and the demo.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqsjobs.local.errors import LocalCloudError

if TYPE_CHECKING:
    from sqsjobs.local.cloud import LocalCloud

__all__ = ["LocalCloud", "LocalCloudError"]


def __getattr__(name: str) -> Any:
    # Lazy: function worker children import ``sqsjobs.local.runtime`` and
    # must not pay for boto3 sessions, samtranslator and threads they never use.
    if name == "LocalCloud":
        from sqsjobs.local.cloud import LocalCloud

        return LocalCloud
    raise AttributeError(name)
