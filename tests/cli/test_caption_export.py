"""caption-export's guards: an --info file read as a small, flat, regular JSON file; a decoding no ``caption`` run
could use refused before it is written; a damaged checkpoint named in one line (never a traceback, never the hidden
temporary file); a text-train checkpoint sent to text-export; and a model made anew (--average, --encoder-of) that
says what it was made of and keeps no test scores of another model. (Export itself, averaging and ensembles:
tests/cli/test_caption_cli.py, tests/captioning/test_ensemble.py, tests/captioning/test_fine_tuned_export.py.)"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from captioning.commands.caption import caption_main
from captioning.commands.export import export_main
from captioning.model.captioner import Captioner
from captioning.training.shapes import VOCAB as SHAPE_WORDS
from tests.helpers.tiny_captioner import separate_run, tiny_model_file
from text_attn.core.info_file import INFO_BYTES, INFO_DEPTH
from text_attn.core.vocab import Vocabulary

VOCAB = Vocabulary.build([list(SHAPE_WORDS)])


def _refused(capsys, argv: list[str]) -> str:
    """caption-export's one line for argv (exit code 2, nothing else on stderr)."""
    with pytest.raises(SystemExit) as exc:
        export_main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and err.startswith("caption-export: error: "), err
    return err


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return tiny_model_file(tmp_path_factory.mktemp("model") / "tiny.pt")


def _info(tmp_path: Path, value: object, name: str = "info.json") -> Path:
    path = tmp_path / name
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return path


# --- a decoding no caption run could use ---------------------------------------------------------------------------
def test_an_impossible_decoding_is_refused_at_export(model, tmp_path, capsys):
    """A beam wider than the vocabulary, once written, failed every caption run of the file (and attention-serve
    answered empty captions): refused here, as are values out of range or of the wrong kind."""
    out = tmp_path / "out.pt"
    words = len(VOCAB)
    wide = _info(tmp_path, {"decoding": {"beam_size": words + 1}})
    err = _refused(capsys, [model, out, "--info", wide])
    assert f'--info {wide}: its "decoding" cannot be used with this model: beam_size {words + 1} is more' in err
    bad = ({"beam_size": 0}, {"beam_size": True}, {"beam_size": 3.0}, {"length_penalty": -1},
           {"length_penalty": "1"}, {"no_repeat_ngram": -2}, {"no_repeat_ngram": 2.5}, "beam 3")  # fmt: skip
    for decoding in bad:
        err = _refused(capsys, [model, out, "--info", _info(tmp_path, {"decoding": decoding})])
        assert 'its "decoding" cannot be used' in err, decoding
    assert not out.exists()
    fine = {"beam_size": words, "length_penalty": 1, "no_repeat_ngram": 3, "chosen_by": "by hand"}
    assert export_main([str(model), str(out), "--info", str(_info(tmp_path, {"decoding": fine}))]) == 0
    assert Captioner.load(out).info["decoding"] == fine
    capsys.readouterr()  # its "wrote" line, on stderr
    # a file written by hand with such a decoding: its re-export names it; --info replaces it, null removes it
    data = torch.load(model, weights_only=True)
    torch.save({**data, "info": {"decoding": {"beam_size": 50}}}, tmp_path / "hand.pt")
    err = _refused(capsys, [tmp_path / "hand.pt", out])
    assert f'{tmp_path / "hand.pt"}: its recorded "decoding" cannot be used: beam_size 50 is more' in err
    capsys.readouterr()
    assert export_main([str(tmp_path / "hand.pt"), str(out), "--info", str(_info(tmp_path, {"decoding": None}))]) == 0
    assert "decoding" not in Captioner.load(out).info


