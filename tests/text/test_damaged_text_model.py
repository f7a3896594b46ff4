"""A text model file whose parts do not fit together (vocabularies longer or shorter than its network's, an ``info``
that is not a mapping, weights that are not tensors) is refused as it is read, in one line naming the file: by
``Translator.load`` (ModelFileError), ``translate`` (also ``--model-info``), ``text-export`` (also ``--average``) and
``model.init_from``. Such files loaded and then failed far from the file (IndexError in the search, a traceback in
``dict(info)``), or were rewritten by text-export as if whole. Also: what ``translate --model`` names that is no model
file (a folder, a bundled caption model's name)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.tiny_translator import tiny_word_model_file

from text_attn.core.modelfile import ModelFileError
from text_attn.translation.export import export_main
from text_attn.translation.translate_cli import translate_main
from text_attn.translation.translator import Translator


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> dict:
    """A tiny good model file's content, as ``torch.load`` reads it (each test saves a copy with one part changed)."""
    path = tiny_word_model_file(tmp_path_factory.mktemp("good") / "m.pt")
    return torch.load(path, weights_only=True)


@pytest.fixture(autouse=True)
def _run_in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def _saved(path: Path, data: dict) -> str:
    torch.save(data, path)
    return str(path)


def _lines(vocab: dict, more: int) -> dict:
    """A stored vocabulary (Vocabulary.to_dict) ``more`` words longer (negative: shorter)."""
    words = vocab["lines"].split("\n")
    return {"lines": "\n".join(words + [f"extra{i}" for i in range(more)] if more > 0 else words[:more])}


def _refused(capsys, main, argv: list[str], prog: str) -> str:
    """The one line ``main(argv)`` stops with (exit code 2, no traceback)."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and err.startswith(f"{prog}: error: "), err
    return err.strip()


def _checkpoint(data: dict, **meta) -> dict:
    """A text-train checkpoint of ``data``'s model (its weights under ``net.``, its metadata), ``meta`` changed."""
    keep = {k: v for k, v in data.items() if k not in ("format", "version", "state_dict")}
    return {"state_dict": {f"net.{k}": v for k, v in data["state_dict"].items()}, "pytorch-lightning_version": "2.6.0",
            "epoch": 0, "global_step": 6, "model_metadata": {**keep, **meta}}  # fmt: skip


@pytest.mark.parametrize(
    ("key", "more", "side"), [("src_vocab", 2, "source"), ("tgt_vocab", 2, "target"), ("tgt_vocab", -2, "target")]
)
def test_vocabularies_that_do_not_fit_the_network_are_refused_as_the_file_is_read(good, tmp_path, capsys, key, more,
                                                                                   side):  # fmt: skip
    """A longer source vocabulary gave ids past the embedding (IndexError in translate), a shorter target one words the
    network writes but cannot name; text-export rewrote such a file, --model-info printed the wrong sizes."""
    rows = good["config"][f"{key[:3]}_vocab_size"]
    bad = _saved(tmp_path / "bad.pt", {**good, key: _lines(good[key], more)})
    said = f"bad.pt: damaged text model file: its {side} vocabulary has {rows + more} words but its network is built " \
           f"for {rows}"  # fmt: skip
    with pytest.raises(ModelFileError, match=said):
        Translator.load(bad)
    assert said in _refused(capsys, translate_main, ["--model", bad, "ein mann"], "translate")
    assert said in _refused(capsys, translate_main, ["--model", bad, "--model-info"], "translate")
    assert said in _refused(capsys, export_main, [bad, "out.pt"], "text-export")
    assert not (tmp_path / "out.pt").exists()
    with pytest.raises(ValueError, match=f"model.init_from: .*{said}"):  # blamed on the run's options before
        Translator.read_start(bad, good["arch"])


@pytest.mark.parametrize("info", ["trained on my data", [1, 2], {1: "x"}])
def test_an_info_that_is_not_a_mapping_of_names_is_refused(good, tmp_path, capsys, info):
    bad = _saved(tmp_path / "bad.pt", {**good, "info": info})
    said = "bad.pt: damaged text model file: its info (the model's facts) "
    with pytest.raises(ModelFileError, match=said.replace("(", r"\(").replace(")", r"\)")):
        Translator.load(bad)
    assert said in _refused(capsys, translate_main, ["--model", bad, "ein mann"], "translate")
    assert said in _refused(capsys, translate_main, ["--model", bad, "--model-info"], "translate")
    assert said in _refused(capsys, export_main, [bad, "out.pt"], "text-export")
    with pytest.raises(ValueError, match="model.init_from: .*bad.pt: damaged text model file: its info"):
        Translator.read_start(bad, good["arch"])  # started_from read info.get: an AttributeError
    # the same inside a training checkpoint's metadata
    ckpt = _saved(tmp_path / "bad.ckpt", _checkpoint(good, info=info))
    assert "bad.ckpt: damaged text-train checkpoint: its info" in _refused(capsys, export_main, [ckpt, "out.pt"],
                                                                           "text-export")  # fmt: skip
    assert not (tmp_path / "out.pt").exists()


