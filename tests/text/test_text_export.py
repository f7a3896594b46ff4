"""``text-export``: a text-train checkpoint (or a text model file) -> the model file ``translate`` reads, float16
included; and ``translate`` / ``caption`` given a training checkpoint instead of a model file name the command that
converts it."""

import itertools
from pathlib import Path

import pytest
import torch

from text_attn.core.modelfile import ModelFileError, load_model_file
from text_attn.translation.checkpoint import trained_epoch
from text_attn.translation.export import export_checkpoint, export_main
from text_attn.translation.train_cli import text_train_cli
from text_attn.translation.translate_cli import translate_main
from text_attn.translation.translator import Translator

CONFIG = str(Path(__file__).parent.parent / "fixtures/text/tiny_reorder.yaml")
SENTENCES = ["ma pipo deko", "ro gake kade tuko", "ma pipo deko ro gotu"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One tiny fit with checkpointing: (its final checkpoint, its Translator, the model file fit wrote)."""
    root = tmp_path_factory.mktemp("fit")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)  # LightningCLI saves its config.yaml in the working directory when there is no logger
        cli = text_train_cli(
            [
                "fit",
                "--config",
                CONFIG,
                "--trainer.enable_checkpointing",
                "true",
                "--trainer.default_root_dir",
                str(root),
                "--model.export_path",
                str(root / "m.pt"),
            ]
        )
    (ckpt,) = root.rglob("*.ckpt")  # the default ModelCheckpoint keeps the last one: it holds the final weights
    m = cli.model
    final = Translator(m.net, m.src_vocab, m.tgt_vocab, m.codec)
    return ckpt, final, root / "m.pt"


@pytest.fixture(autouse=True)
def _run_in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def _texts(translator: Translator, beam_size: int = 1) -> list[str]:
    return [t.text for t in translator.translate(SENTENCES, beam_size=beam_size)]


def _one_error_line(capsys, exc, prog: str) -> str:
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert err.count("\n") == 1 and err.startswith(f"{prog}: error: ") and "Traceback" not in err, err
    return err.strip()


def _saved(epoch: int, started: int) -> dict:
    return {"epoch": epoch, "loops": {"fit_loop": {"epoch_progress": {"current": {"started": started}}}}}


def test_a_checkpoint_is_said_by_the_epoch_its_weights_trained_in():
    """Counted as the run's lines and the checkpoints' names count (best-epoch=0, "validated at step 4 (epoch 1)"):
    the last.ckpt written as a 2-epoch fit ended holds epoch 2 and 2 epochs started (read off a real one), and
    text-export said "epoch 2" of epoch 1's weights."""
    assert trained_epoch(_saved(2, 2)) == 1  # written as the fit ended
    assert trained_epoch(_saved(0, 1)) == 0  # best-epoch=0-step=2.ckpt, saved at its epoch's end
    assert trained_epoch(_saved(3, 4)) == 3  # mid-epoch: the epoch in progress
    assert trained_epoch({"epoch": 5}) == 5 and trained_epoch({"epoch": "5"}) is None  # no loops: Lightning's own
    assert trained_epoch({"epoch": 5, "loops": None}) == 5


def test_export_a_checkpoint_translates_like_the_trained_network(run, tmp_path, capsys):
    ckpt, final, fit_file = run
    out = tmp_path / "exported.pt"
    assert export_main([str(ckpt), str(out)]) == 0
    printed, msg = capsys.readouterr()
    assert (
        printed == ""
        and msg.startswith(f"wrote {out} from checkpoint (epoch ")
        and f", step 6) {ckpt}: " in msg
        and "float32" in msg
    )
    data = load_model_file(out, "text-model")
    expected = final.net.state_dict()
    assert data["state_dict"].keys() == expected.keys()
    for k, v in expected.items():
        assert data["state_dict"][k].dtype == torch.float32 and torch.equal(data["state_dict"][k], v), k
    meta = torch.load(ckpt, weights_only=True)["model_metadata"]
    assert {k: data[k] for k in meta} == meta
    # the same file fit itself wrote at the end (same weights, same metadata)
    fit_data = load_model_file(fit_file, "text-model")
    assert {k: v for k, v in fit_data.items() if k != "state_dict"} == {
        k: v for k, v in data.items() if k != "state_dict"
    }
    assert all(torch.equal(fit_data["state_dict"][k], v) for k, v in data["state_dict"].items())
    exported = Translator.load(out)
    assert _texts(exported) == _texts(final) and _texts(exported, 3) == _texts(final, 3)
    assert translate_main(["--model", str(out), "ma pipo deko"]) == 0
    assert capsys.readouterr().out.strip() == _texts(final)[0]
    # the reusable function writes the same file
    assert export_checkpoint(ckpt, tmp_path / "again.pt") == tmp_path / "again.pt"
    again = load_model_file(tmp_path / "again.pt", "text-model")["state_dict"]
    assert all(torch.equal(again[k], v) for k, v in data["state_dict"].items())


def test_half_halves_the_file_and_still_translates(run, tmp_path, capsys):
    ckpt, final, _ = run
    full, half = tmp_path / "full.pt", tmp_path / "half.pt"
    assert export_main([str(ckpt), str(full)]) == 0
    assert export_main([str(ckpt), str(half), "--half"]) == 0
    assert "float16 weights" in capsys.readouterr().err.splitlines()[-1]
    assert half.stat().st_size < 0.65 * full.stat().st_size
    stored = torch.load(half, weights_only=True)["state_dict"]
    assert stored and all(v.dtype == torch.float16 for v in stored.values() if v.is_floating_point())
    loaded = Translator.load(half)
    for (name, p), q in zip(final.net.state_dict().items(), loaded.net.state_dict().values(), strict=True):
        assert q.dtype == torch.float32, name  # back to float32 on load
        torch.testing.assert_close(q, p, rtol=1e-3, atol=1e-3, msg=name)
    assert len(_texts(loaded)) == len(SENTENCES)
    assert translate_main(["--model", str(half), "ma pipo deko"]) == 0
    assert capsys.readouterr().out.count("\n") == 1
    # a model file re-exported in place: float32 again (the halved values)
    assert export_main([str(half), str(half)]) == 0
    err = capsys.readouterr().err
    assert "from model file" in err
    assert (
        f"text-export: note: half.pt stores float16 weights: {half} holds them as float32, the same values at "
        "twice the size (--half keeps float16)" in err
    )
    again = torch.load(half, weights_only=True)["state_dict"]
    assert all(v.dtype == torch.float32 and torch.equal(v, stored[k].float()) for k, v in again.items())
    assert not list(tmp_path.glob("*.part"))


def test_a_training_checkpoint_is_never_exported_over_itself(run, tmp_path, capsys):
    """In place is for model files: OUT naming the input checkpoint (itself or through a link) is refused in one line
    and the checkpoint stays whole, still a checkpoint that resumes."""
    import shutil

    ckpt = tmp_path / "b.ckpt"
    shutil.copy(run[0], ckpt)
    before = ckpt.read_bytes()
    (tmp_path / "link.ckpt").symlink_to(ckpt)
    for argv in ([str(ckpt), str(ckpt)], [str(tmp_path / "link.ckpt"), str(ckpt), "--half"]):
        with pytest.raises(SystemExit) as stop:
            export_main(argv)
        assert stop.value.code == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(f"text-export: error: OUT {ckpt} is the input, a training checkpoint"), line
        assert "resum" in line
        assert ckpt.read_bytes() == before
    assert "optimizer_states" in torch.load(ckpt, weights_only=True)
    # another checkpoint as OUT (two arguments swapped): it was replaced, its resume lost; a model file as OUT is not
    other = tmp_path / "other.ckpt"
    shutil.copy(run[0], other)
    with pytest.raises(SystemExit) as stop:
        export_main([str(ckpt), str(other)])
    (line,) = capsys.readouterr().err.splitlines()
    assert stop.value.code == 2 and line.startswith(f"text-export: error: OUT {other} is a training checkpoint"), line
    assert other.read_bytes() == before
    export_main([str(ckpt), str(tmp_path / "m.pt")])
    assert export_main([str(ckpt), str(tmp_path / "m.pt"), "--half"]) in (0, None)  # a model file is replaced


def test_half_keeps_tied_weights_shared(tmp_path, capsys):
    """A Transformer's output projection is its target embedding: halving must not store the matrix twice."""
    from text_attn.core.modelfile import save_model_file
    from text_attn.core.vocab import Vocabulary
    from text_attn.translation.networks import build_network, config_dict, make_config

    vocab = Vocabulary.build([["a", "b", "c"]])
    sizes = dict(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), pad_id=vocab.pad_id)
    cfg = make_config("transformer", dict(d_model=16, num_heads=2, enc_layers=1, dec_layers=1, ff_dim=32), **sizes)
    net = build_network("transformer", cfg)
    meta = dict(arch="transformer", config=config_dict(cfg), src_vocab=vocab.to_dict(), tgt_vocab=vocab.to_dict())
    save_model_file(
        tmp_path / "t.pt", "text-model", {**meta, "tokenizer": "word", "lower": True, "state_dict": net.state_dict()}
    )
    assert export_main([str(tmp_path / "t.pt"), str(tmp_path / "h.pt"), "--half"]) == 0
    sd = torch.load(tmp_path / "h.pt", weights_only=True)["state_dict"]
    assert sd["out.weight"].data_ptr() == sd["tgt_embed.weight"].data_ptr()
    Translator.load(tmp_path / "h.pt")