# --- --info: a small, flat, regular file ---------------------------------------------------------------------------
def test_info_is_read_from_a_small_flat_regular_file_only(model, tmp_path, capsys):
    out = tmp_path / "out.pt"
    fifo = tmp_path / "info.fifo"
    os.mkfifo(fifo)

    def unblock() -> None:  # a reader waiting on the FIFO (the bug) gets EOF instead of hanging the test run
        if not done.wait(10):
            with open(fifo, "w"):
                pass

    done = threading.Event()
    guard = threading.Thread(target=unblock, daemon=True)
    guard.start()
    try:
        assert "a FIFO, not a regular file" in _refused(capsys, [model, out, "--info", fifo])
    finally:
        done.set()
    # a device (/dev/zero was read without end; /dev/null here: a finite one, so a regression fails, not fills memory)
    assert "a device, not a regular file" in _refused(capsys, [model, out, "--info", "/dev/null"])
    big = tmp_path / "big.json"
    big.write_text("{" + " " * INFO_BYTES + "}")
    assert f"larger than {INFO_BYTES:,} bytes" in _refused(capsys, [model, out, "--info", big])
    # nested past the bound: refused in one line (5,000 levels were json's RecursionError; 900 torch.save's)
    flat = _info(tmp_path, "{" + '"a": {' * (INFO_DEPTH - 1) + "}" * INFO_DEPTH, "flat.json")
    for levels in (INFO_DEPTH + 1, 900, 100_000):
        deep = _info(tmp_path, '{"a": ' + "[" * (levels - 1) + "]" * (levels - 1) + "}", "deep.json")
        assert f"nested more than {INFO_DEPTH} deep" in _refused(capsys, [model, out, "--info", deep]), levels
    # 1e999 reads as infinity, which no JSON reader writes back: refused as NaN is
    assert "reads as Infinity" in _refused(capsys, [model, out, "--info", _info(tmp_path, '{"x": 1e999}')])
    assert not out.exists()
    assert export_main([str(model), str(out), "--info", str(flat)]) == 0


# --- damaged checkpoints -------------------------------------------------------------------------------------------
def _checkpoint(captioner: Captioner, **changed) -> dict:
    """A caption-train checkpoint of the captioner (its settings in the encoder / decoder blocks, its vocabulary and
    facts beside the weights), with ``changed`` fields."""
    hp = {"encoder": captioner.model.encoder.config(), "decoder": asdict(captioner.model.decoder.cfg), "lr": 1e-3}
    state = {f"model.{k}": v for k, v in captioner.model.state_dict().items()}
    ckpt = {"epoch": 1, "pytorch-lightning_version": "2.5.0", "state_dict": state, "hyper_parameters": hp}
    return {**ckpt, "vocab": captioner.vocab.to_dict(), "domain": "tiny shapes", "domain_check": None, **changed}


@pytest.fixture(scope="module")
def tiny() -> Captioner:
    return separate_run(VOCAB, 1)


@pytest.mark.parametrize(
    ("changed", "says"),
    [
        ({"hyper_parameters": [1]}, "its hyper_parameters must be a mapping of settings, got list"),
        ({"vocab": {"x": 1}}, "its vocabulary is not one caption-train writes"),
        ({"vocab": {"lines": 5}}, "its vocabulary is not one caption-train writes"),
        ({"domain": 5}, "its domain (what it was trained on) must be a text, got int"),
        ({"domain_check": "x"}, "its domain check is not one this toolkit writes"),
        ({"domain_check": {"prototypes": torch.eye(4)[:2], "threshold": 0.3}}, "its domain check was made on features"),
    ],
)
def test_a_damaged_checkpoint_is_one_line_naming_it(tiny, changed, says, tmp_path, capsys):
    ckpt = tmp_path / "run.ckpt"
    torch.save(_checkpoint(tiny, **changed), ckpt)
    err = _refused(capsys, [ckpt, tmp_path / "out.pt"])
    assert f"{ckpt}: damaged checkpoint: {says}" in err and ".out.pt." not in err  # not the temporary file
    assert not (tmp_path / "out.pt").exists()


def test_a_sound_checkpoint_with_a_domain_check_exports(tiny, tmp_path, capsys):
    width = tiny.model.encoder.out_dim
    check = {"prototypes": torch.eye(width)[:2].half(), "threshold": 0.3}
    torch.save(_checkpoint(tiny, domain_check=check), tmp_path / "run.ckpt")
    assert export_main([str(tmp_path / "run.ckpt"), str(tmp_path / "out.pt")]) == 0
    got = Captioner.load(tmp_path / "out.pt")
    assert got.domain == "tiny shapes" and torch.equal(got.domain_check["prototypes"], check["prototypes"])


