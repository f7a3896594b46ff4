"""``translate --plot PNG --evidence`` (issue 73): beside each attention grid, PNG-evidence.png, what masking each
source token at a token's step costs it; refused without --plot and for a model without attention."""

from pathlib import Path

import pytest
import torch
from helpers.tiny_translator import tiny_word_model_file
from PIL import Image

from text_attn.translation import plot_files, translate_cli
from text_attn.translation.explain import translation_evidence
from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
from text_attn.translation.translator import Translator

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_evidence_grid_is_written_beside_each_attention_grid(tmp_path, capsys, monkeypatch):
    model = tiny_word_model_file(tmp_path / "m.pt")
    seen = []
    real = plot_files.draw_evidence

    def spy(path, found, tr):
        seen.append(found)
        return real(path, found, tr)

    monkeypatch.setattr(plot_files, "draw_evidence", spy)
    code = translate_cli.translate_main(["ein mann", "ein hund", "--model", str(model), "--plot",
                                         str(tmp_path / "g.png"), "--evidence", "--max-len", "4"])  # fmt: skip
    assert code == 0
    for n in (1, 2):
        assert Image.open(tmp_path / f"g-{n}.png").size[0] > 0
        assert Image.open(tmp_path / f"g-{n}-evidence.png").size[0] > 0
    assert len(seen) == 2
    found = seen[0]
    again = translation_evidence(Translator.load(model), found.source[:-1], found.tokens)  # what --plot drew
    torch.testing.assert_close(found.evidence, again.evidence)
    assert found.evidence.shape == found.attention.shape == (len(found.tokens), len(found.source))
    assert found.source[-1] == "<eos>" and len(found.agreement) == len(found.tokens)
    # its definition, for one token and one source unit: p(token) minus p(token with that unit masked at its step)
    from text_attn.translation import explain

    tr = Translator.load(model)
    src = torch.tensor([tr.src_vocab.encode(found.source[:-1], eos=True)])
    steps = explain.step_through(tr.net, src, tr.tgt_vocab.encode(found.tokens, eos=False), tr.tgt_vocab.bos_id)
    removed = torch.zeros(1, src.size(1), dtype=torch.bool)
    removed[0, 1] = True
    drop = steps.probs[0] - explain.removal_prob(tr.net, steps, 0, removed)[0]
    assert float(found.evidence[0, 1]) == pytest.approx(float(drop), abs=1e-6)


def test_refusals_in_one_line(tmp_path, capsys):
    model = tiny_word_model_file(tmp_path / "m.pt")
    plain = Translator.load(model)
    cfg = Seq2SeqConfig(**{**vars(plain.net.cfg), "attention": "none"})
    bare = Translator(Seq2Seq(cfg), plain.src_vocab, plain.tgt_vocab, "word", True).save(tmp_path / "bare.pt")
    for argv, why in ((["ein mann", "--model", str(model), "--evidence"], "give it with --plot"),
                      (["ein mann", "--model", str(bare), "--html", str(tmp_path / "g.html"), "--evidence"],
                       "--evidence: this model has no attention to explain"),  # (--plot: refused for that first)
                      (["ein mann", "--model", str(model), "--plot", str(tmp_path / "g.png"), "--evidence", "--sample"],
                       "--sample draws them at random: drop one"),
                      (["ein mann", "--model", str(model), "--alignments", str(tmp_path / "a.txt"), "--align-by",
                        "evidence", "--sample"], "--align-by evidence explains")):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            translate_cli.translate_main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert exc.value.code == 2 and len(err) == 1 and why in err[0], err
    assert not Path(tmp_path / "g.png").exists()


def test_one_python_call_on_a_result_gives_both_maps(tmp_path):
    tr = Translator.load(tiny_word_model_file(tmp_path / "m.pt"))
    (result,) = tr.translate(["ein mann"], beam_size=2, max_len=4)
    found = tr.explain(result)
    assert found.tokens == result.tokens and found.source == [*result.source, "<eos>"]
    torch.testing.assert_close(found.attention, result.attention.float(), atol=1e-5, rtol=0)  # the search's own α
    again = tr.explain("ein mann", beam_size=2, max_len=4)  # a sentence: translated first, the same decoding
    torch.testing.assert_close(again.evidence, found.evidence)
    assert again.agreement == pytest.approx(found.agreement, nan_ok=True)
    cfg = Seq2SeqConfig(**{**vars(tr.net.cfg), "attention": "none"})
    bare = Translator(Seq2Seq(cfg), tr.src_vocab, tr.tgt_vocab, "word", True)
    with pytest.raises(ValueError, match="no attention to explain"):
        bare.explain("ein mann", max_len=4)


def test_a_transformers_agreement_is_with_the_layer_its_views_draw():
    # the views draw one decoder layer's heads (the penultimate, or --layer): the tau beside them must be with that
    from text_attn.core.faithfulness import kendall_tau
    from text_attn.core.vocab import Vocabulary
    from text_attn.translation.transformer import Transformer, TransformerConfig

    torch.manual_seed(0)
    vocab = Vocabulary.build([["ein", "mann", "hund", "sitzt", "a", "man", "dog", "sits"]])
    cfg = TransformerConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), d_model=16, num_heads=2,
                            enc_layers=1, dec_layers=3, ff_dim=32, dropout=0.0)  # fmt: skip
    tr = Translator(Transformer(cfg).eval(), vocab, vocab, "word", True)
    by_layer = {}
    for layer in (None, 0, 2):  # None: as loaded, the penultimate (1)
        if layer is not None:
            tr.net.set_plot_layer(layer)
        (result,) = tr.translate(["ein mann sitzt"], beam_size=1, max_len=5)
        found = tr.explain(result)
        assert result.attention.dim() == 3  # (T, H, S): the layer drawn, per head
        torch.testing.assert_close(found.attention, result.attention.float().mean(dim=1), atol=1e-5, rtol=0)
        assert found.agreement == pytest.approx(
            [kendall_tau(found.attention[t], found.evidence[t]) for t in range(len(found.tokens))], nan_ok=True
        )
        by_layer[layer] = found
    # the evidence is the model's (masking a source token at every layer), whichever layer is drawn
    torch.testing.assert_close(by_layer[0].evidence, by_layer[2].evidence)
    assert not torch.allclose(by_layer[0].attention, by_layer[2].attention)
