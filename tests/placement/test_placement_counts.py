"""The strict count parser: only what the Job webhook writes (`str(n)`, 1 <= n <= maximum) is a count."""

from __future__ import annotations

import pytest

from placement.counts import MAX_INDEXED_JOB_SIZE, InvalidCount, parse_count


@pytest.mark.parametrize(
    ("text", "maximum", "expected"),
    [("1", 8, 1), ("8", 8, 8), ("42", 100, 42), ("100000", MAX_INDEXED_JOB_SIZE, 100_000)],
)
def test_counts_the_webhook_writes_are_read(text: str, maximum: int, expected: int) -> None:
    assert parse_count(text, maximum) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("0", "leading zero"),
        ("007", "leading zero"),
        ("-3", "not a decimal number"),
        ("+3", "not a decimal number"),
        (" 3", "not a decimal number"),
        ("3 ", "not a decimal number"),
        ("3\n", "not a decimal number"),
        ("1_000", "not a decimal number"),
        ("3.0", "not a decimal number"),
        ("0x10", "not a decimal number"),
        ("\u00b2", "not a decimal number"),  # SUPERSCRIPT TWO: str.isdigit() is True, int() raises
        ("\u0663", "not a decimal number"),  # ARABIC-INDIC DIGIT THREE: int() would read 3
        ("\uff13", "not a decimal number"),  # FULLWIDTH DIGIT THREE
        ("100001", "more than 100000"),
        ("1000000", "7 characters"),
        ("9" * 5_000, "5000 characters"),  # int() refuses more than 4,300 digits
    ],
)
def test_anything_else_is_refused_with_the_reason(text: str, why: str) -> None:
    with pytest.raises(InvalidCount, match=why):
        parse_count(text, MAX_INDEXED_JOB_SIZE)


def test_the_maximum_is_inclusive_and_exact() -> None:
    assert parse_count("12", 12) == 12
    with pytest.raises(InvalidCount, match="13 is more than 12"):
        parse_count("13", 12)
    with pytest.raises(InvalidCount, match="3 characters"):
        parse_count("100", 12)
