"""Helpers for strictly typed tests: narrowing an optional value the test expects to be there."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def present(value: T | None) -> T:
    """`value`, failing the test (as an AttributeError on None would) when it is None."""
    assert value is not None, "expected a value, got None"
    return value
