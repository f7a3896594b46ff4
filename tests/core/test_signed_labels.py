"""text_attn.core.arrays.signed2: an agreement as the pictures label it (the overlay's and the alignment plot's
"τ +0.11"): sign and two decimals, a value that rounds to zero written "0.00" (a small negative one read "-0.00")."""

from __future__ import annotations

import pytest

from text_attn.core.arrays import signed2


@pytest.mark.parametrize(
    "x, want",
    [(0.114, "+0.11"), (-0.114, "-0.11"), (-0.004, "0.00"), (0.004, "0.00"), (0.0, "0.00"), (-0.0, "0.00"),
     (0.005001, "+0.01"), (-1.0, "-1.00"), (1.0, "+1.00")],
)  # fmt: skip
def test_a_signed_label_has_no_negative_zero(x, want):
    assert signed2(x) == want
