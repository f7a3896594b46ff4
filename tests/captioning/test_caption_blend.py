"""``caption-export --average --weights``: a captioner whose vocabulary extends another's (a fit with
``model.init_vocab: extend`` and the decoder it started from) blended with it, each tensor checked by hand (the old
words' rows and every other weight the weighted mean, the added words' rows the fit's own, the shared encoder
unchanged), its facts saying so; the orders and files that cannot be blended refused in one line."""

from __future__ import annotations

import pytest
import torch

from captioning.commands.export import export_main
from captioning.model.captioner import Captioner
from captioning.training.shapes import VOCAB
from tests.helpers.tiny_captioner import separate_run
from text_attn.core.vocab import Vocabulary

NEW = ["quux", "zorblat"]  # in the order Vocabulary.build gives them (equal counts: by name)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """start.pt (the shapes words) and fit.pt (the same words at the same ids, two more after; other decoder
    weights, the one encoder every separate_run shares)."""
    tmp = tmp_path_factory.mktemp("blend")
    start = Vocabulary.build([list(VOCAB)])
    separate_run(start, 1, tmp / "start.pt")
    separate_run(start.extended(Vocabulary.build([NEW])), 2, tmp / "fit.pt")
    separate_run(start, 3, tmp / "other.pt")
    return tmp


def _refused(capsys, argv, says):
    with pytest.raises(SystemExit) as exc:
        export_main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and says in err, err


def test_a_fit_with_added_words_blends_with_its_start_row_by_row(files, capsys):
    out = files / "blended.pt"
    argv = [str(files / "fit.pt"), str(out), "--average", str(files / "start.pt"), "--weights", "3", "1"]
    assert export_main(argv) == 0
    assert "averaged with 1 more (weights 3 1)" in capsys.readouterr().err
    fit, start, blend = (Captioner.load(files / n) for n in ("fit.pt", "start.pt", "blended.pt"))
    assert blend.vocab.itos == fit.vocab.itos == [*start.vocab.itos, *NEW]
    old = len(start.vocab)
    f, s, b = (c.model.decoder.state_dict() for c in (fit, start, blend))
    sized = [k for k in f if f[k].shape != s[k].shape]  # the vocabulary-sized weights: embedding and output layer
    assert sized and all(f[k].shape[0] == old + len(NEW) and s[k].shape[0] == old for k in sized)
    for k in f:
        rows = s[k].shape[0] if k in sized else f[k].shape[0]
        torch.testing.assert_close(b[k][:rows], 0.75 * f[k][:rows] + 0.25 * s[k], rtol=0, atol=1e-6)
        assert torch.equal(b[k][rows:], f[k][rows:])  # the added words' rows: the fit's own
        assert not torch.equal(b[k], f[k])  # and each tensor did move
    fe, be = fit.model.encoder.state_dict(), blend.model.encoder.state_dict()
    assert all(torch.equal(fe[k], be[k]) for k in fe)  # one encoder in both: the mean of equal weights is them
    assert blend.info["averaged"] == "the mean of the weights of 2 files: fit.pt, start.pt (weighted 0.75, 0.25)"
    feats = blend.encode(torch.randn(2, 3, 64, 64))  # (2, L, D): it captions, its attention a distribution
    said = blend.generate(feats, beam_size=2, max_len=6)
    torch.testing.assert_close(said.attention.sum(-1)[said.tokens != blend.vocab.pad_id], torch.ones(1).expand(
        int((said.tokens != blend.vocab.pad_id).sum())), rtol=0, atol=1e-5)  # fmt: skip


def test_a_fit_on_photos_of_another_jpeg_step_blends_and_keeps_its_own(files, tmp_path, capsys):
    """The decoder a fit started from was trained on 64 px copies saved at quality 90 (its preprocessing recompresses
    a photo so); the fit, on PNG files, records no JPEG step: what the photos looked like is no weight, the fit's is
    kept. Another source size is another model still."""
    step = {"source_side": 64, "jpeg_quality": 90, "jpeg_subsampling": "4:2:0"}
    separate_run(Vocabulary.build([list(VOCAB)]), 1, tmp_path / "jpeg.pt", encoder=step)
    assert Captioner.load(tmp_path / "jpeg.pt").preprocess.jpeg_quality == 90
    separate_run(Vocabulary.build([list(VOCAB)]).extended(Vocabulary.build([NEW])), 2, tmp_path / "png.pt",
                 encoder={"source_side": 64})  # fmt: skip
    argv = [str(tmp_path / "png.pt"), str(tmp_path / "out.pt"), "--average", str(tmp_path / "jpeg.pt")]
    assert export_main(argv) == 0
    blend = Captioner.load(tmp_path / "out.pt")
    assert blend.preprocess.jpeg_quality is None and blend.preprocess.source_side == 64
    capsys.readouterr()  # the "wrote" line
    _refused(capsys, [str(files / "fit.pt"), str(tmp_path / "bad.pt"), "--average", str(tmp_path / "jpeg.pt")],
             "its encoder.source_side is 64, not none")  # fmt: skip


def test_equal_weights_are_the_plain_mean(files, capsys):
    argv = [str(files / "start.pt"), str(files / "mean.pt"), "--average", str(files / "other.pt")]
    assert export_main(argv) == 0
    weighted = [str(files / "start.pt"), str(files / "same.pt"), "--average", str(files / "other.pt"), "--weights",
                "0.5", "0.5"]  # fmt: skip
    assert export_main(weighted) == 0
    capsys.readouterr()
    plain, same = Captioner.load(files / "mean.pt"), Captioner.load(files / "same.pt")
    p, q = plain.model.state_dict(), same.model.state_dict()
    assert all(torch.equal(p[k], q[k]) for k in p)
    assert plain.info["averaged"] == "the mean of the weights of 2 files: start.pt, other.pt"
    assert same.info["averaged"] == plain.info["averaged"] + " (weighted 0.5, 0.5)"


def test_what_cannot_be_blended_is_refused_in_one_line(files, capsys, tmp_path):
    fit, start, bad = str(files / "fit.pt"), str(files / "start.pt"), str(tmp_path / "bad.pt")
    # the larger vocabulary second: its added words' rows would be lost
    _refused(capsys, [start, bad, "--average", fit], f"--average {fit}: not the same model as {start} (its vocabulary "
                                                    "extends start.pt's: give it first, as CHECKPOINT)")  # fmt: skip
    # an ensemble: one of its decoders is what a fit started from
    assert export_main([start, str(tmp_path / "ens.pt"), "--ensemble", str(files / "other.pt")]) == 0
    capsys.readouterr()
    ens = str(tmp_path / "ens.pt")
    says = (f"--average {ens} is an ensemble of 2 decoders: the mean is one decoder's weights: take the one to weigh "
            f"out first (caption-export {ens} one.pt --member K)")  # fmt: skip
    _refused(capsys, [fit, bad, "--average", ens], says)
    started = Captioner.load(fit)  # a fit from the ensemble's second decoder (model.init_member 2) says which
    started.info["started_from"] = "ens.pt (decoder 2), trained on a tiny world"
    started.save(tmp_path / "started.pt")
    says = f"(caption-export {ens} one.pt --member 2: started.pt started from its decoder 2), then average with one.pt"
    _refused(capsys, [str(tmp_path / "started.pt"), bad, "--average", ens], says)
    # the same words in another vocabulary's order are no extension
    words = Vocabulary.build([list(VOCAB)]).itos
    shuffled = Vocabulary([*words[:4], *reversed(words[4:]), *NEW])
    separate_run(shuffled, 4, tmp_path / "shuffled.pt")
    _refused(capsys, [str(tmp_path / "shuffled.pt"), bad, "--average", start], "not the same model")
    # a decoder of another size under the same words
    separate_run(Vocabulary.build([list(VOCAB)]), 5, tmp_path / "wide.pt", hidden_dim=24)
    _refused(capsys, [fit, bad, "--average", str(tmp_path / "wide.pt")], "its decoder.hidden_dim is 24, not 32")
    for weights, says in [(["1"], "--weights: 1 given for 2 models"), (["1", "0"], "--weights 1 0: each above 0"),
                          (["inf", "1"], "argument --weights: expected a finite number, got 'inf'")]:  # fmt: skip
        _refused(capsys, [fit, bad, "--average", start, "--weights", *weights], says)
    _refused(capsys, [fit, bad, "--weights", "1"], "--weights: needs --average")
    assert not (tmp_path / "bad.pt").exists()
