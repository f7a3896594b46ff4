"""translate --plot of an empty translation (a weak model's search ends at once): nothing is drawn for it, one note
names it, and where every translation is empty no file is written. It drew a grid of no rows, with Matplotlib's raw
UserWarning and its source line on stderr."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest
import torch

from text_attn.core.vocab import Vocabulary
from text_attn.translation.plot_files import PlotWriter
from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
from text_attn.translation.translate_cli import translate_main
from text_attn.translation.translator import Translator


@pytest.fixture
def silent_model(tmp_path, one_thread):
    """A tiny model whose every translation is empty: its output layer makes <eos> the first word, always."""
    torch.manual_seed(0)
    vocab = Vocabulary.build([["ein", "mann", "hund", "a", "man", "dog"]])
    cfg = Seq2SeqConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), embed_dim=8, enc_hidden=8,
                        dec_hidden=8, attn_dim=8)  # fmt: skip
    net = Seq2Seq(cfg)
    with torch.no_grad():
        net.out.bias[vocab.eos_id] = 100.0
    return Translator(net, vocab, vocab, "word", True).save(tmp_path / "silent.pt")


def test_every_translation_empty_writes_no_picture_and_says_so(silent_model, tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Matplotlib's singular-ylim UserWarning fails the test
        code = translate_main(["--model", str(silent_model), "--plot", str(tmp_path / "g.png"), "ein mann", "hund"])
    out, err = capsys.readouterr()
    assert code == 0 and out == "\n\n"
    assert "translate: note: --plot: translations 1, 2 are empty: nothing to plot; no picture written" in err, err
    assert not list(tmp_path.glob("g*.png")) and "wrote" not in err


def test_an_empty_translation_among_others_is_left_out_in_one_note(tmp_path, capsys):
    def result(tokens: list[str]) -> SimpleNamespace:
        source = ["ein", "mann"]
        return SimpleNamespace(source=source, tokens=tokens, attention=torch.full((len(tokens), 3), 1 / 3))

    plots = PlotWriter(str(tmp_path / "g.png"), None)
    plots.add([(1, result(["a", "man"])), (2, result([]))], several=True)
    plots.finish(several=True)
    err = capsys.readouterr().err
    assert (tmp_path / "g-1.png").exists() and not (tmp_path / "g-2.png").exists()
    assert err.count("is empty") == 1 and "--plot: translation 2 is empty: nothing to plot\n" in err, err