def test_a_model_file_whose_vocabulary_is_no_text_is_one_line(model, tmp_path, capsys):
    data = torch.load(model, weights_only=True)
    torch.save({**data, "vocab": {"lines": 5}}, tmp_path / "bad.pt")  # split as a text: an AttributeError's traceback
    err = _refused(capsys, [tmp_path / "bad.pt", tmp_path / "out.pt"])
    assert f"{tmp_path / 'bad.pt'}: broken caption model file" in err


def test_a_text_train_checkpoint_is_sent_to_text_export(tmp_path, capsys):
    ckpt = tmp_path / "text.ckpt"
    state = {"net.encoder.embedding.weight": torch.zeros(3, 2)}
    torch.save({"state_dict": state, "hyper_parameters": {}, "pytorch-lightning_version": "2.5.0"}, ckpt)
    err = _refused(capsys, [ckpt, tmp_path / "out.pt"])
    assert f"{ckpt} is a text-train checkpoint" in err and f"`text-export {ckpt} model.pt`" in err


# --- a model made anew ---------------------------------------------------------------------------------------------
@pytest.mark.long
def test_an_average_and_another_encoder_say_what_they_were_made_of(tmp_path, capsys):
    """Their test scores measured other weights: gone. What was averaged, whose encoder: said, without the machine's
    folders. Every source's data terms apply. The decoding chosen on val for the source stays (a better start than
    the fallback), marked as chosen for it."""
    decoding = {"beam_size": 5, "length_penalty": 1.0, "no_repeat_ngram": 3, "chosen_by": "val"}
    a, b = separate_run(VOCAB, 1), separate_run(VOCAB, 2)
    a.info = {"training": "run A", "terms": "A's terms", "test_scores": {"Bleu_4": 20.0}, "decoding": decoding}
    b.info = {"training": "run B", "training_data": "my photos", "terms": "mine", "test_scores": {"Bleu_4": 30.0}}
    (tmp_path / "runs" / "b").mkdir(parents=True)
    a.save(tmp_path / "a.pt")
    b.save(tmp_path / "runs" / "b" / "b.pt")
    mean = tmp_path / "mean.pt"
    assert export_main([str(tmp_path / "a.pt"), str(mean), "--average", str(tmp_path / "runs" / "b" / "b.pt")]) == 0
    info = Captioner.load(mean).info
    assert "test_scores" not in info and info["averaged"] == "the mean of the weights of 2 files: a.pt, b.pt"
    assert info["terms"] == "A's terms; mine" and info["training_data"] == "my photos"
    assert info["decoding"] == {**decoding, "chosen_for": "a.pt, before caption-export --average"}
    capsys.readouterr()
    assert caption_main(["--model", str(mean), "--model-info"]) == 0
    shown = capsys.readouterr().out
    assert "averaged:       the mean of the weights of 2 files: a.pt, b.pt" in shown and "test scores" not in shown
    moved = tmp_path / "moved.pt"
    assert export_main([str(tmp_path / "a.pt"), str(moved), "--encoder-of", str(tmp_path / "runs" / "b" / "b.pt")]) == 0
    info = Captioner.load(moved).info
    assert "test_scores" not in info and info["encoder_from"].startswith("b.pt (its encoder's weights")
    assert info["terms"] == "A's terms; mine"
    assert info["decoding"]["chosen_for"] == "a.pt, before caption-export --encoder-of"
    # scores measured on the new model and given with --info are kept
    scores = _info(tmp_path, {"test_scores": {"Bleu_4": 25.0}})
    assert export_main([str(tmp_path / "a.pt"), str(mean), "--average", str(moved), "--info", str(scores)]) == 0
    assert Captioner.load(mean).info["test_scores"] == {"Bleu_4": 25.0}
