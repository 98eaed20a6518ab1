"""tests/durable needs the durable SDK and its local runner (the [durable] extra, `make venv` installs it).

They need boto3 >= 1.43.114, so the oldest environment (`make check-oldest`: botocore 1.36, sqsjobs' floor)
cannot have them: there, and only there (a botocore without the durable callback API), these modules are
not collected. Anywhere else a missing SDK fails the collection, loudly.
"""

from __future__ import annotations

import importlib.util

import botocore.session


def _botocore_has_the_durable_api() -> bool:
    model = botocore.session.get_session().get_service_model("lambda")
    return "SendDurableExecutionCallbackSuccess" in model.operation_names


collect_ignore_glob = ([] if importlib.util.find_spec("aws_durable_execution_sdk_python_testing") is not None
                       or _botocore_has_the_durable_api() else ["test_*.py"])
