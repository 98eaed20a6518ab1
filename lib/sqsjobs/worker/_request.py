"""One request of a key, and the one rule that tells a copy of it from another request (docs/jobs.md "Keys").

A key names one logical operation; a *request* is one ask to run it: the
job, its whole arguments, and, for a debounced job's enqueue, the burst token
that enqueue wrote (``enqueue/_debounce.py``). **A delivery is a duplicate only
of the same request**: a redelivery, a duplicate send, a redrive or a re-send
of it. Everything that tells copies apart asks here:

- two deliveries of one key in a batch (``worker/_consumer.py`` ``_follow``):
  a later one follows the first only when it is the same request;
- a claim (``worker/_job_records.py`` ``Claim``): refused, a duplicate, when
  the record says this request completed (``completed_in``: what its
  completion wrote, ``completion``), whatever the record's state; a
  completed key that did not complete it is another request's, and the
  delivery comes back to claim it once re-armed;
- the debounce stage (``enqueue/_debounce_stage.py``): a completed key is
  re-armed for a request it has not completed (``rearms``).

For most jobs the record's fingerprint already holds the rule: another call
on a key is a ``key_conflict``, so a completed key completed this request. A
debounced job's requests differ by design (the last enqueue's arguments win),
so its record remembers which ones completed, written by the completion
itself (a claim is no completion: a burst whose run was dead-lettered, then
another request of the key completed, is still to run, found by tests/model):
``completed_token``, the burst that last completed (bursts are ordered: only
the key's latest token may run), and ``ran_requests``, the requests without a
token that completed (a group's member, a chain's step, a callback: each runs
undebounced, once), as numbers of a number set. So a later request of a
debounced key is never swallowed by an earlier one, whatever batch they
share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqsjobs._job import args_digest
from sqsjobs.store._item import LeaseState

if TYPE_CHECKING:
    from sqsjobs.store._lease import LeaseItem
    from sqsjobs.worker._delivery import Delivery

#: the record's number set of the requests without a token that completed (a debounced key)
RAN_REQUESTS = "ran_requests"
#: the record's token of the burst that last completed (a debounced key)
COMPLETED_TOKEN = "completed_token"
#: hex digits of the arguments' digest a request's number keeps: 52 bits, exact in any JSON or DynamoDB number
NUMBER_DIGITS = 13


@dataclass(frozen=True, kw_only=True)
class Request:
    """What names one request: the job, a digest of its whole arguments, and its burst token.

    Example:
        >>> a = Request(job="reindex", args="ab" * 16, token="t1", coalesces=True)
        >>> a == Request(job="reindex", args="ab" * 16, token="t1", coalesces=True)  # a copy
        True
        >>> a == Request(job="reindex", args="ab" * 16, token="t2", coalesces=True)  # a later enqueue
        False
    """

    job: str
    #: ``args_digest`` of the job and its whole arguments (a debounced job's fingerprint leaves them out)
    args: str
    #: a debounced enqueue's burst token (None: a member, a step, a callback, any other job's delivery)
    token: str | None = None
    #: the job's requests of one key may differ (debounce): the record says which completed
    coalesces: bool = False

    @classmethod
    def of(cls, d: Delivery) -> Request | None:
        """The request ``d`` carries (None until it is decoded)."""
        if d.job is None or d.args is None:
            return None
        coalesces = d.job.options.sets("debounce")  # enqueue/_debounce.py's option
        token = d.envelope.debounce if d.envelope is not None and coalesces else None
        return cls(job=d.job.name, args=args_digest(d.job.name, d.args), token=token, coalesces=coalesces)

    @property
    def number(self) -> int:
        """This request in a record's ``ran_requests``."""
        return int(self.args[:NUMBER_DIGITS], 16)

    def completed_in(self, item: LeaseItem) -> bool:
        """Whether the key's record says this request completed (so a delivery of it is a duplicate).

        For most jobs that is a completed record (the claim compared the fingerprint: a completed key of the
        job is this call's); a debounced job's record remembers its completed requests whatever its state
        now: another request of the key may have run, or failed, since.
        """
        if not self.coalesces:
            return item.state is LeaseState.DONE
        if self.token is not None:
            return bool(item.get(COMPLETED_TOKEN) == self.token)
        return self.number in _numbers(item.get(RAN_REQUESTS))

    def completion(self) -> tuple[dict[str, str], dict[str, int]]:
        """What its completion writes so the record knows it completed: fields to set, and numbers to add to sets.

        Example:
            >>> burst = Request(job="reindex", args="ab" * 16, token="t1", coalesces=True)
            >>> burst.completion()
            ({'completed_token': 't1'}, {})
            >>> Request(job="reindex", args="ab" * 16, coalesces=True).completion()
            ({}, {'ran_requests': 3020060926589626})
        """
        if not self.coalesces:
            return {}, {}
        if self.token is not None:
            return {COMPLETED_TOKEN: self.token}, {}
        return {}, {RAN_REQUESTS: self.number}


def _numbers(value: Any) -> frozenset[int]:
    if not value:
        return frozenset()
    return frozenset(int(n) for n in value)
