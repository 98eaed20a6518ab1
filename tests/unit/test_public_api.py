"""The public API is exactly ``sqsjobs.__all__``, and the error tree has one root."""

from __future__ import annotations

import inspect

import sqsjobs
from sqsjobs import _errors as errors


def test_all_names_exist_and_are_documented_with_an_example() -> None:
    for name in sqsjobs.__all__:
        obj = getattr(sqsjobs, name)
        doc = inspect.getdoc(obj) or ""
        assert doc, f"{name} has no docstring"
        if not issubclass(obj, BaseException) if isinstance(obj, type) else True:
            assert "Example" in doc or ">>>" in doc, f"{name}'s docstring has no example"


def test_every_error_descends_from_the_root_and_is_drawn_in_the_tree() -> None:
    classes = [obj for _, obj in inspect.getmembers(errors, inspect.isclass)
               if issubclass(obj, Exception) and obj.__module__ in (errors.__name__, "sqsjobs")]
    assert len(classes) >= 10
    for cls in classes:
        assert issubclass(cls, errors.SqsJobsError), cls
        assert cls.__name__ in (errors.__doc__ or ""), f"{cls.__name__} missing from the tree drawing"
        assert (cls.__doc__ or "").startswith("Raised "), f"{cls.__name__} docstring should say when it is raised"
