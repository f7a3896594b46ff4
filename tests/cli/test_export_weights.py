"""What ``text-export`` and ``caption-export`` refuse or must not get wrong about the weights they write: weights that
are NaN or infinite (a diverged run's: exported, they translated every line as an empty one and captioned "yellow
yellow ...", exit 0), ``--weights`` so large that their products overflowed (a model of NaN, exit 0), a setting one
file records and another leaves to its default (the bundled GRU and its own re-export were "other settings"), a
``--info`` decoding key no run reads, and ``-`` or an empty path where a model file is read or written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from captioning.commands.export import export_main as caption_export
from tests.helpers.tiny_captioner import tiny_model_file
from tests.helpers.tiny_translator import tiny_subword_model_file
from text_attn.core.modelfile import load_model_file
from text_attn.translation.export import export_main as text_export


@pytest.fixture(scope="module")
def text_model(tmp_path_factory) -> Path:
    return tiny_subword_model_file(tmp_path_factory.mktemp("t"))


@pytest.fixture(scope="module")
def caption_model(tmp_path_factory) -> Path:
    return tiny_model_file(tmp_path_factory.mktemp("c") / "tiny.pt")


def _refused(capsys, export, prog: str, argv: list) -> str:
    with pytest.raises(SystemExit) as exc:
        export([str(a) for a in argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and err.startswith(f"{prog}: error: "), err
    return err.strip().removeprefix(f"{prog}: error: ")


def _spoiled(path: Path, out: Path) -> Path:
    """A copy of the model file at ``path`` with its first floating weight's first value NaN and second infinite."""
    data = torch.load(path, weights_only=True)
    key = next(k for k, v in data["state_dict"].items() if v.is_floating_point() and v.numel() > 1)
    weights = data["state_dict"][key].contiguous().clone()
    weights.view(-1)[:2] = torch.tensor([float("nan"), float("inf")])
    data["state_dict"][key] = weights
    torch.save(data, out)
    return out


@pytest.mark.parametrize("family", ["text", "caption"])
def test_weights_that_are_not_finite_are_refused_naming_the_file(family, text_model, caption_model, tmp_path, capsys):
    model, export, prog = (text_model, text_export, "text-export") if family == "text" else (
        caption_model, caption_export, "caption-export")  # fmt: skip
    bad = _spoiled(model, tmp_path / "bad.pt")
    total = sum(v.numel() for v in torch.load(model, weights_only=True)["state_dict"].values() if v.is_floating_point())
    said = _refused(capsys, export, prog, [bad, tmp_path / "out.pt"])
    assert said == f"{bad}: 2 of its {total:,} weights are NaN or infinite (a run that diverged?)"
    said = _refused(capsys, export, prog, [model, tmp_path / "out.pt", "--average", bad])
    assert "NaN or infinite" in said and str(bad) in said
    assert not (tmp_path / "out.pt").exists()


@pytest.mark.parametrize("family", ["text", "caption"])
def test_very_large_weights_weigh_as_their_ratio(family, text_model, caption_model, tmp_path, capsys):
    """1e308 twice overflowed in float64: every averaged weight was NaN."""
    model, export = (text_model, text_export) if family == "text" else (caption_model, caption_export)
    out = tmp_path / "out.pt"
    assert export([str(model), str(out), "--average", str(model), "--weights", "1e308", "1e308"]) == 0
    capsys.readouterr()
    before = torch.load(model, weights_only=True)["state_dict"]
    after = torch.load(out, weights_only=True)["state_dict"]
    for key, value in after.items():
        torch.testing.assert_close(value, before[key], rtol=0, atol=1e-6, msg=key)
    info = load_model_file(out, "text-model" if family == "text" else "caption-model")["info"]
    assert "(weighted 0.5, 0.5)" in info["averaged"]


