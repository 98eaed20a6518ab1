"""In-process moto for your own tests: sqsjobs' batched writes answered as DynamoDB documents, for a block.

Nothing here is needed for the worker to pass tests on stock moto: against
moto's own PartiQL (in-process ``mock_aws``, ``ThreadedMotoServer`` or a
``moto_server`` process) the store's probe finds ``BatchExecuteStatement``
untrusted and writes each job record with its own conditional request, which
moto answers correctly (``sqsjobs.store._statement_trust``). ``moto_partiql()``
adds the batched path back where moto runs in your test's process: a batch's
claims and completions are one call each, as on AWS, so a test can count
calls or exercise the same requests production sends. It follows DynamoDB's
documentation for the statements sqsjobs sends (``sqsjobs.local.moto_partiql``
says where moto differs), and is put back when the block ends: nothing of it
is installed unless a test asks (the package's pytest plugins install
nothing; their ``sqsjobs_moto_partiql`` fixture is this block, for one test).

This module imports moto only when the block starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def moto_partiql() -> Iterator[None]:
    """moto, in this process, answers sqsjobs' ``BatchExecuteStatement`` as DynamoDB documents for the block.

    Example (a test with moto installed)::

        with mock_aws(), moto_partiql():
            ...  # create the table and queues, run the worker: two DynamoDB calls a batch of successes
    """
    from sqsjobs.local import moto_partiql as emulation

    already = emulation.installed()
    emulation.install()
    try:
        yield
    finally:
        if not already:
            emulation.uninstall()
