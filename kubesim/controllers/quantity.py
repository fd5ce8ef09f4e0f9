"""Kubernetes resource quantities ("500m", "1.5", "64Gi", "1e3") as integers the scheduler can add."""

from __future__ import annotations

import math
import re
from fractions import Fraction

_QUANTITY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$"
)
_SUFFIX = {
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}


def parse_quantity(text: str | int | float) -> Fraction:
    """Exact value of a quantity; raises ValueError with the offending text when it is malformed."""
    if isinstance(text, int | float):
        return Fraction(text)
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise ValueError(f"quantities must match the regular expression '{_QUANTITY.pattern}': {text!r}")
    number, exponent, suffix = match.groups()
    value = Fraction(number)
    if exponent:
        value *= Fraction(10) ** int(exponent[1:])
    if suffix:
        value *= _SUFFIX[suffix]
    return value


def milli_value(text: str | int | float) -> int:
    """Rounded up to whole thousandths (cpu in millicores)."""
    return math.ceil(parse_quantity(text) * 1000)


def int_value(text: str | int | float) -> int:
    """Rounded up to a whole unit (bytes, GPUs, pods)."""
    return math.ceil(parse_quantity(text))
