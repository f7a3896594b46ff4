"""Beam search never copies what is constant within a source, and drops a source once its beams have all ended: the
caption decoder's one-row-per-source state (its keys, kept once per source, K query rows per key row) gives exactly
the search of the plain, fully reordered state stepped on every row. (The attention modules' K query rows per key
row: tests/core/test_search_state.py; sources leaving the batch, on a model built to end them at chosen steps:
tests/core/test_decoding.py.)"""

from __future__ import annotations

import pytest
import torch
from helpers.plain_model import Counting, Plain

from captioning.model.decoder import DecoderConfig, ShowAttendTellDecoder
from text_attn.core.decoding import beam_search, search


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_caption_beam_search_with_one_row_per_source_keys_equals_the_fully_reordered_search(attention):
    torch.manual_seed(0)
    cfg = DecoderConfig(vocab_size=30, feature_dim=24, embed_dim=8, hidden_dim=16, attn_dim=8, attention=attention)
    dec = ShowAttendTellDecoder(cfg).eval()
    assert dec.one_row_per_source_state == ("keys",)
    feats = torch.randn(3, 9, 24)
    a = beam_search(dec, dec.init_state(feats), 3, 1, 2, 12, beam_size=4)
    b = beam_search(Plain(dec), dec.init_state(feats), 3, 1, 2, 12, beam_size=4)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.lengths, b.lengths)
    torch.testing.assert_close(a.scores, b.scores)
    torch.testing.assert_close(a.attention, b.attention)
    assert a.tokens.size(1) > 2  # a random decoder does not stop at once: the comparison covers reordering steps


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_images_whose_captions_ended_leave_the_batch_keys_and_all(attention):
    torch.manual_seed(0)
    cfg = DecoderConfig(vocab_size=30, feature_dim=24, embed_dim=8, hidden_dim=16, attn_dim=8, attention=attention)
    dec = ShowAttendTellDecoder(cfg).eval()
    with torch.no_grad():  # the end token likelier, so that these 6 random images end at different steps
        dec.L_o.bias[2] += 1.2
    torch.manual_seed(0)
    feats = torch.randn(6, 9, 24) * 3
    for beam in (4, 1):
        counted = Counting(dec)
        a = search(counted, dec.init_state(feats), 6, 1, 2, 12, beam_size=beam)
        b = search(Plain(dec), dec.init_state(feats), 6, 1, 2, 12, beam_size=beam)
        assert torch.equal(a.tokens, b.tokens) and torch.equal(a.lengths, b.lengths)
        torch.testing.assert_close(a.scores, b.scores)
        torch.testing.assert_close(a.attention, b.attention)
        assert min(counted.rows[1:]) < 6 * beam  # images left the batch before the last one ended