def test_a_setting_one_file_leaves_to_its_default_is_the_same_setting(text_model, tmp_path, capsys):
    """The bundled GRU's file records no dot_projection (saved before it existed); every re-export records False."""
    data = torch.load(text_model, weights_only=True)
    assert data["config"].pop("dot_projection") is False
    older = tmp_path / "older.pt"
    torch.save(data, older)
    assert text_export([str(text_model), str(tmp_path / "out.pt"), "--average", str(older)]) == 0
    capsys.readouterr()
    data["config"]["embed_dim"] = 16  # a setting that does differ: named
    torch.save(data, tmp_path / "wider.pt")
    said = _refused(
        capsys, text_export, "text-export", [text_model, tmp_path / "x.pt", "--average", tmp_path / "wider.pt"]
    )
    assert said == (f"--average {tmp_path / 'wider.pt'}: not the same model as {text_model} (its network's embed_dim "
                    f"is 16, {text_model.name}'s 8)")  # fmt: skip


@pytest.mark.parametrize("family", ["text", "caption"])
def test_a_decoding_key_no_run_reads_is_refused(family, text_model, caption_model, tmp_path, capsys):
    model, export, prog = (text_model, text_export, "text-export") if family == "text" else (
        caption_model, caption_export, "caption-export")  # fmt: skip
    info = tmp_path / "info.json"
    info.write_text(json.dumps({"decoding": {"beam_size": 2, "no_repeat_ngrams": 3}}))
    said = _refused(capsys, export, prog, [model, tmp_path / "out.pt", "--info", info])
    assert said.startswith(f"--info {info}: its \"decoding\" holds 'no_repeat_ngrams' (no_repeat_ngram?), which no "
                           "run reads (runs read beam_size, length_penalty, no_repeat_ngram")  # fmt: skip
    info.write_text(json.dumps({"decoding": {"beam_size": 2, "chosen_by": "by hand"}}))
    assert export([str(model), str(tmp_path / "out.pt"), "--info", str(info)]) == 0


@pytest.mark.parametrize("family", ["text", "caption"])
def test_dash_or_nothing_for_a_model_file_is_one_line(family, text_model, caption_model, tmp_path, capsys, monkeypatch):
    model, export, prog = (text_model, text_export, "text-export") if family == "text" else (
        caption_model, caption_export, "caption-export")  # fmt: skip
    monkeypatch.chdir(tmp_path)
    dash = "OUT -: OUT writes a model file, not stdout; use ./- for a file named -"
    assert _refused(capsys, export, prog, [model, "-"]) == dash
    assert _refused(capsys, export, prog, [model, ""]) == "OUT is empty: give the model file to write"
    assert _refused(capsys, export, prog, ["-", "out.pt"]) == ("CHECKPOINT -: a model is read from a file, not stdin; "
                                                              "use ./- for a file named -")  # fmt: skip
    assert _refused(capsys, export, prog, ["", "out.pt"]) == "CHECKPOINT is empty: give a checkpoint or model file"
    # an empty option's file: "--encoder-of ''" and "--info ''" were dropped (exit 0), "--average ''" named "."
    options = ["--info", "--average"] + (["--encoder-of", "--ensemble"] if family == "caption" else [])
    for option in options:
        assert _refused(capsys, export, prog, [model, "out.pt", option, ""]) == f"{option} is empty: give a file"
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_recorded_hard_inference_is_what_runs_decode_with(caption_model, text_model, tmp_path, capsys):
    """--info's "decoding": {"hard_inference": ...} was stored in the facts alone, shown by --model-info and never
    used (and "banana" was taken, for a soft or a text model too): it sets the decoders' setting now, where runs read
    it, a value other than argmax or expect is refused, and so is the key for a model that has no such choice."""
    from captioning.model.captioner import Captioner
    from captioning.training.shapes import VOCAB
    from tests.helpers.tiny_captioner import separate_run
    from text_attn.core.vocab import Vocabulary

    hard = tmp_path / "hard.pt"
    separate_run(Vocabulary.build([list(VOCAB)]), 1, hard, attention="hard")
    assert Captioner.load(hard).model.decoder.cfg.hard_inference == "argmax"
    info = tmp_path / "info.json"
    info.write_text(json.dumps({"decoding": {"hard_inference": "expect"}}))
    assert caption_export([str(hard), str(tmp_path / "out.pt"), "--info", str(info)]) == 0
    capsys.readouterr()
    got = Captioner.load(tmp_path / "out.pt")
    assert got.model.decoder.cfg.hard_inference == "expect" and got.info["decoding"]["hard_inference"] == "expect"
    refused = ((caption_model, caption_export, "caption-export", "attends softly"),
               (text_model, text_export, "text-export", "a text model has no such setting"))  # fmt: skip
    for model, export, prog, why in refused:
        assert _refused(capsys, export, prog, [model, tmp_path / "x.pt", "--info", info]).endswith(why)
    # a file an older version wrote: the fact recorded, the decoders' setting not; re-exported, it is applied
    older = Captioner.load(hard)
    older.info["decoding"] = {"hard_inference": "expect"}
    older.save(tmp_path / "older.pt")
    assert Captioner.load(tmp_path / "older.pt").model.decoder.cfg.hard_inference == "argmax"
    assert caption_export([str(tmp_path / "older.pt"), str(tmp_path / "again.pt")]) == 0
    assert Captioner.load(tmp_path / "again.pt").model.decoder.cfg.hard_inference == "expect"
    capsys.readouterr()
    info.write_text(json.dumps({"decoding": {"hard_inference": "banana"}}))
    said = _refused(capsys, caption_export, "caption-export", [hard, tmp_path / "x.pt", "--info", info])
    assert said.endswith('hard_inference must be argmax or expect, got "banana"')
    assert not (tmp_path / "x.pt").exists()