def test_text_export_refuses_weights_that_are_not_tensors_in_one_line(good, tmp_path, capsys):
    """text-export counted the parameters before anything checked them: KeyError, AttributeError tracebacks; the mean
    of --average reached a string (text_attn.core.modelfile.mean_weights)."""
    state = dict(good["state_dict"])
    first = next(iter(state))
    cases = {
        "nosd.pt": ({k: v for k, v in good.items() if k != "state_dict"}, "no weights (state_dict)"),
        "sdstr.pt": ({**good, "state_dict": "x"}, "its state_dict is a str, not weights"),
        "sdlist.pt": ({**good, "state_dict": [1]}, "its state_dict is a list, not weights"),
        "weight.pt": ({**good, "state_dict": {**state, first: "x"}}, f"its weight '{first}' is a str, not a tensor"),
        "int.pt": ({**good, "state_dict": {**state, first: 3}}, f"its weight '{first}' is an int, not a tensor"),
    }
    for name, (data, why) in cases.items():
        bad = _saved(tmp_path / name, data)
        assert f"{name}: damaged text model file: {why}" in _refused(capsys, export_main, [bad, "o.pt"], "text-export")
        line = _refused(capsys, export_main, [str(tiny_word_model_file(tmp_path / "ok.pt")), "o.pt", "--average", bad],
                        "text-export")  # fmt: skip
        assert f"{name}: damaged text model file: {why}" in line
        with pytest.raises(ModelFileError, match=f"{name}: damaged text model file: "):
            Translator.load(bad)
    ckpt = _checkpoint(good)
    ckpt["state_dict"][f"net.{first}"] = "x"
    bad = _saved(tmp_path / "bad.ckpt", ckpt)
    line = _refused(capsys, export_main, [bad, "o.pt"], "text-export")
    assert f"bad.ckpt: damaged text-train checkpoint: its weight 'net.{first}' is a str, not a tensor" in line
    assert not (tmp_path / "o.pt").exists()


def test_average_records_what_was_averaged_and_drops_the_test_scores(good, tmp_path, capsys):
    """The mean of several files' weights is a new model: the first's test scores are not its own, what was averaged
    is recorded (and shown by --model-info), and the decoding chosen on val for the first's weights is kept, marked."""
    decoding = {"beam_size": 4, "length_penalty": 0.5, "no_repeat_ngram": 0, "chosen_by": "highest BLEU on val"}
    info = {"training_data": "my pairs", "terms": "research only", "test_scores": {"sacreBLEU": 30.0},
            "test_scores_default_decoding": {"sacreBLEU": 31.0}, "decoding": decoding}  # fmt: skip
    state = {k: v + 1 if v.is_floating_point() else v for k, v in good["state_dict"].items()}
    (tmp_path / "runs").mkdir()
    a = _saved(tmp_path / "runs" / "a.pt", {**good, "info": info})
    b = _saved(tmp_path / "runs" / "b.pt", {**good, "state_dict": state, "info": {"terms": "my own terms"}})
    assert export_main([a, "mean.pt", "--average", b]) == 0
    capsys.readouterr()
    mean = Translator.load("mean.pt")
    assert not [k for k in mean.info if k.startswith("test_scores")]
    assert mean.info["training_data"] == "my pairs" and mean.info["terms"] == "research only; my own terms"
    said = mean.info["averaged"]
    assert said.startswith("the mean of the weights of 2 files by text-export --average: a.pt, b.pt")
    assert "runs" not in said  # file names, not the machine's folders
    assert "a.pt's test scores were not measured on this mean" in said
    assert mean.info["decoding"] == {**decoding, "chosen_for": "a.pt, before text-export --average"}
    assert mean.decoding() == {"beam_size": 4, "length_penalty": 0.5, "no_repeat_ngram": 0}  # kept, not greedy
    assert translate_main(["--model", "mean.pt", "--model-info"]) == 0
    out = capsys.readouterr().out
    assert (
        "averaged:" in out and "a.pt, b.pt" in out and "before text-export --average" in out and "sacreBLEU" not in out
    )
    # a mean of a mean says so
    assert export_main(["mean.pt", "again.pt", "--average", b]) == 0
    assert "mean.pt was itself the mean of the weights of 2 files" in Translator.load("again.pt").info["averaged"]
    # a decoding typed by hand (no chosen_by): it was said to be "chosen on val", which no one did
    typed = _saved(tmp_path / "runs" / "typed.pt", {**good, "info": {"decoding": {"beam_size": 2}}})
    assert export_main([typed, "typed_mean.pt", "--average", b]) == 0
    assert Translator.load("typed_mean.pt").info["decoding"] == {
        "beam_size": 2,
        "chosen_for": "typed.pt, before text-export --average",
    }


def test_translate_names_a_folder_and_a_caption_models_name(tmp_path, capsys):
    (tmp_path / "models").mkdir()
    line = _refused(capsys, translate_main, ["--model", "models", "ein mann"], "translate")
    assert line == "translate: error: models: a folder, not a model file"  # was "model file not found"
    line = _refused(capsys, translate_main, ["--model", "flickr8k", "ein mann"], "translate")
    assert "flickr8k is a bundled caption model: caption --model flickr8k PHOTO uses it" in line
    assert "multi30k_de_en" in line
    with pytest.raises(ModelFileError, match="shapes is a bundled caption model"):
        Translator.load("shapes")


def test_the_caption_names_translate_knows_are_captionings():
    """text_attn may not import captioning: its copy of the caption models' names is kept equal here."""
    from captioning.model.bundled import MODEL_NAMES
    from text_attn.translation.bundled import CAPTION_NAMES

    assert set(CAPTION_NAMES) == set(MODEL_NAMES)


def test_text_export_names_a_url_as_typed(capsys):
    line = _refused(capsys, export_main, ["https://example.org/m.pt", "o.pt"], "text-export")
    assert line == "text-export: error: https://example.org/m.pt: a URL: only local files are read; download it first"
