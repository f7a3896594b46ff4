"""Guided alignment (data.alignments): a corpus's word links become attention targets over its tokens (links.py,
checked by hand), the data module carries them for the train pairs only, a bad links file is one line naming it,
and a few supervised steps move a Transformer's penultimate-layer attention onto the linked tokens."""

from __future__ import annotations

import gzip
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from text_attn.translation.data import TranslationDataModule
from text_attn.translation.links import link_examples, word_of_tokens
from text_attn.translation.module import TranslationModule
from text_attn.translation.pairs import Example, TaskError


def _pieces(text: str) -> list[str]:
    """A subword-like encoder: words of more than 4 letters split after their 4th, "▁" starting each word."""
    out = []
    for word in text.split():
        out += [f"▁{word[:4]}"] + ([word[4:]] if len(word) > 4 else [])
    return out


def test_tokens_are_mapped_to_the_words_they_spell():
    assert word_of_tokens("ein Fahrrad", _pieces("ein Fahrrad"), _pieces) == [0, 1, 1]
    assert word_of_tokens("ein Fahrrad", ["▁ein", "▁Fahrrad"], _pieces) is None  # not the words' own tokens


def test_links_become_targets_over_the_linked_words_tokens(tmp_path):
    pairs = [("ein rotes Fahrrad", "a red bicycle"), ("Hunde spielen", "dogs are playing")]
    examples = [Example(_pieces(s), _pieces(t), src_text=s, tgt_text=t) for s, t in pairs]
    # source tokens: ▁ein ▁rote s ▁Fahr rad | ▁Hund e ▁spie len; target: ▁a ▁red ▁bicy cle | ▁dogs ▁are ▁play ing
    path = tmp_path / "links.txt"
    path.write_text("0-0 1-1 2-2\n0-0 1-1 1-2\n")
    link_examples(examples, path, _pieces)
    assert examples[0].links == [(0, [0]), (1, [1, 2]), (2, [3, 4]), (3, [3, 4])]
    # "are" and "playing" both come from "spielen"; "dogs" from "Hunde" (both of its tokens)
    assert examples[1].links == [(0, [0, 1]), (1, [2, 3]), (2, [2, 3]), (3, [2, 3])]
    path.write_text("0-0\n\n")  # a pair without links: no targets
    link_examples(examples, path, _pieces)
    assert examples[1].links == []


@pytest.mark.parametrize(
    ("text", "why"),
    [("0-0\n", "1 lines for 2 train pairs"),
     ("0-0\n0:1\n", "line 2: '0:1' is not a link i-j"),
     ("0-3\n0-0\n", "line 1: 0-3 links past the pair's 3 source / 3 target words")],
)  # fmt: skip
def test_a_bad_links_file_is_one_line_naming_it(tmp_path, text, why):
    pairs = [("ein rotes Fahrrad", "a red bicycle"), ("Hunde spielen", "dogs are playing")]
    examples = [Example(_pieces(s), _pieces(t), src_text=s, tgt_text=t) for s, t in pairs]
    path = tmp_path / "links.txt"
    path.write_text(text)
    with pytest.raises(TaskError, match=why):
        link_examples(examples, path, _pieces)
    if text == "0-0\n":  # the caller's word on what cut the pairs (data.train_size), said after it
        with pytest.raises(TaskError, match=r"in the corpus's order \(data.train_size 2 keeps the first"):
            link_examples(examples, path, _pieces, " (data.train_size 2 keeps the first 2: ...)")


