"""Strict parsing of the counts this project stores as text: a Job's target size, a gang's size.

`parse_count(text, maximum)` accepts only what the Job webhook writes (`str(n)` of a positive int): ASCII
digits, no sign, no space, no leading zero, at most `maximum`. Anything else raises `InvalidCount` with a
message that says why, without ever calling `int()` on it: `str.isdigit()` is true for "²" (which `int()`
refuses) and `int()` refuses more than 4,300 digits, so both used to end in a traceback.

`MAX_INDEXED_JOB_SIZE` is the API server's own bound (`maxParallelismForIndexedJob`, kubernetes
`pkg/apis/batch/validation`): an elastic Indexed Job has completions == parallelism, so no larger target
can ever be valid.
"""

from __future__ import annotations

from typing import Final

MAX_INDEXED_JOB_SIZE: Final = 100_000
_ASCII_DIGITS: Final = frozenset("0123456789")


class InvalidCount(ValueError):
    """The text is not a count this project would have written; the message says why."""


def parse_count(text: str, maximum: int) -> int:
    if not text:
        raise InvalidCount("empty")
    if len(text) > len(str(maximum)):
        raise InvalidCount(f"{len(text)} characters, more than any count up to {maximum} has")
    if not set(text) <= _ASCII_DIGITS:
        raise InvalidCount(f"{text!r} is not a decimal number (ASCII digits 0-9 only)")
    if text[0] == "0":
        raise InvalidCount(f"{text!r} is zero or has a leading zero")
    value = int(text)
    if value > maximum:
        raise InvalidCount(f"{value} is more than {maximum}")
    return value