def test_a_checkpoint_without_metadata_cannot_be_exported(run, tmp_path, capsys):
    ckpt, _, _ = run
    old = torch.load(ckpt, weights_only=True)
    del old["model_metadata"]  # as written before text-export existed
    torch.save(old, tmp_path / "old.ckpt")
    with pytest.raises(SystemExit) as exc:
        export_main([str(tmp_path / "old.ckpt"), str(tmp_path / "out.pt")])
    err = _one_error_line(capsys, exc, "text-export")
    assert "old.ckpt" in err and "older version" in err and "cannot be exported" in err
    assert not (tmp_path / "out.pt").exists()


class _Code:
    """A pickled object: what ``weights_only`` refuses to load."""


def test_inputs_that_are_not_text_checkpoints_or_model_files(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "pairs.tsv").write_text("Ein Hund.\tA dog.\n")  # "E": a byte torch's weights-only reader does not know
    (tmp_path / "empty.pt").write_bytes(b"")
    torch.save({"a": torch.zeros(1), "code": _Code()}, tmp_path / "code.pt")  # an object: code to run when read
    torch.save({"a": torch.zeros(1)}, tmp_path / "plain.pt")
    torch.save({"format": "attention-toolkit/caption-model", "version": 1, "state_dict": {}}, tmp_path / "cap.pt")
    caption_ckpt = {
        "state_dict": {"model.w": torch.zeros(1)},
        "pytorch-lightning_version": "2.6.0",
        "hyper_parameters": {},
    }
    torch.save(caption_ckpt, tmp_path / "cap.ckpt")
    cases = [
        ("missing.ckpt", "no such file"),
        ("notes.txt", "not a checkpoint or model file: 6 bytes that torch cannot read as one"),
        ("pairs.tsv", "not a checkpoint or model file: 17 bytes that torch cannot read as one"),  # said code
        ("empty.pt", "not a checkpoint or model file: an empty file"),  # the exception's name (EOFError) said nothing
        ("code.pt", "refused: it holds more than tensors and plain values"),
        ("plain.pt", "neither a text-train checkpoint nor a text model file"),
        ("cap.pt", "expected a text-model file, found a caption-model file"),
        ("cap.ckpt", "caption-train checkpoint"),
    ]
    for name, msg in cases:
        with pytest.raises(SystemExit) as exc:
            export_main([str(tmp_path / name), str(tmp_path / "out.pt")])
        err = _one_error_line(capsys, exc, "text-export")
        assert name in err and msg in err, err
        if name in ("notes.txt", "pairs.tsv"):  # a text file is no torn checkpoint: no such hint
            assert err.endswith("cannot read as one"), err
    (tmp_path / "torn.pt").write_bytes((tmp_path / "plain.pt").read_bytes()[:60])
    with pytest.raises(SystemExit) as exc:
        export_main([str(tmp_path / "torn.pt"), str(tmp_path / "out.pt")])
    assert _one_error_line(capsys, exc, "text-export").endswith("(cut off by a copy or a full disk?)")
    assert "caption-export" in err  # the caption checkpoint: which command exports it
    assert not (tmp_path / "out.pt").exists()
    with pytest.raises(ModelFileError):
        export_checkpoint(tmp_path / "plain.pt", tmp_path / "out.pt")
    # whole files of another kind that start as torch's do: not "cut off", and torch's warning of a pickle protocol
    # it does not write (two lines before the refusal) is not shown
    import pickle
    import zipfile

    (tmp_path / "dict.pt").write_bytes(pickle.dumps({"a": 1}, protocol=4))
    with zipfile.ZipFile(tmp_path / "photos.zip", "w") as archive:
        archive.writestr("a.txt", "hello")
    for name, what in (("dict.pt", "a Python pickle torch did not write"), ("photos.zip", "a zip archive torch did "
                                                                                          "not write")):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            export_main([str(tmp_path / name), str(tmp_path / "out.pt")])
        assert _one_error_line(capsys, exc, "text-export").endswith(f" bytes, {what}")
    # a damaged pickle whose length field says 2**62 bytes: a MemoryError traceback where a line was (review)
    (tmp_path / "bomb.pt").write_bytes(b"\x80\x04\x8e" + (2**62).to_bytes(8, "little") + b"xx")
    with pytest.raises(SystemExit) as exc:
        export_main([str(tmp_path / "bomb.pt"), str(tmp_path / "out.pt")])
    assert _one_error_line(capsys, exc, "text-export").endswith("13 bytes that torch cannot read as one (cut off by a "
                                                                "copy or a full disk?)")  # fmt: skip


