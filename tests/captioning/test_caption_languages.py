"""Captions in German, French or Czech (``data.language``): Flickr8k's photos with the sentences Multi30k translated
from their English captions (captioning/training/multi30k.py), found by their English sentence or by an image list;
the casing of the train sentences learned, and the captions written with it (``Captioner.casing``)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch
import yaml
from helpers.flickr8k import write_original
from helpers.multi30k import write_sentences

from captioning.commands.caption import caption_main, model_info
from captioning.commands.export import export_main
from captioning.commands.train import caption_train_cli, train_main
from captioning.model.captioner import Captioner
from captioning.training.data import CaptionDataModule
from captioning.training.multi30k import in_language
from captioning.training.readers import CaptionDataError, read_flickr8k
from text_attn.core.casing import Casing, learn_casing

ROOT = Path(__file__).resolve().parents[2]
# the fixture's English captions (helpers/flickr8k.py) are "A photo of <name> ." and "The <name>, up close!"
TRAIN = [
    ("A photo of coffee.", "Ein Foto von Kaffee."),
    ("The chelsea, up close!", "Die Katze Chelsea aus der Nähe."),
    ("A dog runs through the snow.", "Ein Hund rennt durch den Schnee."),  # no Flickr8k photo's caption
]
VAL = [("A photo of rocket", "Ein Foto einer Rakete.")]


def write_multi30k(root: Path, splits: dict[str, list[tuple[str, str]]] | None = None) -> Path:
    return write_sentences(root, splits or {"train": TRAIN, "val": VAL})


@pytest.fixture
def flickr8k(tmp_path):
    return write_original(tmp_path / "f8k")


def test_sentences_find_their_photos_by_their_english(flickr8k, tmp_path):
    got = in_language(read_flickr8k(flickr8k), write_multi30k(tmp_path / "m30k"), "de")
    names = {s: [it.path.name for it in v] for s, v in got.items.items()}
    assert names == {"train": ["coffee.png", "chelsea.png"], "val": ["rocket.jpg"], "test": []}  # astronaut: none
    assert got.items["train"][0].captions == [["ein", "foto", "von", "kaffee"]]
    assert got.items["train"][1].captions == [["die", "katze", "chelsea", "aus", "der", "nähe"]]
    assert got.train_text == ["Ein Foto von Kaffee.", "Die Katze Chelsea aus der Nähe."]  # as written: their casing
    assert got.line == (
        "German captions from Multi30k for 3 of 4 Flickr8k photos, found by their English sentence (train 2, val 1, "
        "test 0); the others are left out"
    )


def test_an_english_sentence_that_two_photos_share_names_neither(flickr8k, tmp_path):
    lines = ["coffee.png#0\tA photo of coffee .", "chelsea.png#0\ta photo of coffee", "chelsea.png#1\tA cat .",
             "rocket.jpg#0\tA photo of rocket", "astronaut.png#0\tA man ."]  # fmt: skip
    items = read_flickr8k(write_original(tmp_path / "shared", token_lines=lines))
    pairs = [("A photo of coffee.", "Ein Foto von Kaffee."), ("A cat.", "Eine Katze.")]
    got = in_language(items, write_multi30k(tmp_path / "m30k", {"train": pairs, "val": VAL}), "de")
    assert [(it.path.name, it.captions) for it in got.items["train"]] == [("chelsea.png", [["eine", "katze"]])]


def test_image_lists_join_lines_to_photos_by_their_flickr_id(flickr8k, tmp_path):
    """Multi30k's image_splits name Flickr30k files (<id>.jpg); a Flickr8k file is <id>_<secret>.jpg (here the
    fixture's names: the id is the part before any '_'). The English sentences then need not match."""
    train = [("Unlike any caption.", "Ein Astronaut."), ("Nor this.", "Ein Kaffee.")]
    root = write_multi30k(tmp_path / "m30k", {"train": train, "val": VAL})
    (root / "image_splits").mkdir()
    (root / "image_splits" / "train.txt").write_text("astronaut.jpg\ncoffee.jpg\n")
    (root / "image_splits" / "val.txt").write_text("rocket.jpg\n")
    got = in_language(read_flickr8k(flickr8k), root, "de")
    assert [(it.path.name, it.captions) for it in got.items["test"]] == [("astronaut.png", [["ein", "astronaut"]])]
    assert [(it.path.name, it.captions) for it in got.items["train"]] == [("coffee.png", [["ein", "kaffee"]])]
    assert "found by image lists" in got.line
    (root / "image_splits" / "val.txt").write_text("rocket.jpg\nextra.jpg\n")
    with pytest.raises(CaptionDataError, match=r"val.txt: 2 image names against 1 sentences"):
        in_language(read_flickr8k(flickr8k), root, "de")