def test_the_other_familys_bundled_name_says_which_export_reads_it(capsys, tmp_path, monkeypatch):
    """`caption-export transformer o.pt` said "transformer: no such file", as if mistyped (caption and translate name
    the command); a file of that name in the working folder is still read as the file."""
    monkeypatch.chdir(tmp_path)
    said = _refused(capsys, caption_export, "caption-export", ["transformer", "o.pt"])
    assert said == ("transformer is a bundled text model: text-export transformer OUT uses it; the bundled caption "
                    "models are flickr8k, shapes")  # fmt: skip
    said = _refused(capsys, text_export, "text-export", ["flickr8k", "o.pt"])
    assert said.startswith("flickr8k is a bundled caption model: caption-export flickr8k OUT uses it; the bundled text")
    (tmp_path / "flickr8k").write_text("not a model\n")  # a file of that name: read, and refused as what it is
    assert "not a checkpoint or model file" in _refused(capsys, text_export, "text-export", ["flickr8k", "o.pt"])
    assert not (tmp_path / "o.pt").exists()


def test_a_file_given_twice_is_said(caption_model, tmp_path, capsys):
    """An ensemble of a file with itself (twice the cost, the same captions) or a mean of it with itself was written
    without a word; the file is named in one note (by another path too), and still written."""
    import os

    os.link(caption_model, tmp_path / "again.pt")
    for option in ("--ensemble", "--average"):
        assert caption_export([str(caption_model), str(tmp_path / "x.pt"), option, str(tmp_path / "again.pt")]) == 0
        notes = [x for x in capsys.readouterr().err.splitlines() if "given twice" in x]
        assert notes == [f"caption-export: note: {tmp_path / 'again.pt'} is given twice: its weights count twice (an "
                         "ensemble of it with itself decodes as it does, at twice the cost; a mean with itself is "
                         "itself)"]  # fmt: skip
    assert caption_export([str(caption_model), str(tmp_path / "y.pt")]) == 0
    assert "given twice" not in capsys.readouterr().err
    # a bundled name given twice (CHECKPOINT is resolved to its file, the option's name was compared as typed)
    assert caption_export(["shapes", str(tmp_path / "z.pt"), "--ensemble", "shapes"]) == 0
    assert "is given twice" in capsys.readouterr().err
