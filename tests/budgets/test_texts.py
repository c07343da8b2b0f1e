"""How budgets word amounts: one precision a person can read, whatever the
stored numbers' scale."""

from __future__ import annotations

from typing import Any

import pytest

from sagents_django.budgets.texts import describe, money


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("0", "0.00"),
        ("0E-10", "0.00"),
        ("20", "20.00"),
        ("1.005", "1.00"),
        ("0.0100000000", "0.01"),
        ("0.0011000000", "0.0011"),
        ("0.0000004", "<0.0001"),
        ("-0.5", "-0.50"),
        ("not a number", "not a number"),
        (None, "None"),
    ],
)
def test_amounts_are_cents_or_four_decimals_under_a_cent(
    value: Any, shown: str
) -> None:
    assert money(value) == shown


def test_an_exhausted_budget_says_each_amount_at_the_same_precision() -> None:
    text = describe(
        {
            "scope": "user",
            "period": "day",
            "limit": "0",
            "spent": "0E-10",
            "estimate": "0.0000004",
        },
        exhausted=True,
    )

    assert text is not None
    assert "is $0.00 and $0.00 is used" in text
    assert "would need about $<0.0001" in text