def test_the_data_module_trains_on_german_words_and_learns_their_casing(flickr8k, tmp_path, capsys):
    dm = CaptionDataModule(source="flickr8k", root=str(flickr8k), language="de",
                           multi30k=str(write_multi30k(tmp_path / "m30k")), batch_size=2)  # fmt: skip
    dm.setup("fit")
    assert "German captions from Multi30k for 3 of 4 Flickr8k photos" in capsys.readouterr().err
    assert {"kaffee", "katze", "nähe"} <= set(dm.vocab.itos) and "coffee" not in dm.vocab.stoi
    assert dm.casing["first"] is True and set(dm.casing["words"].split()) == {
        "Foto",
        "Kaffee",
        "Katze",
        "Chelsea",
        "Nähe",
    }
    assert Casing(dm.casing).words(["die", "katze", "trinkt", "kaffee"]) == ["Die", "Katze", "trinkt", "Kaffee"]
    english = CaptionDataModule(source="flickr8k", root=str(flickr8k))
    english.setup("fit")
    assert english.casing is None  # Flickr8k's own captions: written lowercase, as the bundled model writes them


def _damaged(root: Path, how: str) -> Path:
    if how == "misaligned":
        (root / "train.de.gz").write_bytes(gzip.compress("\n".join(o for _, o in TRAIN[:2]).encode()))
    elif how == "no_german":
        for p in root.glob("*.de*"):
            p.unlink()
    elif how == "no_match":
        write_multi30k(root, {"train": [("Nothing of it.", "Nichts.")], "val": [("Nor this.", "Auch nicht.")]})
    return root


@pytest.mark.parametrize(
    ("options", "how", "message"),
    [
        ({"language": "xx"}, None, "unknown data.language 'xx'; choose one of en, de, fr, cs"),
        ({"language": "de", "multi30k": None}, None, "data.language de reads Multi30k's German sentences for"),
        ({"language": "de", "source": "folder"}, None, "set data.source flickr8k and data.multi30k"),
        ({"language": "en"}, None, "data.multi30k is read for a data.language other than en"),
        ({"language": "de", "multi30k": "nowhere"}, None, "data.multi30k nowhere: folder not found"),
        ({"language": "de"}, "misaligned", "train.de.gz: 2 lines against 3 in its English file"),
        ({"language": "de"}, "no_german", "no German file beside its English ones (train.de.gz or train.de)"),
        ({"language": "de"}, "no_match", "none of its sentences is a caption of a Flickr8k photo of data.root"),
    ],
)
def test_bad_language_data_is_one_line(flickr8k, tmp_path, options, how, message):
    root = _damaged(write_multi30k(tmp_path / "m30k"), how)
    kwargs = {"source": "flickr8k", "root": str(flickr8k), "multi30k": str(root), **options}
    with pytest.raises(CaptionDataError) as err:
        CaptionDataModule(**kwargs).setup("fit")
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


