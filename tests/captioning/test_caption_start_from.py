"""A run started from a trained captioner (``model.init_from``) on data whose words differ from its own: the start's
words keep their ids, the new words are added after them (``model.init_vocab: extend``) with rows that start as the mean
of the old rows, or read as <unk> (``keep``); an ensemble's decoder is picked by ``model.init_member``. Checked against
hand-computed rows, the start's own captions (unchanged by the growth), and a short fit that learns a new word."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from captioning.commands.train import caption_train_cli
from captioning.model.bundled import MODEL_NAMES
from captioning.model.captioner import Captioner
from captioning.model.encoder import EncoderConfig
from captioning.model.network import CaptionModel
from captioning.training.shapes import make_scenes
from text_attn.core.metrics import coco_metrics
from text_attn.core.training import grow_rows
from text_attn.core.vocab import Vocabulary

ROOT = Path(__file__).resolve().parents[2]
SHAPES_CONFIG = ROOT / "configs/caption/shapes_soft.yaml"


def test_extended_vocabulary_keeps_ids_and_appends_new_words_in_the_other_order():
    start = Vocabulary.build([["a", "red", "circle"], ["a", "blue", "circle"]])
    data = Vocabulary.build([["a", "zorblat", "zorblat", "circle"], ["a", "quux"]])
    grown = start.extended(data)
    assert grown.itos[: len(start)] == start.itos  # every old id is the same word
    assert grown.itos[len(start) :] == ["zorblat", "quux"]  # data's order: most frequent first
    assert start.extended(start) == start and start.extended(Vocabulary.build([["red"]])) == start


def test_grow_rows_appends_the_mean_row_to_vocabulary_sized_weights_only():
    saved = {"emb": torch.tensor([[1.0, 2.0], [3.0, 6.0], [5.0, 1.0]]), "bias": torch.tensor([0.0, 3.0, 6.0]),
             "other": torch.ones(3, 4)}  # fmt: skip
    own = {"emb": torch.zeros(5, 2), "bias": torch.zeros(5), "other": torch.zeros(3, 4)}
    grown = grow_rows(own, saved, 3, 5)
    assert torch.equal(grown["emb"][:3], saved["emb"]) and torch.equal(grown["bias"][:3], saved["bias"])
    assert grown["emb"][3:].tolist() == [[3.0, 3.0], [3.0, 3.0]] and grown["bias"][3:].tolist() == [3.0, 3.0]
    assert grown["other"] is saved["other"]  # not vocabulary-sized here: untouched
    # an output layer's new row scores every context with the old words' mean logit
    h = torch.tensor([0.5, -2.0])
    logits = grown["emb"] @ h + grown["bias"]
    assert logits[3] == pytest.approx(float((saved["emb"] @ h + saved["bias"]).mean()))


def test_grown_start_captions_as_the_start_did():
    """The new words' rows (the mean of the old ones) never win a step: the start's captions, ids and attention stay."""
    start = Captioner.load(MODEL_NAMES["shapes"])
    grown_vocab = start.vocab.extended(Vocabulary.build([["zorblat", "quux", "a", "circle"]]))
    assert len(grown_vocab) == len(start.vocab) + 2
    encoder = EncoderConfig(**start.model.encoder.config(), weights=None)  # the file's weights are loaded below
    model = CaptionModel.build(len(grown_vocab), encoder, replace(start.model.decoder.cfg, vocab_size=len(grown_vocab)))
    Captioner.start_weights(MODEL_NAMES["shapes"], model, grown_vocab)
    grown = Captioner(model.eval(), grown_vocab)
    photos = [scene.image for scene in make_scenes(6, seed=11)]
    for beam in (1, 3):
        before = start.caption_images(photos, beam_size=beam)
        after = grown.caption_images(photos, beam_size=beam)
        assert [c.words for c in after] == [c.words for c in before]
        assert all(torch.allclose(a.alphas, b.alphas, atol=1e-6) for a, b in zip(after, before, strict=True))


@pytest.fixture
def shapes_folder(cli_run_in_tmp):
    """Twelve shapes scenes as PNG files and a captions file whose every caption starts with a word the bundled shapes
    model does not know ("zorblat"); "quux" once (seen fewer than data.min_freq 2 times)."""
    folder = cli_run_in_tmp / "photos"
    folder.mkdir()
    lines = []
    for i, scene in enumerate(make_scenes(12, seed=5)):
        scene.image.save(folder / f"scene{i}.png")
        lines.append(f"scene{i}.png\tzorblat {' '.join(scene.captions[0])}{' quux' if i == 0 else ''}")
    (cli_run_in_tmp / "captions.tsv").write_text("\n".join(lines) + "\n")
    return cli_run_in_tmp


def _fit(init_vocab: str, steps: int, lr: float = 0.003, more: tuple[str, ...] = ()) -> object:
    return caption_train_cli([
        "fit", "--config", str(SHAPES_CONFIG), "--data.source", "folder", "--data.image_dir", "photos",
        "--data.captions_tsv", "captions.tsv", "--data.attention_targets", "false", "--data.val_size", "2",
        "--data.test_size", "0", "--data.min_freq", "2", "--data.captions_per_image", "1", "--data.batch_size", "10",
        "--model.objective.attn_sup_lambda", "0",
        "--model.init_from", "shapes", "--model.init_vocab", init_vocab, "--model.lr", str(lr),
        "--trainer.max_steps", str(steps), "--trainer.max_time", "null", "--trainer.check_val_every_n_epoch", "1000",
        "--trainer.enable_progress_bar", "false", "--trainer.default_root_dir", "runs",
        "--model.export_path", "runs/model.pt", *more,
    ])  # fmt: skip


@pytest.mark.long
def test_fit_from_a_model_learns_a_new_word(shapes_folder, capsys):
    # the start validated before the first step (as your_photos.yaml does), then every 12 steps (an epoch is a step)
    validated = ("--trainer.num_sanity_val_steps", "-1", "--trainer.check_val_every_n_epoch", "12")
    cli = _fit("extend", steps=24, lr=0.006, more=validated)
    err = capsys.readouterr().err
    start = Captioner.load(MODEL_NAMES["shapes"])
    assert (
        f"model.init_from shapes: its {len(start.vocab)} words kept at their ids; 1 words of the train captions added "
        "(zorblat)" in err
    ), err
    assert "1 other words (quux) seen fewer than data.min_freq=2 times: read as <unk>" in err
    fitted = Captioner.load("runs/model.pt")
    assert fitted.vocab.itos == [*start.vocab.itos, "zorblat"] == cli.datamodule.vocab.itos
    train = cli.datamodule.splits["train"].images
    said = [c.words for c in fitted.caption_images(train[:4], beam_size=1)]
    assert all(words[0] == "zorblat" for words in said), said  # the start never said it; 24 steps taught it
    assert "started_from" in fitted.info and "terms" not in fitted.info  # the shapes model's data has no terms
    # fit's end: the start's val score (the sanity check's, before any step) against the best checkpoint's
    line = next(x for x in err.splitlines() if "before training" in x)
    before, best = (float(v) for v in re.findall(r"(\d+\.\d+) (?:from|at)", line))
    assert line.startswith("caption-train: val_Bleu_4: ") and ("did not beat" in line) == (best <= before), line
    assert " from model.init_from shapes before training, " in line, line
    val = cli.datamodule.splits["val"]
    said = start.caption_images(val.images, beam_size=1, max_len=32)  # the start's greedy val captions, as fit's
    refs = {i: [" ".join(r) for r in rs] for i, rs in enumerate(val.references)}
    score = coco_metrics(refs, {i: " ".join(c.words) for i, c in enumerate(said)}, meteor=False)["Bleu_4"]
    assert before == pytest.approx(100 * score, abs=0.01)


@pytest.mark.long
def test_a_start_written_with_typographic_apostrophes_keeps_its_trained_word(shapes_folder, capsys):
    """A model trained before the captions' ’ were read as ' holds "cir’cle"; the train captions' "cir'cle" (and
    "cir’cle", read so) was added as a new untrained word beside it. Its word is renamed at its own id instead."""
    from captioning.model.reading import folded_vocabulary, reads_apostrophes_folded

    start = Captioner.load(MODEL_NAMES["shapes"])
    old = Vocabulary([w.replace("circle", "cir’cle") for w in start.vocab.itos])
    Captioner(start.model, old).save("start.pt")
    captions = Path("captions.tsv").read_text().replace("circle", "cir'cle").replace("cir'cle", "cir’cle", 1)
    Path("captions.tsv").write_text(captions)
    assert "cir'cle" in captions and "cir’cle" in captions  # both forms: read as one word
    cli = _fit("extend", steps=1, more=("--model.init_from", "start.pt"))
    fitted = Captioner.load("runs/model.pt")
    circle = start.vocab.stoi["circle"]
    renamed = [w.replace("’", "'") for w in old.itos]  # the start's trained row, its captions' word
    assert fitted.vocab.itos == [*renamed, "zorblat"] and renamed[circle] == "cir'cle"
    assert reads_apostrophes_folded(fitted.vocab)
    assert any(circle in ids for _, ids in cli.datamodule._train_pairs)
    assert (
        f"its {len(old)} words kept at their ids (1 written with ’ or ‘ read with ' as the captions are: cir’cle); "
        "1 words of the train captions added (zorblat)" in capsys.readouterr().err
    )
    # a start that holds both forms: its "x'y" keeps that name, "x’y" its own (it then reads captions as written)
    both = Vocabulary([*start.vocab.itos, "l’eau", "l'eau", "d‘un"])
    assert folded_vocabulary(both) == (Vocabulary([*start.vocab.itos, "l’eau", "l'eau", "d'un"]), ["d‘un"])


@pytest.mark.long
def test_a_fit_with_a_new_word_blends_back_with_its_start(shapes_folder, capsys):
    """caption-export FIT OUT --average shapes --weights 0.25 0.75 (a real fit's model file, its facts and domain
    check included; an average's check: test_fine_tuned_export): the old words' rows the weighted mean, zorblat's the
    fit's, and `caption` reads the blend."""
    from captioning.commands.caption import caption_main
    from captioning.commands.export import export_main

    _fit("extend", steps=2, lr=0.01)
    assert export_main(["runs/model.pt", "blended.pt", "--average", "shapes", "--weights", "0.25", "0.75"]) == 0
    fit, start, blend = (Captioner.load(p) for p in ("runs/model.pt", MODEL_NAMES["shapes"], "blended.pt"))
    assert blend.vocab.itos == fit.vocab.itos == [*start.vocab.itos, "zorblat"]
    f, s, b = (c.model.decoder.state_dict() for c in (fit, start, blend))
    moved = 0
    for k in f:
        rows = s[k].shape[0]  # the start's words; the output layer and embedding have one more row in the fit
        torch.testing.assert_close(b[k][:rows], 0.25 * f[k][:rows] + 0.75 * s[k], rtol=1e-6, atol=1e-6)
        assert torch.equal(b[k][rows:], f[k][rows:])
        moved += not torch.equal(f[k], s[k][: f[k].shape[0]])
    assert moved, "two steps at 0.01 changed no decoder weight"
    # the fit's check, which ten shape scenes make none (too few for a feature check; drawings: no pixel rules)
    assert fit.domain_check is None and blend.domain_check == fit.domain_check
    assert blend.info["averaged"].endswith("(weighted 0.25, 0.75)")
    capsys.readouterr()
    assert caption_main(["--model", "blended.pt", "photos/scene0.png", "--beam-size", "1"]) == 0
    assert capsys.readouterr().out.strip()
    assert caption_main(["--model", "blended.pt", "--model-info"]) == 0
    assert "the mean of the weights of 2 files: model.pt, shapes (weighted 0.25, 0.75)" in capsys.readouterr().out


@pytest.mark.long
def test_fit_that_keeps_the_vocabulary_reads_new_words_as_unknown(shapes_folder, capsys):
    cli = _fit("keep", steps=1)
    err = capsys.readouterr().err
    start = Captioner.load(MODEL_NAMES["shapes"])
    assert "2 other words (zorblat, quux) not among them: read as <unk> (model.init_vocab: extend adds them)" in err
    dm = cli.datamodule
    assert dm.vocab == start.vocab and Captioner.load("runs/model.pt").vocab == start.vocab
    assert all(ids[0] == start.vocab.unk_id for _, ids in dm._train_pairs)  # "zorblat" -> <unk>
    # a checkpoint exported by hand says where the run started, as fit's own model file does
    from captioning.commands.export import export_main

    ckpt = next(Path("runs").rglob("*.ckpt"))
    assert export_main([str(ckpt), "exported.pt"]) == 0
    fitted = Captioner.load("runs/model.pt").info
    assert "started_from" in fitted and Captioner.load("exported.pt").info == fitted


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model.init_from", "flickr8k"], "flickr8k is an ensemble of 2 decoders: model.init_member K picks"),
        (["--model.init_from", "flickr8k", "--model.init_member", "3"], "model.init_member: 3: flickr8k has decoders"),
        (["--model.init_from", "shapes", "--model.init_member", "2"], "2: shapes has one decoder, not an ensemble"),
        (["--model.init_member", "1"], "model.init_member picks a decoder of model.init_from's ensemble"),
        (["--model.init_from", "shapes", "--model.init_vocab", "grow"], "model.init_vocab must be one of extend, keep"),
        (["--model.init_from", "nowhere.pt"], "model.init_from: nowhere.pt: no such file"),
        (["--model.init_from", "."], "model.init_from: . is a folder: give a model file or a .ckpt in it"),  # "no such"
    ],
)
def test_bad_starts_are_one_line(args, message, cli_run_in_tmp, capsys):
    base = ["fit", "--config", str(ROOT / "tests/fixtures/captions/tiny_shapes.yaml")]
    with pytest.raises(SystemExit) as exc:
        caption_train_cli([*base, *args])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and message in err and len(err.splitlines()) == 1, err


