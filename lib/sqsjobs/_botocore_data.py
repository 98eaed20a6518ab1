"""What a client says when this installation's botocore lacks the data to build it: what to keep, where.

Lambda bundles trim ``botocore/data`` (22 MB of service models, a function loads a few).
lib/sqsjobs/scaffold/bundle.py keeps the runtime's services and those a ``botocore-services.txt``
lists, and writes :data:`TRIMMED` beside what it kept: the services and the list, as the project names
it. A client of another service then fails with botocore's ``UnknownServiceError``, and a bundle trimmed
by other means may lack a data file every client reads (``DataNotFoundError`` for ``endpoints``): both
come from deep in a cold start and say nothing of the trim. sqsjobs/_clients.py turns them into a
``ConfigurationError`` built here, one line naming the edit: the list (a bundle of ours), the directory
or file to keep (another trimmed botocore), or the closest service names (a misspelling).
``sqsjobs check`` finds a client the list leaves out before the deploy (sqsjobs/validation/services.py).

Nothing here runs unless a client could not be built.
"""

from __future__ import annotations

import difflib
import json
import os
from typing import TYPE_CHECKING, Any, Final

from sqsjobs._errors import ConfigurationError

if TYPE_CHECKING:
    from botocore.exceptions import DataNotFoundError
    from botocore.session import Session

#: what lib/sqsjobs/scaffold/bundle.py writes at the top of a trimmed botocore/data (its ``TRIMMED``; a test
#: ties the two names)
TRIMMED: Final = "sqsjobs-trimmed.json"


def unknown_service(service_name: str, owner: Session) -> ConfigurationError:
    """The error for a service the data of ``owner``'s botocore has no model of.

    Example:
        >>> from sqsjobs._clients import session
        >>> str(unknown_service("dynamo-db", session())).split(" has ", 1)[1]
        "no AWS service named 'dynamo-db'; did you mean 'dynamodb' or 'dynamodbstreams'?"
    """
    import botocore

    loader = owner.get_component("data_loader")
    trimmed = _trimmed_by_us(loader.search_paths)
    if trimmed is not None:
        kept, listing = trimmed
        return ConfigurationError(
            f"client({service_name!r}): this Lambda bundle's botocore has the models of {', '.join(kept)} only "
            f"(the others were left out when it was built); add {service_name} to {listing} (one service a line, "
            "the name client() takes) and build again (sam build)")
    if service_name in _endpoint_services(loader):
        return ConfigurationError(
            f"client({service_name!r}): botocore {botocore.__version__} ({os.path.dirname(botocore.__file__)}) has "
            f"no model of {service_name}, though its endpoint data names the service: its botocore/data was "
            f"trimmed (by a bundle or image build that drops service models); keep botocore/data/{service_name}")
    close = difflib.get_close_matches(service_name, list(loader.list_available_services("service-2")), n=3)
    hint = (f"; did you mean {' or '.join(repr(name) for name in close)}?" if close else
            "; client() takes botocore's service names (s3, ses, sqs...)")
    return ConfigurationError(f"botocore {botocore.__version__} has no AWS service named {service_name!r}{hint}")


def missing_data(service_name: str, error: DataNotFoundError) -> ConfigurationError:
    """The error for a data file every client reads (``endpoints``, ``partitions``...) that is not there.

    Example:
        >>> from botocore.exceptions import DataNotFoundError
        >>> error = missing_data("sqs", DataNotFoundError(data_path="endpoints"))
        >>> "cannot read botocore/data/endpoints.json" in str(error)
        True
    """
    path = str(error.kwargs.get("data_path", "?"))
    return ConfigurationError(
        f"client({service_name!r}): botocore cannot read botocore/data/{path}.json, a file every client reads: "
        "its botocore/data was trimmed too far (by a bundle or image build); keep the files at the top of "
        "botocore/data (endpoints.json, partitions.json, sdk-default-configuration.json, _retry.json) with the "
        "service models")


def _trimmed_by_us(search_paths: list[str]) -> tuple[list[str], str] | None:
    """The services kept and the list that chose them, from :data:`TRIMMED` on the loader's search paths."""
    for directory in search_paths:
        try:
            with open(os.path.join(directory, TRIMMED), encoding="utf-8") as marker:
                written: Any = json.load(marker)
            return [str(name) for name in written["kept"]], str(written["listing"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def _endpoint_services(loader: Any) -> set[str]:
    """The services botocore's endpoint data names (its ``endpoints.json``), or none if it cannot be read."""
    try:
        partitions = loader.load_data("endpoints")["partitions"]
        return {name for partition in partitions for name in partition.get("services", {})}
    except Exception:  # a missing or malformed file: the other messages still apply
        return set()