@pytest.mark.long
def test_a_german_fit_writes_captions_with_capitals(flickr8k, tmp_path, cli_run_in_tmp, capsys):
    """fit on German captions -> a model file (and a checkpoint caption-export reads) whose captions are the
    vocabulary's words written as the train sentences write them; what drives each word reads the cased words."""
    cli = caption_train_cli([
        "fit", "--config", str(ROOT / "tests/fixtures/captions/tiny_shapes.yaml"), "--data.source", "flickr8k",
        "--data.root", str(flickr8k), "--data.language", "de", "--data.multi30k", str(write_multi30k(tmp_path / "m")),
        "--data.train_size", "null", "--data.val_size", "null", "--data.test_size", "null", "--data.batch_size", "2",
        "--trainer.limit_val_batches", "0", "--model.export_path", "model.pt",
    ])  # fmt: skip
    casing = cli.datamodule.casing
    model = Captioner.load("model.pt")
    assert model.casing == casing and model.vocab == cli.datamodule.vocab
    info = "\n".join(model_info(model, "model.pt"))
    assert "capitals:       as its training captions write them (Chelsea, Foto, Kaffee, Katze, ...)" in info
    assert "Multi30k's German sentences (one a photo)" in info and "non-commercial research" in info
    photos = [str(flickr8k / "Flicker8k_Dataset" / n) for n in ("coffee.png", "rocket.jpg")]
    caps = model.caption_images(photos, beam_size=2, max_len=6)
    cased = Casing(casing)
    for c in caps:
        lower = [w.lower() for w in c.words]
        assert all(w in model.vocab.stoi for w in lower) and c.words == cased.words(lower), c.words
        assert c.words[0][0].isupper()  # the train sentences start with a capital
    features = model.encode(torch.stack([model.preprocess(c.photo) for c in caps[:1]]))
    same = model.evidence(features, caps[0].words), model.evidence(features, [w.lower() for w in caps[0].words])
    assert torch.equal(same[0].attention, same[1].attention) and torch.equal(same[0].evidence, same[1].evidence)
    cli.trainer.save_checkpoint("run.ckpt")
    assert export_main(["run.ckpt", "again.pt"]) == 0
    assert Captioner.load("again.pt").casing == casing
    capsys.readouterr()
    assert caption_main([photos[0], "--model", "again.pt", "--json", "--beam-size", "2", "--max-len", "6"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["caption"] == " ".join(caps[0].words)


@pytest.mark.slow  # optimize starts LitData's worker processes
def test_a_chunk_folder_keeps_the_casing_for_the_model_files_fit_writes(flickr8k, tmp_path, cli_run_in_tmp):
    data = {"source": "flickr8k", "root": str(flickr8k), "language": "de", "batch_size": 2,
            "multi30k": str(write_multi30k(tmp_path / "m30k"))}  # fmt: skip
    cfg = yaml.safe_load((ROOT / "tests/fixtures/captions/tiny_shapes.yaml").read_text())
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump({**cfg, "data": data}))
    train_main(["optimize", "--config", str(tmp_path / "cfg.yaml"), "--out", "chunks"])
    read, streamed = CaptionDataModule(**data), CaptionDataModule(**{**data, "root": "chunks"})
    read.setup()
    streamed.setup()
    assert streamed.streams and streamed.casing == read.casing and streamed.vocab == read.vocab
    assert "Kaffee" in streamed.casing["words"].split() and streamed.splits["test"].references == []  # none written


REAL = ROOT.parent / "shared" / "data"


@pytest.mark.skipif(not (REAL / "multi30k" / "train.de.gz").is_file() or not (REAL / "flickr8k").is_dir(),
                    reason=f"real Flickr8k and Multi30k not found at {REAL}")  # fmt: skip
@pytest.mark.long
def test_real_multi30k_gives_most_flickr8k_photos_one_german_sentence_in_their_split():
    items = read_flickr8k(REAL / "flickr8k")
    got = in_language(items, REAL / "multi30k", "de")
    assert {s: len(v) for s, v in got.items.items()} == {"train": 5259, "val": 881, "test": 885}  # of 6,000 / 1,000
    names = {s: {it.path.name for it in v} for s, v in got.items.items()}
    assert all(names[s] <= {it.path.name for it in items[s]} for s in names)  # Flickr8k's split kept
    test = {it.path.name: it.captions for it in got.items["test"]}
    assert test["3385593926_d3e9c21170.jpg"] == [["zwei", "braune", "hunde", "raufen", "spielerisch", "im", "schnee"]]
    casing = Casing(learn_casing(got.train_text))
    assert casing.words(["ein", "hund", "läuft", "durch", "den", "schnee"]) == ["Ein", "Hund", "läuft", "durch", "den",
                                                                                 "Schnee"]  # fmt: skip


def test_a_model_trained_on_flickr8k_in_english_says_its_terms(flickr8k):
    """The data's README: a model trained on Flickr8k must say so in its metadata. Only the German captions' models
    did; one trained from scratch on the English captions said "trained on: Flickr8k" and nothing of its terms."""
    facts = CaptionDataModule(source="flickr8k", root=str(flickr8k)).facts
    assert "Flickr8k (Hodosh, Young and Hockenmaier 2013)" in facts["training_data"]
    assert "non-commercial research" in facts["terms"]
    assert CaptionDataModule(source="shapes").facts == {}  # synthetic scenes: no terms to carry
