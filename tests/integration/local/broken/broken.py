"""A handler module that fails at import, as a typo in a dependency would."""

import this_module_does_not_exist  # noqa: F401


def handler(event, context):  # type: ignore[no-untyped-def]
    return None
