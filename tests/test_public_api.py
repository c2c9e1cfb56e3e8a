"""The public surface: `__all__` is sorted, complete, and every name has a docstring."""

from __future__ import annotations

import inspect

import autorecap


def _isort_key(name: str) -> tuple[int, str]:
    # ruff's RUF022 order: CONSTANTS, then Classes, then everything else, each alphabetical.
    kind = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return kind, name


def test_all_is_sorted_and_exported() -> None:
    assert autorecap.__all__ == sorted(autorecap.__all__, key=_isort_key)
    assert len(set(autorecap.__all__)) == len(autorecap.__all__)
    for name in autorecap.__all__:
        assert hasattr(autorecap, name), name


def test_every_public_module_level_name_is_in_all() -> None:
    public = {
        name
        for name, value in vars(autorecap).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert public == set(autorecap.__all__) - {"__version__"}


def test_public_callables_are_documented() -> None:
    for name in autorecap.__all__:
        value = getattr(autorecap, name)
        if callable(value):
            assert inspect.getdoc(value), f"{name} has no docstring"
