"""How ``app.testing()`` finds its test harness without the app importing it.

The harness (``sqsjobs.testing.use``) is a tool: the Lambda bundle leaves it
out, and no runtime module imports a tool (tests/unit/test_tool_imports.py).
It plugs in as pytest's plugins do, through an entry point of the installed
package (pyproject.toml, group ``sqsjobs.harness``): ``app.testing()`` loads
it by name the first time it is called.

Example:
    >>> harness("testing").__module__
    'sqsjobs.testing.tester'
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Final

from sqsjobs._errors import ConfigurationError

#: the entry-point group harnesses are declared in
GROUP: Final = "sqsjobs.harness"

Harness = Callable[..., AbstractContextManager[Any]]


@functools.cache
def harness(name: str) -> Harness:
    """The harness declared as ``name`` in :data:`GROUP`, imported once a process (finding it reads every
    installed distribution's metadata)."""
    return find(name, GROUP)


def find(name: str, group: str) -> Harness:
    """The object entry point ``name`` of ``group`` names; a ``ConfigurationError`` saying why not.

    Example:
        >>> find("testing", "no.such.group")
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: no 'testing' harness in the entry points of group 'no.such.group': install \
sqsjobs (pip install, or pip install -e . in its checkout), or use sqsjobs.testing.use(app)
    """
    from importlib.metadata import entry_points

    for point in entry_points(group=group, name=name):
        try:
            loaded: Harness = point.load()
        except ImportError as missing:  # the Lambda bundle leaves sqsjobs.testing out
            raise ConfigurationError(f"the {name!r} harness ({point.value}) is not installed here: {missing}") \
                from missing
        return loaded
    raise ConfigurationError(f"no {name!r} harness in the entry points of group {group!r}: install sqsjobs (pip "
                             "install, or pip install -e . in its checkout), or use sqsjobs.testing.use(app)")