def _corpus(root: Path) -> Path:
    """A tiny corpus folder (train / val / test_2016_flickr, de and en, gzipped) and links of its train pairs."""
    train = [("ein mann läuft", "a man runs"), ("zwei hunde spielen", "two dogs play"),
             ("ein hund läuft", "a dog runs"), ("ein mann spielt", "a man plays")] * 8  # fmt: skip
    held = [("zwei männer laufen", "two men run")] * 4
    for split, pairs in (("train", train), ("val", held), ("test_2016_flickr", held)):
        for k, lang in ((0, "de"), (1, "en")):
            with gzip.open(root / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.write("".join(p[k] + "\n" for p in pairs))
    links = root / "links.txt"
    links.write_text("0-0 1-1 2-2\n" * len(train))
    return links


def _data(root: Path, **extra) -> TranslationDataModule:
    return TranslationDataModule(task="pair", root=str(root), src_lang="de", tgt_lang="en", train_size=0, val_size=0,
                                 test_size=0, batch_size=8, shared_vocab=True, **extra)  # fmt: skip


def test_the_train_batches_carry_the_links_and_the_held_out_ones_none(tmp_path):
    links = _corpus(tmp_path)
    dm = _data(tmp_path, attention_targets=True, alignments=str(links))
    dm.setup()
    batch = next(iter(dm.train_dataloader()))
    mask, targets = batch["attn_targets_mask"], batch["attn_targets"]  # (B, T+1), (B, T+1, S)
    assert mask[:, :3].all() and not mask[:, 3:].any()  # three linked words; the eos step has no target
    torch.testing.assert_close(targets[:, :3, :3], torch.eye(3).expand(len(mask), 3, 3))  # word j <- word j
    val = next(iter(dm.val_dataloader()))
    assert not val["attn_targets_mask"].any()  # no links for val and test: nothing supervised there


@pytest.mark.parametrize(
    ("options", "why"),
    [({"attention_targets": True}, "for a corpus \\(task pair\\) give its word links as data.alignments"),
     ({"alignments": "links.txt"}, "set data.attention_targets: true beside them")],
)  # fmt: skip
def test_links_need_attention_targets_and_targets_need_links(tmp_path, options, why):
    with pytest.raises(ValueError, match=why):
        _data(tmp_path, **options)
    with pytest.raises(ValueError, match="data.alignments links the train pairs of task pair"):
        TranslationDataModule(task="reorder", attention_targets=True, alignments="links.txt")


def test_supervised_steps_move_the_penultimate_layer_onto_the_links(tmp_path):
    links = _corpus(tmp_path)
    net = {"d_model": 32, "num_heads": 2, "enc_layers": 1, "dec_layers": 2, "ff_dim": 32, "dropout": 0.0}
    weight = {}
    for lam in (0.0, 1.0):
        dm = _data(tmp_path, attention_targets=True, alignments=str(links))
        torch.manual_seed(0)
        module = TranslationModule(arch="transformer", network=net, lr=0.01, objective={"attn_sup_lambda": lam})
        module.trainer = SimpleNamespace(datamodule=dm)
        module.setup("fit")
        batch = next(iter(dm.train_dataloader()))
        opt = module.configure_optimizers()
        opt = opt[0][0] if isinstance(opt, tuple) else opt["optimizer"] if isinstance(opt, dict) else opt
        for _ in range(15):
            opt.zero_grad()
            module.objective.teacher_forced(module.net, batch, module.tgt_vocab.pad_id)[0].backward()
            opt.step()
        module.net.set_plot_layer(0)  # the penultimate of two
        with torch.no_grad():
            _, heads = module.net(batch["src"], batch["src_lens"], batch["tgt"][:, :-1], need_weights=True)
        on_links = (heads.mean(2) * batch["attn_targets"]).sum(-1)[batch["attn_targets_mask"]]
        weight[lam] = float(on_links.mean())
    assert weight[1.0] > 0.8 and weight[1.0] > weight[0.0] + 0.3, weight


def test_a_chunk_folder_is_refused_beside_links(tmp_path):
    (tmp_path / "streaming.json").write_text("{}")  # what marks a folder text-train optimize wrote
    dm = _data(tmp_path, attention_targets=True, alignments=str(tmp_path / "links.txt"))
    with pytest.raises(ValueError, match="stored as token ids, without the words the links name"):
        dm.setup()