def test_a_checkpoint_start_keeps_its_facts_and_a_path_is_recorded_by_its_file_name(tmp_path):
    from text_attn.core.training import started_from

    ckpt = tmp_path / "runs" / "a" / "last.ckpt"
    ckpt.parent.mkdir(parents=True)
    vocab = Vocabulary.build([["a", "b"]])
    facts = {"training_data": "Flickr8k and mine", "terms": "Flickr8k: non-commercial research only"}
    torch.save({"state_dict": {"model.w": torch.zeros(1)}, "vocab": vocab.to_dict(), "info": facts}, ckpt)
    start = Captioner.read_start(str(ckpt))
    assert start.info == facts  # a stage started from a checkpoint keeps the data's terms (it dropped them)
    assert started_from(start.name, start.info) == {
        "started_from": "last.ckpt, trained on Flickr8k and mine",
        "terms": facts["terms"],
    }  # no machine's folders in a model file


def test_a_cut_off_empty_or_damaged_checkpoint_start_is_one_line(tmp_path):
    """A cut-off .ckpt as model.init_from was torch's 40-line traceback (an empty one a bare EOFError), after the data
    was read; a damaged one was trained from."""
    ckpt = tmp_path / "whole.ckpt"
    vocab = Vocabulary.build([["a", "b"]])
    torch.save({"state_dict": {"model.w": torch.arange(50_000.0)}, "vocab": vocab.to_dict()}, ckpt)
    data = ckpt.read_bytes()
    (tmp_path / "cut.ckpt").write_bytes(data[: len(data) // 2])
    (tmp_path / "empty.ckpt").write_bytes(b"")
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    (tmp_path / "flipped.ckpt").write_bytes(bytes(flipped))
    for name, says in (("cut", "cut off by a copy or a full disk?"), ("empty", "an empty file"),
                       ("flipped", "damaged: its part")):  # fmt: skip
        with pytest.raises(ValueError, match=f"^model.init_from: .*{name}.ckpt: .*{re.escape(says)}") as err:
            Captioner.read_start(str(tmp_path / f"{name}.ckpt"))
        assert "\n" not in str(err.value)


@pytest.mark.long
def test_a_sanity_check_over_part_of_the_val_split_gives_no_start_score_to_compare(shapes_folder, capsys):
    """A sanity check of 1 of the 2 val batches: the start's score on one photo was compared with the best
    checkpoint's on both and could say "training did not beat the start"; now fit's end says no comparable score was
    taken, and how to take one."""
    one_of_two = ("--data.batch_size", "1", "--trainer.num_sanity_val_steps", "1", "--trainer.check_val_every_n_epoch",
                  "null", "--trainer.val_check_interval", "1")  # fmt: skip
    cli = _fit("extend", steps=1, more=one_of_two)
    err = capsys.readouterr().err
    assert cli.trainer.num_val_batches == [2]
    assert " from model.init_from shapes before training" not in err and "did not beat" not in err
    (line,) = [x for x in err.splitlines() if "no start score" in x]
    best = 100 * float(cli.trainer.checkpoint_callback.best_model_score)
    assert line == (
        f"caption-train: val_Bleu_4: {best:.2f} at the best checkpoint (as 0-100; logged as a fraction, 0-1); no start "
        "score to compare: the sanity check validated model.init_from shapes on 1 of the 2 val batches "
        "(trainer.num_sanity_val_steps -1 validates the whole split before training)"
    )


@pytest.mark.parametrize(
    ("changed", "named", "weight"),
    [
        ({"hidden_dim": 128}, "model.decoder.hidden_dim 128 here, 256 in the file",
         "decoder.attention.query_proj.weight: (128, 256) in the file, (128, 128) here"),
        ({"attention": "hard"}, "model.decoder.attention hard here, soft in the file",
         "decoder.attention.key_proj.bias: only in the file"),
    ],
)  # fmt: skip
def test_a_start_that_does_not_fit_names_the_options_not_only_a_weight(changed, named, weight):
    """The weight's name alone meant nothing to someone who gave --model.decoder.hidden_dim; a setting that shapes no
    weight (dropout) is not named."""
    start = Captioner.load(MODEL_NAMES["shapes"])
    encoder = EncoderConfig(**start.model.encoder.config(), weights=None)
    decoder = replace(start.model.decoder.cfg, dropout=0.3, **changed)
    model = CaptionModel.build(len(start.vocab), encoder, decoder)
    with pytest.raises(ValueError) as exc:
        Captioner.start_weights("shapes", model, start.vocab)
    assert str(exc.value) == (
        f"model.init_from: shapes does not fit this config's network: {named}: give the file's values ({weight})"
    )


def test_the_vocabulary_line_counts_the_captions_trained_on():
    """data.captions_per_image 1 trains on each scene's first caption: the words of its others ("there", "is") were
    said to be "seen fewer than data.min_freq=1 times" (they occur in most scenes)."""
    from captioning.training.data import CaptionDataModule
    from captioning.training.module import vocabulary_line

    dm = CaptionDataModule(source="shapes", train_size=20, val_size=2, test_size=2, captions_per_image=1)
    dm.setup("fit")
    start = Captioner.read_start("shapes")
    others = {w for caps in dm.train_references for cap in caps[1:] for w in cap} - set(dm.vocab.itos)
    assert others  # words only the captions not trained on hold
    line = vocabulary_line(start, start.vocab.extended(dm.vocab), dm, extend=True)
    assert line == f"model.init_from shapes: its {len(start.vocab)} words kept at their ids; no new word"


def test_a_second_stage_records_where_its_start_started(tmp_path):
    """A stage started from a model that itself started from another says both: the second stage's file said only
    "started from: model.pt", and a Flickr8k split its chain learned from went unchecked."""
    from captioning.training.readers import split_clash
    from text_attn.core.modelfile import info_lines
    from text_attn.core.training import started_from

    terms = "Flickr8k: non-commercial research only"
    bundled = {"training_data": "Flickr8k (the standard split)", "terms": terms}
    first = {"trained_on": "mine", **started_from("flickr8k (decoder 1)", bundled)}
    assert "earlier_starts" not in first  # the bundled model started from nothing
    second = {"trained_on": "mine", **started_from(str(tmp_path / "xe" / "model.pt"), first)}
    assert second == {
        "trained_on": "mine",
        "started_from": "model.pt, trained on mine",
        "earlier_starts": "flickr8k (decoder 1), trained on Flickr8k (the standard split)",
        "terms": terms,
    }
    # a captioner fit on your photos records them (photos:): a model started from it says what it learned from
    photos = {"photos": "my_photos: 150 train photos (750 captions), 2 val, 2 test", "terms": terms}
    assert started_from("mine.pt", photos)["started_from"] == (
        "mine.pt, trained on my_photos: 150 train photos (750 captions), 2 val, 2 test")  # fmt: skip
    third = started_from("scst.pt", second)  # newest first
    assert third["earlier_starts"] == (
        "model.pt, trained on mine; flickr8k (decoder 1), trained on Flickr8k (the standard split)"
    )
    assert "earlier starts: model.pt, trained on mine; flickr8k (decoder 1), trained on Flickr8k (the standard " \
        "split)" in info_lines(third)  # fmt: skip
    # the split the bundled model learned from is checked through the chain: a random split's val photos were its
    clash = split_clash("model.pt", second, "a random split (seed 0)", "kaggle")
    assert clash is not None and clash.startswith("model.init_from model.pt learned from Flickr8k's photos in the "
                                                  "standard split")  # fmt: skip
    assert split_clash("model.pt", {k: v for k, v in second.items() if k != "earlier_starts"},
                       "a random split (seed 0)", "kaggle") is None  # fmt: skip