def test_an_out_ending_in_a_slash_is_refused_and_a_file_of_that_name_kept(tmp_path, capsys):
    """``text-export m.pt newdir/`` wrote a file ``newdir`` (a later mkdir failed); ``victim.pt/`` replaced the model
    file victim.pt, exit 0 both: Path drops the slash."""
    (tmp_path / "victim.pt").write_bytes(b"another model")
    for out in (tmp_path / "newdir", tmp_path / "victim.pt"):
        with pytest.raises(SystemExit) as exc:
            export_main(["transformer", f"{out}/"])
        assert _one_error_line(capsys, exc, "text-export").endswith(f"{out}/ ends in a slash, a folder's name: give "
                                                                    "a file path")  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim.pt"]
    assert (tmp_path / "victim.pt").read_bytes() == b"another model"


def test_unwritable_output_is_one_line(run, tmp_path, capsys):
    ckpt, _, _ = run
    (tmp_path / "afile").write_text("")
    with pytest.raises(SystemExit) as exc:
        export_main([str(ckpt), str(tmp_path / "afile" / "m.pt")])
    assert "cannot write" in _one_error_line(capsys, exc, "text-export")


def test_help_names_translate(capsys):
    with pytest.raises(SystemExit) as exc:
        export_main(["--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and "translate --model" in out and "--half" in out


def test_info_merges_facts_that_translate_model_info_shows(tmp_path, capsys):
    """caption-export had --info FILE and text-export had not: a model's data, terms and chosen decoding could be
    given to a caption model only. The same reader and checks (text_attn.core.info_file); `translate --model-info`
    says what was given, and the decoding is the file's default."""
    import json

    from helpers.tiny_translator import tiny_word_model_file

    model = tiny_word_model_file(tmp_path / "m.pt")  # 6 words + <pad> <bos> <eos> <unk>
    facts = {"training_data": "my own pairs", "terms": "mine to share", "decoding": {"beam_size": 2}}
    (tmp_path / "info.json").write_text(json.dumps(facts))
    assert export_main([str(model), "out.pt", "--info", "info.json"]) == 0
    assert Translator.load("out.pt").info == facts and Translator.load("out.pt").decoding()["beam_size"] == 2
    capsys.readouterr()
    assert translate_main(["--model", "out.pt", "--model-info"]) == 0
    shown = capsys.readouterr().out.splitlines()
    for line in ("training data:  my own pairs", "terms:          mine to share", "decoding:       beam_size 2"):
        assert line in shown, shown
    # "decoding": null removes a recorded one; the others stay
    (tmp_path / "none.json").write_text('{"decoding": null}')
    assert export_main(["out.pt", "again.pt", "--info", "none.json"]) == 0
    assert Translator.load("again.pt").info == {k: v for k, v in facts.items() if k != "decoding"}
    capsys.readouterr()
    # a decoding no translate run could use is refused before anything is written, as caption-export refuses it
    (tmp_path / "wide.json").write_text('{"decoding": {"beam_size": 11}}')
    with pytest.raises(SystemExit) as exc:
        export_main([str(model), "wide.pt", "--info", "wide.json"])
    assert _one_error_line(capsys, exc, "text-export") == (
        'text-export: error: --info wide.json: its "decoding" cannot be used with this model: beam_size 11 is more '
        "than the model's 10 words: at most 10"
    )
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(SystemExit) as exc:
        export_main([str(model), "list.pt", "--info", "list.json"])
    said = _one_error_line(capsys, exc, "text-export")
    assert said == "text-export: error: --info list.json: expected a JSON object, got an array"  # was "got list"
    for text, kind in (("null", "null"), ('"x"', "a string"), ("3", "a number")):  # were NoneType, str, int
        (tmp_path / "other.json").write_text(text)
        with pytest.raises(SystemExit) as exc:
            export_main([str(model), "list.pt", "--info", "other.json"])
        assert _one_error_line(capsys, exc, "text-export").endswith(f"expected a JSON object, got {kind}")
    assert not list(tmp_path.glob("wide.pt*")) and not list(tmp_path.glob("list.pt*"))


def test_translate_given_a_checkpoint_names_the_export_command(run, tmp_path, capsys):
    ckpt, _, _ = run
    with pytest.raises(SystemExit) as exc:
        translate_main(["--model", str(ckpt), "ma pipo"])
    err = _one_error_line(capsys, exc, "translate")
    assert "training checkpoint, not a model file" in err and f"text-export {ckpt} model.pt" in err
    # judged by content, not by name; a path with a space is quoted so the command can be pasted
    spaced = tmp_path / "my run" / "weights.pt"
    spaced.parent.mkdir()
    spaced.write_bytes(ckpt.read_bytes())
    with pytest.raises(SystemExit) as exc:
        translate_main(["--model", str(spaced), "ma pipo"])
    assert f"text-export '{spaced}' model.pt" in _one_error_line(capsys, exc, "translate")


def test_caption_given_a_checkpoint_names_the_export_command(tmp_path, capsys):
    from captioning.commands.caption import caption_main

    fake = tmp_path / "last.ckpt"
    (tmp_path / "x.png").write_bytes(b"")  # there: IMAGE arguments none of which exists are refused before the model
    torch.save({"state_dict": {}, "pytorch-lightning_version": "2.6.0", "hyper_parameters": {}}, fake)
    with pytest.raises(SystemExit) as exc:
        caption_main(["x.png", "--model", str(fake)])
    err = _one_error_line(capsys, exc, "caption")
    assert "training checkpoint, not a model file" in err and f"caption-export {fake} model.pt" in err
    # a text-train checkpoint given to caption: named as such, with the command that does export it
    torch.save({"state_dict": {"net.w": torch.zeros(1)}, "hyper_parameters": {}}, fake)
    with pytest.raises(SystemExit) as exc:
        caption_main(["x.png", "--model", str(fake)])
    err = _one_error_line(capsys, exc, "caption")
    assert "text-train checkpoint, not a caption-model file" in err and "text-export" in err


def test_average_writes_the_mean_of_the_epochs_weights(tmp_path, capsys):
    """Checkpoint averaging: one fit saves each epoch's weights (weights-only checkpoints, as the Multi30k
    Transformer config does); ``--average`` writes their mean, element by element, and the file translates."""
    cb = (
        '[{"class_path": "pytorch_lightning.callbacks.ModelCheckpoint", "init_args": {"save_top_k": -1, '
        '"every_n_epochs": 1, "save_weights_only": true, "filename": "epoch-{epoch}"}}]'
    )
    args = ["fit", "--config", CONFIG, "--trainer.enable_checkpointing", "true", "--trainer.max_steps", "-1"]
    args += ["--trainer.max_epochs", "3", "--trainer.limit_train_batches", "2", "--trainer.callbacks", cb]
    text_train_cli(args + ["--trainer.default_root_dir", str(tmp_path), "--model.export_path", str(tmp_path / "m.pt")])
    ckpts = [next(tmp_path.rglob(f"epoch-epoch={e}.ckpt")) for e in range(3)]
    states = [torch.load(c, weights_only=True)["state_dict"] for c in ckpts]
    assert any(not torch.equal(states[0][k], v) for k, v in states[2].items())  # the weights moved between epochs
    capsys.readouterr()
    out = tmp_path / "avg.pt"
    assert export_main([str(ckpts[2]), str(out), "--average", str(ckpts[0]), str(ckpts[1])]) == 0
    assert f"averaged with {ckpts[0]} {ckpts[1]}: " in capsys.readouterr().err
    data = load_model_file(out, "text-model")
    for k, v in data["state_dict"].items():
        mean = sum(s["net." + k] for s in states) / 3
        torch.testing.assert_close(v, mean, rtol=0, atol=1e-6, msg=k)
    assert len(_texts(Translator.load(out))) == len(SENTENCES)
    # a model file among them: the same model (its format tags are no setting), its weights averaged too
    assert export_main([str(ckpts[2]), str(tmp_path / "mixed.pt"), "--average", str(out)]) == 0
    mixed = load_model_file(tmp_path / "mixed.pt", "text-model")["state_dict"]
    for k, v in mixed.items():
        torch.testing.assert_close(v, (states[2]["net." + k] + data["state_dict"][k]) / 2, rtol=0, atol=1e-6, msg=k)
    # a --half file first: the mean of its float16 values and float32 ones was rounded to float16 (and said to be
    # "the same values at twice the size"); it is a float32 mean now, as with the float32 file first
    assert export_main([str(out), str(tmp_path / "h.pt"), "--half"]) == 0
    half = load_model_file(tmp_path / "h.pt", "text-model")["state_dict"]
    capsys.readouterr()
    assert export_main([str(tmp_path / "h.pt"), str(tmp_path / "hm.pt"), "--average", str(ckpts[2])]) == 0
    said = capsys.readouterr().err  # the file read stores float16; the mean is float32 at twice the size: said so
    assert "the same values" not in said and "h.pt stores float16 weights: " in said
    assert "holds the mean as float32" in said
    halfmean = load_model_file(tmp_path / "hm.pt", "text-model")["state_dict"]
    for k, v in halfmean.items():
        want = (half[k].double() + states[2]["net." + k].double()) / 2
        assert v.dtype == torch.float32 and torch.allclose(v.double(), want, rtol=0, atol=2e-6), k  # float16: 1e-3


def test_average_refuses_another_model(run, tmp_path, capsys):
    ckpt, _, _ = run
    other = tmp_path / "other"
    text_train_cli(
        ["fit", "--config", CONFIG, "--trainer.enable_checkpointing", "true", "--model.network.dec_hidden", "24"]
        + ["--trainer.default_root_dir", str(other), "--model.export_path", str(other / "m.pt")]
    )
    (other_ckpt,) = other.rglob("*.ckpt")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        export_main([str(ckpt), str(tmp_path / "avg.pt"), "--average", str(other_ckpt)])
    err = _one_error_line(capsys, exc, "text-export")
    assert str(other_ckpt) in err and "not the same model" in err
    assert err.endswith(f"(its network's dec_hidden is 24, {Path(ckpt).name}'s 32)")  # the setting that differs, named
    assert not (tmp_path / "avg.pt").exists()


def test_average_takes_a_bundled_model_by_name_as_checkpoint_does(run, tmp_path, monkeypatch, capsys):
    """`--average transformer` said "transformer: no such file" though CHECKPOINT takes the name; named as typed."""
    from text_attn.translation import bundled

    ckpt, _, model_file = run
    monkeypatch.setattr(bundled, "MODEL_NAMES", {**bundled.MODEL_NAMES, "mine": Path(model_file)})
    monkeypatch.chdir(tmp_path)  # no file called "mine" here: the name is the bundled one's
    assert export_main([str(ckpt), "avg.pt", "--average", "mine"]) == 0
    assert "averaged with mine: " in capsys.readouterr().err
    data = load_model_file(tmp_path / "avg.pt", "text-model")
    assert data["info"]["averaged"].startswith("the mean of the weights of 2 files by text-export --average: ")
    assert data["info"]["averaged"].split(": ")[1].split(";")[0] == f"{Path(ckpt).name}, mine"
    own = load_model_file(model_file, "text-model")["state_dict"]  # the checkpoint's weights, exported: mean = same
    for k, v in data["state_dict"].items():
        torch.testing.assert_close(v, own[k], rtol=0, atol=1e-6, msg=k)
    # the bundled GRU with the bundled Transformer: the architecture named (it named the first setting that differed,
    # "its network's src_vocab_size is 5319, multi30k_de_en.pt's 7549", as if one setting were off)
    with pytest.raises(SystemExit) as exc:
        export_main(["transformer", "x.pt", "--average", "bahdanau"])
    err = _one_error_line(capsys, exc, "text-export")
    assert err.endswith("(it is an RNN encoder-decoder, multi30k_de_en.pt a Transformer)"), err


def test_average_blends_a_model_with_the_one_whose_vocabulary_it_extended(tmp_path, capsys):
    """A fit that started from a model and added words (model.init_vocab: extend, as configs/text/your_pairs.yaml
    does) blended back towards it: `--average START --weights W 1-W`. The rows both have are the weighted mean, the
    added words' rows the fit's own; START given first is refused (its smaller vocabulary would lose them)."""
    base, ext = tmp_path / "base.pt", tmp_path / "ext.pt"
    text_train_cli(["fit", "--config", CONFIG, "--trainer.max_steps", "2", "--model.export_path", str(base)])
    pairs = tmp_path / "p.tsv"
    words = ["ma", "pipo", "deko", "ro", "zuzu", "zaza"]  # zuzu, zaza: words the tiny task never had
    orders = list(itertools.permutations(words, 4))[:40]  # 40 different pairs: a sentence and its reverse
    pairs.write_text("".join(f"{' '.join(o)}\t{' '.join(reversed(o))}\n" for o in orders))
    text_train_cli(["fit", "--config", CONFIG, "--trainer.max_steps", "2", "--model.init_from", str(base),
                    "--model.init_vocab", "extend", "--data.task", "tsv", "--data.path", str(pairs), "--data.min_freq",
                    "1", "--data.val_size", "4", "--data.test_size", "4", "--model.export_path", str(ext)])  # fmt: skip
    capsys.readouterr()
    out = tmp_path / "blend.pt"
    assert export_main([str(ext), str(out), "--average", str(base), "--weights", "0.25", "0.75"]) == 0
    assert f"averaged with {base} (weights 0.25 0.75): " in capsys.readouterr().err
    a, b = (load_model_file(f, "text-model") for f in (ext, base))
    blended = load_model_file(out, "text-model")
    assert blended["src_vocab"] == a["src_vocab"] and blended["config"] == a["config"]
    grew = 0
    for k, v in blended["state_dict"].items():
        mine, theirs = a["state_dict"][k], b["state_dict"][k]
        n = theirs.shape[0] if theirs.dim() else 1
        expected = mine.clone()
        expected[:n] = 0.25 * mine[:n] + 0.75 * theirs
        grew += mine.shape != theirs.shape
        torch.testing.assert_close(v, expected, rtol=0, atol=1e-6, msg=k)
    assert grew >= 3  # the source and target embeddings and the output layer: the added words' rows are the fit's
    record = "the mean of the weights of 2 files by text-export --average: ext.pt, base.pt (weighted 0.25, 0.75)"
    assert blended["info"]["averaged"].startswith(record)
    assert len(Translator.load(out).translate(["zuzu ma pipo"])) == 1
    with pytest.raises(SystemExit) as exc:
        export_main([str(base), str(tmp_path / "no.pt"), "--average", str(ext)])
    said = _one_error_line(capsys, exc, "text-export")
    assert said.endswith(f"{ext}: not the same model as {base} (its vocabulary extends base.pt's: give it first, as "
                         "CHECKPOINT)")  # fmt: skip
    assert not (tmp_path / "no.pt").exists()


@pytest.mark.parametrize(
    ("extra", "said"),
    [(["--weights", "1", "2"], "--weights: needs --average (the models whose mean they weigh)"),
     (["--average", "m.pt", "--weights", "1"], "--weights: 1 given for 2 models (CHECKPOINT and 1 --average); one "
      "each, CHECKPOINT's first"),
     (["--average", "m.pt", "--weights", "0", "1"], "--weights 0 1: each above 0"),
     (["--average", "m.pt", "--weights", "1", "-1"], "--weights 1 -1: each above 0"),
     (["--average", "m.pt", "--weights", "nan", "1"], "argument --weights: expected a finite number, got 'nan' (see "
      "text-export --help)")],
)  # fmt: skip
def test_weights_that_cannot_weigh_the_models_are_one_line(extra, said, tmp_path, capsys):
    (tmp_path / "m.pt").write_bytes(b"not read: the weights are refused first")
    with pytest.raises(SystemExit) as exc:
        export_main([str(tmp_path / "m.pt"), str(tmp_path / "out.pt"), *extra])
    assert _one_error_line(capsys, exc, "text-export") == f"text-export: error: {said}"
    assert not (tmp_path / "out.pt").exists()
