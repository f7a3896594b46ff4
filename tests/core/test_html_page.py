"""text_attn.core.html_page, the page code the interactive HTML reports share: quantised attention round-trips.
(The reports themselves, made through the real CLIs and driven in a headless browser: tests/cli/test_html_pages.py.)"""

import numpy as np

from text_attn.core.html_page import dequantise, quantise


def test_quantised_attention_round_trips_within_1_255():
    values = np.random.default_rng(0).random((3, 7, 5))
    back = dequantise(quantise(values), values.shape)
    assert back.shape == values.shape and np.abs(back - values).max() <= 1 / 255
    assert dequantise(quantise([[-0.5, 0.0, 1.0, 2.0]])).tolist() == [0.0, 0.0, 1.0, 1.0]  # clipped to [0, 1]
