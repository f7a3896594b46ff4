"""``benchmarks/starts.py``'s model file as stored before its tables became strings (``plain_copy``): the same
translator, read from lists and dicts, so its ``translate`` row times the storage and nothing else."""

from __future__ import annotations

from pathlib import Path

import torch
from helpers.scripts import load_script
from helpers.tiny_translator import tiny_subword_model_file

from text_attn.translation.translator import Translator

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "starts.py"


def test_the_plain_copy_holds_lists_and_dicts_and_the_same_translator(tmp_path):
    model = tiny_subword_model_file(tmp_path)
    plain = load_script(SCRIPT).plain_copy(model, tmp_path / "plain.pt")
    raw, now = torch.load(plain, weights_only=True), torch.load(model, weights_only=True)
    assert isinstance(raw["src_vocab"]["tokens"], list) and isinstance(now["src_vocab"]["lines"], str)
    assert all(isinstance(v, float) for v in raw["source_check"]["words"]["logp"].values())  # a plain dict
    assert set(now["source_check"]["words"]["logp"]) == {"keys", "values"}  # the tables as strings now
    a, b = Translator.load(model), Translator.load(plain)
    assert (a.src_vocab, a.tgt_vocab, a.source_check, a.info) == (b.src_vocab, b.tgt_vocab, b.source_check, b.info)
    assert all(torch.equal(x, y) for x, y in zip(a.net.state_dict().values(), b.net.state_dict().values(), strict=True))
