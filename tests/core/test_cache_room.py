"""The Transformer's self-attention cache grows inside buffers of a few sizes (attention.cache_room), so that a long
search does not leave the allocator a hole one position too small at every step (a 1,000-token paragraph searched
for 1,200 steps grew the process by 2.3 GB for 0.25 GB of cache before)."""

from __future__ import annotations

import torch

from text_attn.core.attention import HeadKV, cache_room
from text_attn.core.decoding import select_rows
from text_attn.translation.transformer import Transformer, TransformerConfig


def _room(x: torch.Tensor) -> int:
    return x.stride(1) // x.size(3)  # the positions of the buffer x is a view of


def test_cache_room_is_the_next_power_of_two_from_16():
    assert [cache_room(n) for n in (1, 16, 17, 32, 33, 1000, 1024, 1025)] == [16, 16, 32, 32, 64, 1024, 1024, 2048]


def test_extend_equals_concatenation_in_a_buffer_of_its_room_and_leaves_the_old_cache_as_it_was():
    torch.manual_seed(0)
    cache = HeadKV(torch.empty(2, 3, 0, 4), torch.empty(2, 3, 0, 4))
    keys, values = [], []
    for t in range(40):
        new = HeadKV(torch.randn(2, 3, 1, 4), torch.randn(2, 3, 1, 4))
        keys.append(new.k)
        values.append(new.v)
        before = cache.k.clone()
        grown = cache.extend(new)
        assert torch.equal(cache.k, before)  # a state stepped twice keeps both results: nothing written in place
        cache = grown
        assert torch.equal(cache.k, torch.cat(keys, dim=2)) and torch.equal(cache.v, torch.cat(values, dim=2))
        if t:  # the first step's cache is the new positions themselves
            assert _room(cache.k) == _room(cache.v) == cache_room(t + 1)


def test_select_rows_keeps_a_grown_caches_room_and_a_memorys_exact_size():
    torch.manual_seed(1)
    cache = HeadKV(torch.randn(3, 2, 5, 4), torch.randn(3, 2, 5, 4)).extend(
        HeadKV(torch.randn(3, 2, 15, 4), torch.randn(3, 2, 15, 4))
    )  # 20 positions in a buffer of 32
    memory = HeadKV(torch.randn(3, 2, 7, 4), torch.randn(3, 2, 7, 4))
    index = torch.tensor([2, 2, 0, 1])
    state = {"self": (cache,), "cross": (memory,), "mask": torch.ones(3, 7, dtype=torch.bool)}
    picked = select_rows(state, index)  # decoding's reorder hands a HeadKV its own
    (k, v), (mk, _) = picked["self"][0], picked["cross"][0]
    assert torch.equal(k, cache.k[index]) and torch.equal(v, cache.v[index]) and torch.equal(mk, memory.k[index])
    assert _room(k) == _room(v) == 32 and mk.is_contiguous() and mk.shape == (4, 2, 7, 4)
    assert picked["mask"].shape == (4, 7)


def test_a_transformer_stepped_past_several_rooms_with_its_rows_reordered_equals_the_whole_prefix_at_once():
    torch.manual_seed(2)
    cfg = TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, num_heads=2, enc_layers=1, dec_layers=2,
                            ff_dim=32, dropout=0.0)  # fmt: skip
    model = Transformer(cfg).eval()
    src, lens = torch.randint(4, 20, (3, 6)), torch.tensor([6, 4, 5])
    tgt = torch.randint(4, 20, (3, 40))  # 40 steps: rooms 16, 32 and 64
    order = torch.tensor([2, 0, 1])  # each step the rows rotate, as a beam search's parents may
    state, rows = model.encode(src, lens), torch.arange(3)
    with torch.no_grad():
        for t in range(tgt.size(1)):
            log_probs, _, state = model.step(tgt[rows, t], state)
            if t in (0, 1, 15, 16, 17, 31, 32, 33, 39):  # either side of each new room
                full = torch.log_softmax(model.decode(tgt[rows, : t + 1], model.encode(src[rows], lens[rows]))[0], -1)
                torch.testing.assert_close(log_probs, full[:, t], atol=1e-5, rtol=0)
            rows = rows[order]
            state = {**select_rows(state, order)}
            assert _room(state["self"][1].k) == cache_room(t + 1) or t == 0
