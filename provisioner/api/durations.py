"""Durations as Karpenter writes them: Go duration strings (`30s`, `1h30m`, `720h`) or `Never`."""

from __future__ import annotations

import functools
import re
from datetime import timedelta

NEVER = "Never"
_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_WHOLE = re.compile(r"^(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+$")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


class DurationError(ValueError):
    """A string that is not a duration."""


def parse_duration(value: str, *, allow_never: bool = True) -> timedelta | None:
    """`"90m"` -> 1:30:00; `"Never"` -> None (when allowed). Days are written in hours, as in Go."""
    if type(value) is str:
        return _remembered(value, allow_never)
    return _parse(value, allow_never)


def _parse(value: str, allow_never: bool) -> timedelta | None:
    text = str(value).strip()
    if text == NEVER:
        if allow_never:
            return None
        raise DurationError("'Never' is not allowed here; give a duration such as 30s, 15m or 720h")
    if text == "0":
        return timedelta(0)
    if not _WHOLE.match(text):
        allowed = "a duration such as 30s, 15m, 1h30m or 720h" + (", or Never" if allow_never else "")
        raise DurationError(f"{value!r} is not {allowed}")
    seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _PART.findall(text))
    return timedelta(seconds=seconds)


_remembered = functools.lru_cache(maxsize=1024)(_parse)
"""`_parse` of strings, remembered: a few distinct ones (a pool's consolidateAfter, a claim's expireAfter)
are parsed for every node on every pass. A timedelta is immutable; an error is not remembered, so a bad
string raises every time."""


def format_duration(delta: timedelta | None) -> str:
    """The inverse of `parse_duration` for whole seconds: 5400 s -> `1h30m`."""
    if delta is None:
        return NEVER
    total = int(delta.total_seconds())
    if total == 0:
        return "0s"
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    return "".join(f"{n}{u}" for n, u in ((hours, "h"), (minutes, "m"), (seconds, "s")) if n)
