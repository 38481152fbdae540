"""Durations written the way people write them in config: ``90s``, ``30m``, ``1h``, ``2d`` or seconds."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator

__all__ = ["Seconds", "format_duration", "parse_duration", "share_or_duration", "share_reached_at", "whole_unit"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_RX = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])?\s*$")


def parse_duration(value: object) -> float:
    """Seconds in ``value``; raises ValueError with the accepted forms."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or text like 30m, 1h, 2d")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (m := _RX.match(value)):
        seconds = float(m.group(1)) * _UNITS[m.group(2) or "s"]
    else:
        raise ValueError(f"{value!r} is not a duration; write seconds or text like 90s, 30m, 1h, 2d")
    if seconds <= 0:
        raise ValueError("a duration must be positive")
    return seconds


Seconds = Annotated[float, BeforeValidator(parse_duration)]


_WHOLE = ((86400, "day"), (3600, "hour"), (60, "minute"))


def whole_unit(seconds: float) -> tuple[float, str]:
    """A duration in its largest whole unit: ``(count, "day" | "hour" | "minute" | "second")``."""
    for size, name in _WHOLE:
        if seconds >= size and seconds % size == 0:
            return seconds // size, name
    return seconds, "second"


def format_duration(seconds: float) -> str:
    """A duration as config writes it: "1d", "12h", "90s"."""
    count, unit = whole_unit(seconds)
    return f"{count:g}{unit[0]}"


def share_or_duration(value: object) -> float | str:
    """A share of a timeout (``50%``, or a number below 1, kept as given) or a duration (``30m``, in seconds): when
    a hand-on or a failover fires."""
    if isinstance(value, str) and value.strip().endswith("%"):
        share = float(value.strip()[:-1]) / 100
        if not 0 < share < 1:
            raise ValueError(f"{value!r}: a share of the timeout is between 0% and 100%, like 50%")
        return value.strip()
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 1:
        return float(value)
    return parse_duration(value)


def share_reached_at(after: float | str | None, created_at: float, timeout: float) -> float | None:
    """When ``after`` (read by :func:`share_or_duration`) is reached for something created at ``created_at`` that
    lasts ``timeout`` seconds: None when it is None or not before the end."""
    if after is None:
        return None
    if isinstance(after, str):  # "50%"
        delay = timeout * float(after[:-1]) / 100
    elif after < 1:
        delay = timeout * after
    else:
        delay = after
    return created_at + delay if delay < timeout else None
