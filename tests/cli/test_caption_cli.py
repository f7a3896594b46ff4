"""The ``caption`` and ``caption-export`` commands on tiny random models: output formats, every image mode, bad
files among good ones, the demo, model-file errors, and checkpoint / model-file export (float16 included)."""

import json
import os
import random
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.ctrl_c import ctrl_c_at
from PIL import Image

from captioning.commands import caption as caption_cli
from captioning.commands import caption_loop, caption_parser
from captioning.commands.caption import caption_main
from captioning.commands.export import export_main
from captioning.model.captioner import Captioner
from captioning.model.decoder import DecoderConfig
from captioning.model.encoder import EncoderConfig
from captioning.photos.preprocess import load_image as read_image
from captioning.training.shapes import VOCAB
from captioning.views.overlay import grid_layout, word_png_size
from text_attn.core.unsure_options import NAMED
from text_attn.core.vocab import Vocabulary

IMAGES = Path(__file__).parent.parent / "fixtures" / "images"
PHOTOS = [str(IMAGES / n) for n in ("coffee.png", "chelsea.png", "astronaut.png", "rocket.jpg")]
# resnet18 cut at stride 16 (no layer4): 2.8M parameters, an 11 MB model file
TINY_ENCODER = dict(backbone="resnet18", stride=16, weights=None, grid=4, image_size=64)
TINY_DECODER = dict(embed_dim=16, hidden_dim=32, attn_dim=16)
FAST = ["--max-len", "6"]  # an untrained model would otherwise talk for 30 words


def _tiny(vocab: Vocabulary, crop: bool = False, **decoder) -> Captioner:
    torch.manual_seed(0)
    return Captioner.build(vocab, EncoderConfig(**TINY_ENCODER, crop=crop), DecoderConfig(**TINY_DECODER, **decoder))


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("model") / "tiny.pt"
    _tiny(Vocabulary.build([list(VOCAB)])).save(path)
    return path


def run(capsys, *args) -> tuple[int, str, str]:
    code = caption_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, model_file, *args) -> list[dict]:
    code, out, err = run(capsys, *args, "--model", model_file, "--json", *FAST)
    assert code == 0, err
    return json.loads(out)


# --- caption ------------------------------------------------------------------------------------------------------
def test_plain_output_one_line_per_image(capsys, model_file):
    code, out, err = run(capsys, *PHOTOS, "--model", model_file, *FAST)
    # an untrained model never ends a caption: the only stderr line counts the captions cut off at --max-len and
    # names them, in input order
    names = ", ".join(PHOTOS)
    assert code == 0 and err == f"caption: note: 4 caption(s) reached --max-len 6 and are cut off: {names}\n"
    lines = out.splitlines()
    assert [line.split("\t")[0] for line in lines] == PHOTOS
    records = run_json(capsys, model_file, *PHOTOS)
    assert [line.split("\t")[1] for line in lines] == [r["caption"] for r in records]
    # one image: just the caption
    code, out, _ = run(capsys, PHOTOS[0], "--model", model_file, *FAST)
    assert out == records[0]["caption"] + "\n"


def test_a_folder_or_stdin_of_one_photo_keeps_the_path_column(capsys, model_file, tmp_path, monkeypatch):
    """A script reading `caption DIR` or `find ... | caption -` got a bare caption when the folder held one photo."""
    import io
    import shutil

    (tmp_path / "one").mkdir()
    photo = shutil.copy(PHOTOS[0], tmp_path / "one")
    caption = run_json(capsys, model_file, photo)[0]["caption"]
    code, out, err = run(capsys, tmp_path / "one", "--model", model_file, *FAST)
    assert code == 0 and out == f"{photo}\t{caption}\n", err
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{photo}\n"))
    code, out, err = run(capsys, "-", "--model", model_file, *FAST)
    assert code == 0 and out == f"{photo}\t{caption}\n", err


def test_json_schema(capsys, model_file):
    records = run_json(capsys, model_file, *PHOTOS, "--beam-size", "1")
    assert len(records) == 4
    keys = {"image", "caption", "words", "attention", "grid", "size", "crop_box", "chosen", "overlay", "error"}
    keys |= {"score", "truncated", "out_of_domain", "note"}
    for rec, path in zip(records, PHOTOS, strict=True):
        assert set(rec) == keys
        assert rec["score"] < 0 and rec["truncated"] is True  # untrained, --max-len 6: every caption is cut off
        assert rec["out_of_domain"] is None and rec["note"] is None  # a model file without a domain check cannot tell
        assert rec["image"] == path and rec["error"] is None and rec["overlay"] is None
        assert rec["chosen"] is None  # a soft-attention model has no single chosen region
        assert rec["caption"] == " ".join(rec["words"])
        assert rec["grid"] == [4, 4]
        w, h = Image.open(path).size
        assert rec["size"] == [w, h] and rec["crop_box"] == [0, 0, w, h]  # crop=False: the whole image
        assert len(rec["attention"]) == len(rec["words"])
        for row in rec["attention"]:
            assert len(row) == 16 and min(row) >= 0 and sum(row) == pytest.approx(1.0, abs=1e-4)
    assert sum(len(r["words"]) for r in records) > 0  # the schema was checked on real rows


def test_crop_box_of_a_cropping_model(capsys, tmp_path):
    path = tmp_path / "crop.pt"
    _tiny(Vocabulary.build([list(VOCAB)]), crop=True).save(path)
    (rec,) = run_json(capsys, path, PHOTOS[0])
    assert rec["size"] == [256, 171] and rec["crop_box"] == [42.5, 0.0, 213.5, 171.0]  # centre square, side 171


@pytest.fixture
def odd_images(tmp_path) -> dict[str, Path]:
    """coffee.png in modes L, LA, RGBA, P, CMYK, I;16, and as a JPEG stored sideways with an EXIF rotation tag."""
    rgb = Image.open(PHOTOS[0]).convert("RGB")
    out = {}
    for mode in ("L", "LA", "RGBA", "P"):
        out[mode] = tmp_path / f"{mode}.png"
        rgb.convert(mode).save(out[mode])
    out["CMYK"] = tmp_path / "cmyk.jpg"
    rgb.convert("CMYK").save(out["CMYK"], quality=95)
    grey16 = np.asarray(rgb.convert("L"), dtype=np.uint16) * 257
    out["I;16"] = tmp_path / "grey16.png"
    Image.fromarray(grey16).save(out["I;16"])
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation 6: the camera was turned; show the pixels rotated 90 degrees clockwise
    out["exif"] = tmp_path / "sideways.jpg"
    rgb.rotate(90, expand=True).save(out["exif"], exif=exif, quality=95)  # stored counter-clockwise
    return out


def test_every_image_mode_reads_right(odd_images):
    rgb = Image.open(PHOTOS[0]).convert("RGB")
    assert Image.open(odd_images["I;16"]).mode == "I;16"

    def small(img: Image.Image) -> np.ndarray:  # 8 x 8 px blocks: palette dithering and JPEG noise average out
        return np.asarray(img.convert("L").resize((32, 21), Image.Resampling.BOX), dtype=float)

    for mode in ("L", "LA", "RGBA", "P", "CMYK", "I;16"):
        img = read_image(odd_images[mode])
        assert img.mode == "RGB" and img.size == (256, 171), mode
        # the same picture, not e.g. a white 16-bit image clipped at 255 or a black CMYK
        assert np.abs(small(img) - small(rgb)).mean() < 4, mode
    upright = read_image(odd_images["exif"])
    assert upright.size == (256, 171)  # EXIF orientation applied first
    assert np.abs(small(upright) - small(rgb)).mean() < 4
    assert np.abs(small(upright.transpose(Image.Transpose.ROTATE_180)) - small(rgb)).mean() > 20  # (it can tell)


def test_caption_every_image_mode(capsys, model_file, odd_images):
    paths = [str(p) for p in odd_images.values()]
    records = run_json(capsys, model_file, *paths)
    assert [r["image"] for r in records] == paths
    assert all(r["error"] is None and r["caption"] is not None for r in records)
    assert records[-1]["size"] == [256, 171]  # the EXIF-rotated file is captioned upright


@pytest.mark.parametrize("batch", [1, 8])  # batch 1: a batch with no readable image at all
def test_bad_and_missing_files_among_good_ones(capsys, model_file, tmp_path, monkeypatch, batch):
    monkeypatch.setattr(caption_parser, "BATCH", batch)
    bad = tmp_path / "x.png"
    bad.write_text("not a picture\n")
    missing = tmp_path / "missing.jpg"
    args = [PHOTOS[0], bad, missing, PHOTOS[3]]
    code, out, err = run(capsys, *args, "--model", model_file, *FAST)
    assert code == 1
    assert [line.split("\t")[0] for line in out.splitlines()] == [PHOTOS[0], PHOTOS[3]]
    lines = err.splitlines()
    assert len(lines) == 3  # the failed ones are not among the captions cut off
    assert lines[2] == f"caption: note: 2 caption(s) reached --max-len 6 and are cut off: {PHOTOS[0]}, {PHOTOS[3]}"
    assert lines[0].startswith("caption: error: ") and str(bad) in lines[0] and "not an image" in lines[0]
    assert lines[1].startswith("caption: error: ") and str(missing) in lines[1] and "no such file" in lines[1]
    # JSON keeps one record per argument, in order; the failed ones carry their error
    code, out, _ = run(capsys, *args, "--model", model_file, "--json", *FAST)
    records = json.loads(out)
    assert code == 1 and [r["image"] for r in records] == [str(a) for a in args]
    assert [r["error"] is None for r in records] == [True, False, False, True]
    assert records[1]["caption"] is None and records[1]["words"] == [] and records[1]["crop_box"] is None


@pytest.mark.parametrize(
    "options",
    [["--n-best", "2", "--beam-size", "3", "--unsure", "--evidence"], ["--given", "a red circle", "--unsure"],
     ["--given-file", "GIVEN"]],
)  # fmt: skip
def test_a_failed_photos_record_has_every_key_its_runs_others_have(capsys, model_file, tmp_path, options):
    """A failed photo's record lacked the keys its run's options add (n_best, given, log_prob, word_probs, end_prob,
    unsure, evidence, agreement): one JSONL file held two schemas, and rec["n_best"] was a KeyError."""
    bad = tmp_path / "x.png"
    bad.write_text("not a picture\n")
    given = tmp_path / "given.tsv"  # a caption for the good photo alone: the bad one fails before it is read
    given.write_text(f"{Path(PHOTOS[0]).name}\ta red circle\n{bad.name}\ta blue square\n")
    options = [str(given) if o == "GIVEN" else o for o in options]
    fast = [] if {"--given", "--given-file"} & set(options) else FAST  # a text read has no --max-len
    code, out, err = run(capsys, PHOTOS[0], bad, "--model", model_file, "--json", *fast, *options)
    good, failed = json.loads(out)
    assert code == 1 and good["error"] is None and failed["error"] is not None, err
    assert list(failed) == list(good)  # the same keys, in the same order
    empty = {k: v for k, v in failed.items() if k not in ("image", "error")}
    assert all(v is None or v == [] for v in empty.values()), empty
    assert {"n_best", "given", "unsure", "evidence"} & set(failed)


@pytest.mark.long
def test_overlays_and_per_word_files(capsys, model_file, tmp_path, monkeypatch):
    monkeypatch.setattr(caption_parser, "BATCH", 1)  # the two images in separate batches
    twin = tmp_path / "other" / "coffee.png"  # same name as PHOTOS[0]: its overlay must not overwrite the first
    twin.parent.mkdir()
    twin.write_bytes(Path(PHOTOS[0]).read_bytes())
    out_dir = tmp_path / "ov"
    records = run_json(capsys, model_file, PHOTOS[0], twin, "--overlay", out_dir, "--per-word")
    overlays = [Path(r["overlay"]) for r in records]
    assert overlays == [out_dir / "coffee-attention.png", out_dir / "coffee-2-attention.png"]
    words = records[0]["words"]
    assert len(words) > 0
    # overlay layout (captioning.views.overlay's rule): the caption and the key,
    # then panels 224 x 150, at most 6 per row
    lay = grid_layout((256, 171), words)
    assert Image.open(overlays[0]).size == lay.size and lay.panel == (224, 150) and lay.cols <= 6
    per_word = sorted(out_dir.glob("coffee-[0-9][0-9]-*.png"))
    assert len(per_word) == len(words)
    assert Image.open(per_word[0]).size == word_png_size((256, 171), words)  # a 512 x 342 panel
    assert [p.name.split("-", 2)[2] for p in per_word] == [f"{w}.png" for w in records[0]["words"]]
    # again with a shorter caption given: the earlier caption's later words' files stay, and are said to
    code, _, err = run(capsys, PHOTOS[0], "--overlay", out_dir, "--per-word", "--given", words[0], "--model",
                       model_file)  # fmt: skip
    said = next(line for line in err.splitlines() if line.startswith("wrote "))
    assert code == 0 and said.endswith(f"(+ 1 per-word PNGs); {len(words) - 1} per-word file(s) of an earlier "
                                       "caption of this name left beside them")  # fmt: skip
    # this run's files of another photo named as p's would be ("p-01-dog"'s) are none of p's earlier ones
    for name in ("p.png", "p-01-dog.png"):
        (tmp_path / name).write_bytes(Path(PHOTOS[0]).read_bytes())
    code, _, err = run(capsys, tmp_path / "p-01-dog.png", tmp_path / "p.png", "--overlay", tmp_path / "fresh",
                       "--per-word", "--model", model_file, *FAST)  # fmt: skip
    assert code == 0 and "earlier caption" not in err, err


@pytest.mark.parametrize(("fmt", "kind"), [("jpg", "JPEG"), ("webp", "WEBP")])
def test_overlay_format_writes_smaller_pictures_of_the_same_layout(capsys, model_file, tmp_path, fmt, kind):
    """A PNG overlay is photographs kept pixel for pixel (0.7-1.1 MB a Flickr8k photo's): --overlay-format jpg or webp
    draws the same picture several times smaller, per-word ones too, named by the format."""
    png, other = tmp_path / "png", tmp_path / fmt
    (rec_png,) = run_json(capsys, model_file, PHOTOS[0], "--overlay", png)
    (rec,) = run_json(capsys, model_file, PHOTOS[0], "--overlay", other, "--overlay-format", fmt, "--per-word")
    assert rec["overlay"] == str(other / f"coffee-attention.{fmt}")
    with Image.open(rec["overlay"]) as picture, Image.open(rec_png["overlay"]) as lossless:
        assert picture.format == kind and picture.size == lossless.size
        # the same picture: near every pixel (quality 90), far smaller than the PNG
        diff = np.abs(np.asarray(picture.convert("RGB"), float) - np.asarray(lossless.convert("RGB"), float))
        assert diff.mean() < 3.0
    assert Path(rec["overlay"]).stat().st_size < Path(rec_png["overlay"]).stat().st_size / 2
    per_word = sorted(other.glob(f"coffee-[0-9][0-9]-*.{fmt}"))
    assert len(per_word) == len(rec["words"]) and all(Image.open(p).format == kind for p in per_word)


def test_overlay_format_without_overlay_is_refused(capsys, model_file):
    with pytest.raises(SystemExit) as exc:
        run(capsys, PHOTOS[0], "--model", model_file, "--overlay-format", "jpg")
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == "caption: error: --overlay-format needs --overlay DIR"


def test_hard_attention_model_reports_and_outlines_its_chosen_regions(capsys, tmp_path, monkeypatch):
    from captioning.views import overlay

    path = tmp_path / "hard.pt"
    _tiny(Vocabulary.build([list(VOCAB)]), crop=True, attention="hard").save(path)
    marked = []
    mark = overlay._Painter._mark
    monkeypatch.setattr(overlay._Painter, "_mark", lambda self, panel, r: (marked.append(r), mark(self, panel, r)))
    (rec,) = run_json(capsys, path, PHOTOS[0], "--overlay", tmp_path / "ov", "--beam-size", "2")
    assert rec["words"] and len(rec["chosen"]) == len(rec["words"])
    for r, row in zip(rec["chosen"], rec["attention"], strict=True):
        assert row[r] == max(row)  # the arg-max region (eval: hard_inference "argmax")
    assert marked == rec["chosen"]  # each word's panel outlines its region


def test_demo_writes_an_overlay(capsys, model_file, tmp_path):
    code, out, err = run(
        capsys,
        "--demo",
        "shapes",
        "--seed",
        7,
        "--model",
        model_file,
        "--overlay",
        tmp_path / "demo",
        *FAST,
        "--unsure-below",
        "1",
    )
    assert code == 0, err
    # --unsure's closing note, as a run over photos says it (the demo drew the probabilities and said nothing)
    assert "caption: note: " in err and "the model was unsure of" in err and "(p < 1)" in err
    fields = dict(line.split(":", 1) for line in out.splitlines())
    assert set(fields) == {"scene", "caption", "reference", "overlay"}
    overlay = Path(fields["overlay"].strip())
    assert overlay == tmp_path / "demo" / "scene-7-attention.png" and overlay.is_file()
    scene = Image.open(tmp_path / "demo" / "scene-7.png")
    assert scene.size == (64, 64)  # the model's input size
    expected = make_scenes_with_seed(7)
    assert fields["reference"].strip() == " ".join(expected.captions[0])
    assert np.array_equal(np.asarray(scene), np.asarray(expected.image))  # --seed repeats the scene


def make_scenes_with_seed(seed: int):
    from captioning.training.shapes import make_scene

    return make_scene(random.Random(seed), size=64)


def test_demo_default_dir_and_json(capsys, model_file, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "--demo", "shapes", "--model", model_file, "--json", *FAST)
    (rec,) = json.loads(out)
    assert code == 0 and Path(rec["overlay"]).parent == Path("caption-demo") and Path(rec["overlay"]).is_file()
    assert rec["overlay"] == f"caption-demo/scene-{rec['seed']}-attention.png"


def test_model_errors(capsys, model_file, tmp_path, monkeypatch):
    with pytest.raises(SystemExit) as exc:
        caption_main([PHOTOS[0], "--model", str(tmp_path / "nope.pt")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and err.startswith("caption: error: ") and "nope.pt" in err
    with pytest.raises(SystemExit) as exc:
        caption_main([PHOTOS[0], "--model", str(model_file), "--device", "no-such-device"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "no-such-device" in err
    # no --model and no bundled model file: one clear line
    missing = tmp_path / "assets" / "flickr8k_soft.pt"
    from captioning.model import bundled

    monkeypatch.setattr(caption_cli, "BUNDLED_MODEL", missing)
    monkeypatch.setattr(bundled, "BUNDLED_MODEL", missing)  # where every caller resolves the default
    monkeypatch.setitem(bundled.MODEL_NAMES, "flickr8k", missing)
    for args in ([PHOTOS[0]], [PHOTOS[0], "--model", "flickr8k"]):
        with pytest.raises(SystemExit) as exc:
            caption_main(args)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1 and "flickr8k_soft.pt" in err and "--model" in err


def test_a_folder_or_a_text_models_name_as_model_is_said_for_what_it_is(capsys, tmp_path, monkeypatch):
    """Both were "model file not found": a folder is named a folder, and a bundled text model's name (translate's)
    names the command that takes it."""
    monkeypatch.chdir(tmp_path)  # no file of a bundled model's name here
    (tmp_path / "runs").mkdir()
    text = "transformer is a bundled text model: translate --model transformer SENTENCE uses it; the bundled caption " \
           "models are flickr8k, shapes"  # fmt: skip
    for model, says in (("runs", "runs: a folder, not a model file"), ("transformer", text)):
        for args in ([PHOTOS[0]], ["--model-info"]):
            with pytest.raises(SystemExit) as exc:
                caption_main([*args, "--model", model])
            assert (exc.value.code, capsys.readouterr().err) == (2, f"caption: error: {says}\n")


@pytest.mark.parametrize(
    "args",
    [
        ["--beam-size", "0", "x.png"],
        [],
        ["--demo", "x.png"],
        ["x.png", "--per-word"],
        ["x.png", "--seed", "1"],
        ["--demo", "--seed", "1"],  # the photo demo has no scene to seed
    ],
)
def test_usage_errors(capsys, args):
    with pytest.raises(SystemExit) as exc:
        caption_main(args)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and err.startswith("caption: error: ")


# --- caption-export -----------------------------------------------------------------------------------------------
def _states_equal(a: Captioner, b: Captioner) -> bool:
    sa, sb = a.model.state_dict(), b.model.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_export_model_file_to_half(capsys, model_file, tmp_path):
    out = tmp_path / "half.pt"
    assert export_main([str(model_file), str(out), "--half"]) == 0
    assert "float16" in capsys.readouterr().err  # the "wrote" line, on stderr as every command's
    assert out.stat().st_size < 0.6 * model_file.stat().st_size
    stored = torch.load(out, weights_only=True)["state_dict"]
    assert stored["decoder.embedding.weight"].dtype == torch.float16  # parameters halved ...
    assert stored["encoder.body.stem.1.running_var"].dtype == torch.float32  # ... buffers not
    full, half = Captioner.load(model_file).model, Captioner.load(out).model
    for (name, p), q in zip(full.state_dict().items(), half.state_dict().values(), strict=True):
        assert q.dtype == p.dtype, name  # back to float32 on load
        torch.testing.assert_close(q, p, rtol=1e-3, atol=1e-4, msg=name)
    key = "encoder.body.stem.1.running_var"
    assert torch.equal(half.state_dict()[key], full.state_dict()[key])  # BatchNorm statistics kept exactly
    # re-export in place: back to float32 values of the halved weights
    assert export_main([str(out), str(out)]) == 0
    assert all(v.dtype != torch.float16 for v in torch.load(out, weights_only=True)["state_dict"].values())


def _checkpoint(captioner: Captioner, **extra) -> dict:
    """A caption-train checkpoint of the captioner's weights (its model options in the encoder / decoder blocks)."""
    encoder = dict(TINY_ENCODER, crop=False, fine_tune="none")
    decoder = dict(TINY_DECODER, dropout=0.5, gate="scalar", deep_output=True)
    hp = {"encoder": encoder, "decoder": decoder, "lr": 1e-3}
    state = {f"model.{k}": v for k, v in captioner.model.state_dict().items()}
    return {"epoch": 3, "state_dict": state, "hyper_parameters": hp, **extra}


def test_export_checkpoint_with_vocab(capsys, tmp_path):
    vocab = Vocabulary.build([list(VOCAB)])
    model = _tiny(vocab)
    torch.save(_checkpoint(model, vocab=vocab.to_dict()), tmp_path / "best.ckpt")
    assert export_main([str(tmp_path / "best.ckpt"), str(tmp_path / "m.pt")]) == 0
    loaded = Captioner.load(tmp_path / "m.pt")
    assert _states_equal(loaded, model) and loaded.vocab == vocab
    assert loaded.preprocess == model.preprocess


@pytest.mark.long
def test_export_averages_checkpoints_and_refuses_another_model(capsys, tmp_path):
    vocab = Vocabulary.build([list(VOCAB)])
    models = []
    for i in range(2):  # two "steps" of one run: the same network, its weights moved a different way each
        model = _tiny(vocab)
        with torch.no_grad():
            for p in model.model.parameters():
                p.add_(torch.randn_like(p) * 0.1 * (i + 1))
        torch.save(_checkpoint(model, vocab=vocab.to_dict()), tmp_path / f"step-{i}.ckpt")
        models.append(model)
    ckpts = [str(tmp_path / f"step-{i}.ckpt") for i in range(2)]
    assert export_main([ckpts[1], str(tmp_path / "avg.pt"), "--average", ckpts[0]]) == 0
    assert "averaged with 1 more" in capsys.readouterr().err
    states = [m.model.state_dict() for m in models]
    for name, value in Captioner.load(tmp_path / "avg.pt").model.state_dict().items():
        if value.is_floating_point():
            torch.testing.assert_close(value, (states[0][name] + states[1][name]) / 2, rtol=0, atol=1e-6, msg=name)
    # another vocabulary: not the same model; named, one line, nothing written
    other = Vocabulary.build([["a", "b", "c"]])
    torch.save(_checkpoint(_tiny(other), vocab=other.to_dict()), tmp_path / "other.ckpt")
    with pytest.raises(SystemExit) as exc:
        export_main([ckpts[1], str(tmp_path / "bad.pt"), "--average", ckpts[0], str(tmp_path / "other.ckpt")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "other.ckpt: not the same model" in err
    assert not (tmp_path / "bad.pt").exists()
    # an ensemble is not averaged (the docs say --average refuses it; an ensemble's mean with itself was written)
    both = tmp_path / "both.pt"
    assert export_main([ckpts[0], str(both), "--ensemble", ckpts[0]]) == 0  # (one encoder: a decoder twice)
    capsys.readouterr()
    bad = str(tmp_path / "bad.pt")
    for argv, says in (([str(both), bad, "--average", str(both)], "is an ensemble of 2"),
                       ([ckpts[0], bad, "--average", str(both)], "is an ensemble of 2 decoders: the mean is one "
                                                                  "decoder's weights")):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            export_main(argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1 and says in err, err
        assert not (tmp_path / "bad.pt").exists()


def test_export_checkpoint_of_a_multiscale_model_attending_on_fine_channels(capsys, tmp_path):
    vocab = Vocabulary.build([list(VOCAB)])
    settings = dict(backbone="efficientnet_lite0", stride=8, grid=4, multiscale=True)
    torch.manual_seed(0)
    encoder = EncoderConfig(**{**TINY_ENCODER, **settings}, crop=False)
    model = Captioner.build(vocab, encoder, DecoderConfig(**TINY_DECODER, attend_on="fine"))
    ckpt = _checkpoint(model, vocab=vocab.to_dict())
    ckpt["hyper_parameters"]["encoder"].update(settings)
    ckpt["hyper_parameters"]["decoder"].update(attend_on="fine")
    torch.save(ckpt, tmp_path / "best.ckpt")
    assert export_main([str(tmp_path / "best.ckpt"), str(tmp_path / "m.pt")]) == 0
    loaded = Captioner.load(tmp_path / "m.pt")
    assert _states_equal(loaded, model) and loaded.model.decoder.cfg.key_dims == 40


def test_a_checkpoint_of_an_older_version_is_refused_in_one_line(capsys, tmp_path):
    """Checkpoints without a stored vocabulary, or with flat model options (before model.encoder / model.decoder),
    come from older versions: no longer read (their fit runs wrote model files)."""
    vocab = Vocabulary.build([list(VOCAB)])
    model = _tiny(vocab)
    flat = _checkpoint(model, vocab=vocab.to_dict())
    hp = flat["hyper_parameters"]
    flat["hyper_parameters"] = {**hp.pop("encoder"), **hp.pop("decoder"), **hp}
    for name, ckpt in (("novocab.ckpt", _checkpoint(model)), ("flat.ckpt", flat)):
        torch.save(ckpt, tmp_path / name)
        with pytest.raises(SystemExit) as exc:
            export_main([str(tmp_path / name), str(tmp_path / "m.pt")])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1 and "written by an older version of caption-train" in err
        assert name in err and not (tmp_path / "m.pt").exists()


def test_export_errors(capsys, tmp_path):
    (tmp_path / "junk.ckpt").write_text("junk")
    torch.save({"state_dict": {"w": torch.zeros(1)}, "hyper_parameters": {}}, tmp_path / "other.ckpt")
    for name in ("missing.ckpt", "junk.ckpt", "other.ckpt"):
        with pytest.raises(SystemExit) as exc:
            export_main([str(tmp_path / name), str(tmp_path / "out.pt")])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1 and err.startswith("caption-export: error: ")
        assert name in err
    assert not (tmp_path / "out.pt").exists()


def test_export_info_saved_with_a_byte_order_mark_is_read(tmp_path):
    from text_attn.core.info_file import read_info

    (tmp_path / "info.json").write_bytes(b'\xef\xbb\xbf{"trained on": "my photos"}\r\n')  # Notepad's "UTF-8"
    assert read_info(str(tmp_path / "info.json")) == {"trained on": "my photos"}
    # NaN and Infinity: Python's json reads them, no JSON reader writes them back (attention-serve's /info answered a
    # plain-text 500): refused by name
    from text_attn.core.modelfile import ModelFileError

    for bad in ('{"x": NaN}', '{"scores": [1, -Infinity]}'):
        (tmp_path / "info.json").write_text(bad)
        with pytest.raises(ModelFileError, match="is not a JSON number"):
            read_info(str(tmp_path / "info.json"))


@pytest.mark.slow
def test_export_a_real_training_checkpoint(capsys, tmp_path):
    """A caption-train run's best checkpoint exports to the same file that fit itself writes at the end."""
    import pytorch_lightning as pl

    from captioning.training.data import CaptionDataModule
    from captioning.training.module import CaptionModule

    pl.seed_everything(0)
    encoder, decoder = EncoderConfig(**TINY_ENCODER, crop=False), DecoderConfig(**TINY_DECODER)
    module = CaptionModule(encoder, decoder, val_meteor=False, export_path=str(tmp_path / "fit.pt"))
    dm = CaptionDataModule(source="shapes", train_size=16, val_size=4, test_size=4, scene_size=64, batch_size=8)
    ckpt = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", monitor="val_Bleu_4", mode="max", save_top_k=1)
    trainer = pl.Trainer(
        max_epochs=1,
        callbacks=[ckpt],
        logger=False,
        enable_progress_bar=False,
        num_sanity_val_steps=0,
        default_root_dir=tmp_path,
    )
    trainer.fit(module, dm)
    assert export_main([ckpt.best_model_path, str(tmp_path / "export.pt")]) == 0
    a, b = Captioner.load(tmp_path / "fit.pt"), Captioner.load(tmp_path / "export.pt")
    assert _states_equal(a, b) and a.vocab == b.vocab and a.preprocess == b.preprocess


# --- collections: folders, stdin, JSON Lines, resume --------------------------------------------------------------
@pytest.fixture
def album(tmp_path) -> Path:
    """A folder of 5 images in two levels, plus files that are not images (skipped)."""
    root = tmp_path / "album"
    (root / "b" / "deeper").mkdir(parents=True)
    rgb = Image.open(PHOTOS[0]).convert("RGB")
    for name in ("a1.png", "a2.JPG", "b/b1.png", "b/deeper/c1.jpeg", "b/deeper/c2.webp"):
        rgb.resize((40 + len(name), 32)).save(root / name, format=None if not name.endswith("JPG") else "JPEG")
    (root / "notes.txt").write_text("not an image\n")
    (root / "b" / "captions.tsv").write_text("a1.png\ta cup\n")
    return root


def test_a_folder_is_captioned_recursively_in_sorted_order(capsys, model_file, album):
    code, out, err = run(capsys, album, "--model", model_file, *FAST, "--batch-size", "2")
    assert code == 0, err
    names = [line.split("\t")[0] for line in out.splitlines()]
    expected = ["a1.png", "a2.JPG", "b/b1.png", "b/deeper/c1.jpeg", "b/deeper/c2.webp"]
    assert names == [str(album / n) for n in expected]


def test_paths_from_stdin(capsys, model_file, album, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(f"{album / 'a1.png'}\n\n{album / 'b' / 'b1.png'}\n"))
    code, out, _ = run(capsys, "-", PHOTOS[1], "--model", model_file, *FAST)
    assert code == 0
    assert [line.split("\t")[0] for line in out.splitlines()] == [str(album / "a1.png"), str(album / "b/b1.png"),
                                                                  PHOTOS[1]]  # fmt: skip


def _bytes_stdin(data: bytes):
    import io

    return io.TextIOWrapper(io.BytesIO(data), encoding="ascii")  # bytes behind it, as a real stdin has


@pytest.mark.parametrize(("photo", "what"), [(PHOTOS[3], "a JPEG image"), (PHOTOS[0], "a PNG image")])
def test_an_images_bytes_on_stdin_are_one_line_not_a_list_of_paths(capsys, model_file, monkeypatch, photo, what):
    # `caption - < photo.jpg` read the image's bytes as a path: a traceback (a NUL byte in a path)
    monkeypatch.setattr("sys.stdin", _bytes_stdin(Path(photo).read_bytes()))
    with pytest.raises(SystemExit) as exc:
        caption_main(["-", "--model", str(model_file), *FAST])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and out == "" and "Traceback" not in err
    assert err.splitlines() == [f"caption: error: stdin holds {what}, not a list of image paths (one a line): give "
                                "the file's name (caption photo.jpg), or save it to a file first"]  # fmt: skip


def test_an_images_bytes_on_a_real_stdin_are_refused_before_the_model_loads(capsys, model_file, monkeypatch):
    """A real stdin is buffered (it can peek): its first bytes are looked at before the model loads (1-2 s), and the
    list of a pipe is read after, as before (nothing read away)."""
    import io

    import captioning.commands.caption as cli

    def loaded(args):
        raise AssertionError("the model was loaded before stdin was looked at")

    monkeypatch.setattr(cli, "_load_captioner", loaded)
    buffered = io.BufferedReader(io.BytesIO(Path(PHOTOS[3]).read_bytes()))
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(buffered, encoding="ascii"))
    with pytest.raises(SystemExit) as exc:
        caption_main(["-", "--model", str(model_file), *FAST])
    assert exc.value.code == 2
    assert capsys.readouterr().err.startswith("caption: error: stdin holds a JPEG image, not a list of image paths")
    monkeypatch.undo()
    names = io.BufferedReader(io.BytesIO(f"{PHOTOS[0]}\n{PHOTOS[1]}\n".encode()))
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(names, encoding="ascii"))
    code, out, err = run(capsys, "-", "--model", model_file, *FAST)
    assert code == 0, err
    assert [line.split("\t")[0] for line in out.splitlines()] == PHOTOS[:2]  # the peeked bytes read as names too


def test_paths_ended_by_nul_bytes_are_read_as_find_print0_writes_them(capsys, model_file, album, monkeypatch, tmp_path):
    odd = album / "line\nbreak.png"  # a name with a line break: only a NUL can end it
    Image.open(PHOTOS[0]).convert("RGB").resize((40, 32)).save(odd)
    names = [album / "a1.png", odd, album / "b" / "b1.png"]
    monkeypatch.setattr("sys.stdin", _bytes_stdin(b"".join(os.fsencode(n) + b"\0" for n in names)))
    records = tmp_path / "r.jsonl"
    code, _, err = run(capsys, "-", "--model", model_file, *FAST, "--jsonl", records)
    assert code == 0, err
    assert [json.loads(line)["image"] for line in records.read_text().splitlines()] == [str(n) for n in names]


def test_jsonl_streams_records_and_resume_skips_what_is_done(capsys, model_file, album, tmp_path):
    out_file = tmp_path / "out.jsonl"
    code, out, err = run(capsys, album, "--model", model_file, *FAST, "--jsonl", out_file, "--batch-size", "2")
    assert code == 0 and out == "" and "afresh" not in err  # the records go to the (new) file
    first = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert [r["image"] for r in first] == [str(p) for p in sorted(album.rglob("*")) if p.suffix.lower() != ".txt"
                                           and p.suffix != ".tsv" and p.is_file()]  # fmt: skip
    # an interrupted run: the last two records missing, the one before torn mid-line
    lines = out_file.read_text().splitlines()
    out_file.write_text("\n".join(lines[:2]) + "\n" + lines[2][:25])
    seen = []
    from captioning.photos import collection

    real = collection.read_photo
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(collection, "read_photo", lambda name, *a: (seen.append(name), real(name, *a))[1])
        code, _, err = run(capsys, album, "--model", model_file, *FAST, "--jsonl", out_file, "--resume",
                           "--workers", "0", "--batch-size", "2")  # fmt: skip
    assert code == 0 and "2 image(s) already in" in err
    assert seen == [r["image"] for r in first[2:]]  # only the images without a whole record were read again
    again = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert again == first  # the same records (batched as before), in the same order, the torn line gone
    # a rerun without --resume starts the file afresh, and says so (the first run had no such note)
    code, _, err = run(capsys, album, "--model", model_file, *FAST, "--jsonl", out_file, "--batch-size", "2")
    assert code == 0 and f"--jsonl {out_file} existed and is started afresh" in err
    assert [json.loads(line) for line in out_file.read_text().splitlines()] == first
    with pytest.raises(SystemExit):
        caption_main([str(album), "--resume"])
    assert "--resume needs --jsonl" in capsys.readouterr().err


def test_a_photo_named_twice_is_captioned_once_and_resume_gives_the_runs_file(capsys, model_file, album, tmp_path):
    """``caption album album/b`` captioned b's photos twice; --resume, which knows a photo by its path, counted each
    done twice ("5 image(s) already in" a file of 2) and wrote a file short of the run it continued."""
    out_file = tmp_path / "out.jsonl"
    args = [album, album / "b", f"./{album.relative_to(tmp_path)}/a1.png", "--model", model_file, *FAST, "--jsonl",
            out_file, "--batch-size", "2"]  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        code, _, err = run(capsys, *args)
        assert code == 0 and "caption: note: 4 input(s) name a photo named before (first: " in err
        full = out_file.read_text()
        images = [json.loads(line)["image"] for line in full.splitlines()]
        assert len(images) == 5 == len({os.path.abspath(i) for i in images})  # each photo once
        out_file.write_text("".join(full.splitlines(keepends=True)[:2]))  # interrupted after two records
        code, _, err = run(capsys, *args, "--resume")
    assert code == 0 and "caption: 2 image(s) already in" in err
    assert out_file.read_text() == full


def test_a_link_to_a_photo_named_too_is_captioned_once(capsys, model_file, album, tmp_path):
    """A folder holding a photo and a symbolic link to it captioned the photo twice, once under each name (a link to
    a folder was followed once): the link is the photo it names."""
    (album / "a1_link.png").symlink_to(album / "a1.png")
    code, out, err = run(capsys, album, "--model", model_file, *FAST)
    assert code == 0 and "caption: note: 1 input(s) name a photo named before (first: " in err
    assert len(out.strip().splitlines()) == 5  # the album's 5 photos, each once
    assert "a1_link.png" not in out and "a1.png" in out  # the name sorted first: the photo's own here
    # which name it is captioned under, said: a link sorted first takes the photo's records ("first: a1.png" read as
    # if the photo's own name came first)
    (album / "a0_link.png").symlink_to(album / "a1.png")
    code, out, err = run(capsys, album, "--model", model_file, *FAST)
    assert code == 0 and "a0_link.png" in out and "/a1.png" not in out, out
    assert f"2 input(s) name a photo named before (first: {album / 'a1.png'}, captioned as {album / 'a0_link.png'})" \
        in err  # fmt: skip


def test_resume_drops_only_a_torn_last_line(tmp_path):
    """A killed run's last record is cut before its newline: that line is dropped. A whole last line (newline and
    all) that is not a caption record is someone's own: the file is refused and left as it is (it was rewritten
    without that line, the user's line lost)."""
    from captioning.photos.collection import ResumeError, captioned_lines, read_done

    record = json.dumps({"image": "a.jpg", "caption": "a dog", "error": None})
    out = tmp_path / "out.jsonl"
    out.write_text(f"{record}\n" + record[:20])  # torn mid-record
    assert [line for _, line in captioned_lines(out)] == [record]
    for text in ('{"model": "my-notes"}\n', "hello\n", f"{record}\nhello\n\n"):
        out.write_text(text)
        with pytest.raises(ResumeError, match="is not a caption record"):
            read_done(out)
        assert out.read_text() == text


def test_workers_decode_in_other_processes_with_the_same_result(capsys, model_file, album):
    base = ["--model", str(model_file), *FAST, "--json", "--batch-size", "2"]
    code, one, _ = run(capsys, album, *base, "--workers", "0")
    code2, two, _ = run(capsys, album, *base, "--workers", "2")
    assert code == code2 == 0 and json.loads(one) == json.loads(two)


def test_an_empty_folder_is_one_clear_error(capsys, model_file, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as exc:
        caption_main([str(tmp_path / "empty"), "--model", str(model_file)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "no images" in err


def test_an_empty_folder_among_inputs_is_named_and_fails_the_exit_code(model_file, tmp_path, capsys):
    """a and b are captioned, the empty folder is one note, the exit code is 1."""
    (tmp_path / "emptydir").mkdir()
    jsonl = tmp_path / "out.jsonl"
    args = [PHOTOS[0], str(tmp_path / "emptydir"), PHOTOS[1], "--model", str(model_file), *FAST, "--jsonl", str(jsonl)]
    code, _, err = run(capsys, *args)
    assert code == 1, err
    notes = [line for line in err.splitlines() if "emptydir" in line]
    assert notes == [f"caption: note: {tmp_path / 'emptydir'}: no image files"] and "Traceback" not in err
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [r["image"] for r in records] == PHOTOS[:2] and all(r["error"] is None for r in records)


def test_a_folder_that_cannot_be_listed_is_named_and_fails_the_exit_code(model_file, tmp_path, capsys, monkeypatch):
    """os.walk skipped a folder it could not list (chmod 000, as a non-root user) unsaid: its photos were left out of
    a run that exited 0; given alone, it was "no image files". (Root reads any folder: the refusal is simulated.)"""
    import shutil

    (tmp_path / "album" / "locked").mkdir(parents=True)
    shutil.copy(PHOTOS[0], tmp_path / "album" / "ok.png")
    shutil.copy(PHOTOS[1], tmp_path / "album" / "locked" / "y.png")
    locked, scandir = str(tmp_path / "album" / "locked"), os.scandir

    def refusing(path="."):
        if os.fspath(path) == locked:
            raise PermissionError(13, "Permission denied", locked)
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    code, out, err = run(capsys, str(tmp_path / "album"), "--model", str(model_file), *FAST)
    assert code == 1 and out.startswith(f"{tmp_path / 'album' / 'ok.png'}\t") and out.count("\n") == 1
    assert f"caption: note: {locked}: cannot be read (Permission denied): its photos are not captioned" in err
    with pytest.raises(SystemExit) as exc:
        caption_main([locked, "--model", str(model_file)])
    assert exc.value.code == 2
    assert capsys.readouterr().err == f"caption: error: no images: {locked}: cannot be read (Permission denied)\n"


@pytest.mark.slow
def test_a_full_disk_mid_run_is_one_line_and_resume_finishes_the_run(model_file, album, tmp_path, capsys):
    """The real command in a subprocess whose files may not grow past 3 KB (RLIMIT_FSIZE: the kernel's "disk full"
    for this process): one line naming --jsonl, exit code 2, the records written stay whole; --resume (no limit, in
    this process) then captions exactly the rest: no record lost or repeated."""
    import resource
    import signal
    import subprocess
    import sys

    jsonl = tmp_path / "out.jsonl"
    # --workers 0: the limit would also stop the workers' shared-memory hand-over (a real full disk does not)
    args = [str(album), "--model", str(model_file), *FAST, "--jsonl", str(jsonl), "--batch-size", "2", "--workers", "0"]
    code = "from captioning.commands.caption import caption_main; import sys; sys.exit(caption_main(sys.argv[1:]))"

    def limit():  # in the child: writes past 3 KB fail with EFBIG instead of killing it (SIGXFSZ ignored)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000))

    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          preexec_fn=limit)  # fmt: skip
    err = [line for line in done.stderr.splitlines() if "error" in line]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert err == [f"caption: error: cannot write --jsonl {jsonl}: [Errno 27] File too large; --resume continues "
                   "after the images it holds"]  # fmt: skip
    lines = jsonl.read_text().splitlines()
    whole = [json.loads(line) for line in lines if line.endswith("}")]
    assert whole and all(r["image"] for r in whole)
    from captioning.photos.image_paths import image_paths

    images = sorted(image_paths([str(album)]))
    assert len(whole) < len(images)  # the limit stopped it part of the way
    assert caption_main([*args, "--resume"]) == 0, capsys.readouterr().err
    assert sorted(json.loads(line)["image"] for line in jsonl.read_text().splitlines()) == images


def test_after_ctrl_c_the_notes_count_only_the_captions_written(capsys, model_file, album, monkeypatch):
    import captioning.commands.caption_batch as cli

    calls: list = []
    monkeypatch.setattr(cli, "caption_items", ctrl_c_at(cli.caption_items, 2, calls))  # the second batch of 2
    with pytest.raises(SystemExit) as exc:
        caption_main([str(album), "--model", str(model_file), *FAST, "--batch-size", "2", "--workers", "0"])
    out, err = capsys.readouterr()
    assert exc.value.code == 130 and len(out.splitlines()) == 2  # the first batch, printed
    first_two = f"{album / 'a1.png'}, {album / 'a2.JPG'}"
    # an untrained model never ends a caption: the first batch's 2 were cut off, the note says so before the end line
    assert err.splitlines() == [f"caption: note: 2 caption(s) reached --max-len 6 and are cut off: {first_two}",
                                "caption: interrupted after 2 image(s)"]  # fmt: skip
    # --json prints its records at the end: interrupted, it printed none and the captions were lost; now those of the
    # photos captioned, a whole JSON array, then the notes on them and the line
    calls.clear()
    with pytest.raises(SystemExit) as exc:
        caption_main([str(album), "--model", str(model_file), *FAST, "--batch-size", "2", "--workers", "0", "--json"])
    out, err = capsys.readouterr()
    records = json.loads(out)
    assert exc.value.code == 130 and len(records) == 2 and all(r["caption"] and not r["error"] for r in records)
    assert err.splitlines() == [f"caption: note: 2 caption(s) reached --max-len 6 and are cut off: {first_two}",
                                "caption: interrupted after 2 image(s)"]  # fmt: skip


def test_ctrl_c_while_a_batchs_page_is_made_leaves_the_page_and_records_at_the_batch_before(
    capsys, model_file, album, monkeypatch, tmp_path
):
    """The page's sections were written before the records: a Ctrl-C between them (a photo's thumbnail is encoded
    there) left the page a batch ahead of --jsonl. Both are written together now, after the sections are made."""
    monkeypatch.setattr(caption_loop, "html_sections", ctrl_c_at(caption_loop.html_sections, 2))
    page, jsonl = tmp_path / "cap.html", tmp_path / "out.jsonl"
    with pytest.raises(SystemExit) as exc:
        caption_main([str(album), "--model", str(model_file), *FAST, "--batch-size", "2", "--workers", "0", "--html",
                      str(page), "--jsonl", str(jsonl)])  # fmt: skip
    assert exc.value.code == 130
    assert len(jsonl.read_text().splitlines()) == 2 and page.read_text().count('<section class="item') == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"caption: interrupted after 2 image(s) in {jsonl}; --resume " \
        "continues after them"  # fmt: skip
    # resumed and stopped again a batch on: the line counts what FILE holds (it said 2, this run's)
    monkeypatch.setattr(caption_loop, "html_sections", ctrl_c_at(caption_loop.html_sections, 2))
    with pytest.raises(SystemExit):
        caption_main([str(album), "--model", str(model_file), *FAST, "--batch-size", "2", "--workers", "0",
                      "--jsonl", str(jsonl), "--resume", "--html", str(tmp_path / "more.html")])  # fmt: skip
    assert len(jsonl.read_text().splitlines()) == 4
    assert f"caption: interrupted after 4 image(s) in {jsonl}" in capsys.readouterr().err.splitlines()[-1]


def test_a_ctrl_c_between_a_batchs_page_and_records_waits_for_the_records(capsys, model_file, album, tmp_path,
                                                                           monkeypatch):  # fmt: skip
    """A Ctrl-C after the page's sections of a batch and before its records is held until the records are written
    (the page was a batch ahead of --jsonl)."""
    import signal

    real, calls = caption_loop.record_line, []

    def signalled(rec):  # the second batch's first record: Ctrl-C (its page sections are written)
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return real(rec)

    monkeypatch.setattr(caption_loop, "record_line", signalled)
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    page, jsonl = tmp_path / "cap.html", tmp_path / "out.jsonl"
    try:
        with pytest.raises(SystemExit) as exc:
            caption_main([str(album), "--model", str(model_file), *FAST, "--batch-size", "2", "--workers", "0",
                          "--html", str(page), "--jsonl", str(jsonl)])  # fmt: skip
    finally:
        signal.signal(signal.SIGINT, saved)
    assert exc.value.code == 130
    assert len(jsonl.read_text().splitlines()) == 4 and page.read_text().count('<section class="item') == 4


def test_ctrl_c_with_loader_workers_removes_the_outputs_lock_files(capsys, model_file, album, monkeypatch):
    """With loader workers the interrupted run leaves by os._exit (caption_loop: no teardown racing the workers), past
    caption_main's release of its outputs: `.cap.html.attention-toolkit.lock` stayed beside the page (a run without
    workers, and translate --html, remove theirs)."""
    import captioning.commands.caption_batch as cli

    calls, parent, real_exit, left = [], os.getpid(), os._exit, []

    def exit_here(code: int) -> None:  # the lock files the process would leave; the workers leave as they do
        if os.getpid() != parent:
            real_exit(code)
        left.extend(p.name for p in album.parent.glob(".*.lock"))
        raise SystemExit(code)

    monkeypatch.setattr(cli, "caption_items", ctrl_c_at(cli.caption_items, 2, calls))
    monkeypatch.setattr(os, "_exit", exit_here)
    page, jsonl = album.parent / "cap.html", album.parent / "out.jsonl"
    args = [album, "--model", model_file, *FAST, "--batch-size", "2", "--workers", "1", "--html", page, "--jsonl",
            jsonl]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        caption_main([str(a) for a in args])
    assert exc.value.code == 130, capsys.readouterr().err
    assert page.is_file() and len(jsonl.read_text().splitlines()) == 2  # the first batch, written whole
    assert calls and left == []


@pytest.mark.slow
@pytest.mark.parametrize("sig, exit_code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_ctrl_c_mid_run_is_one_line_and_resume_loses_and_repeats_nothing(model_file, tmp_path, sig, exit_code):
    """SIGINT to the real command while it writes a folder's records: exit 130, one line saying how far it got, no
    traceback; --resume then captions exactly the rest. SIGTERM (a scheduler's limit) alike, exit 143: it ended the
    run unsaid, its lock file left; and with --html it threw the page away ("not written"), where Ctrl-C wrote the
    images captioned as a partial page."""
    import signal
    import subprocess
    import sys
    import time

    folder = tmp_path / "many"
    folder.mkdir()
    n = 40
    with Image.open(PHOTOS[0]) as im:
        for i in range(n):
            im.convert("RGB").resize((48 + i % 60, 40)).save(folder / f"{i:03d}.png")
    jsonl = tmp_path / "out.jsonl"
    args = [str(folder), "--model", str(model_file), *FAST, "--jsonl", str(jsonl), "--batch-size", "2"]
    code = "from captioning.commands.caption import caption_main; import sys; sys.exit(caption_main(sys.argv[1:]))"
    page = tmp_path / "page.html"
    # The third batch waits (no race with a fast machine): the signal arrives with 2 batches (4 records) written.
    # Ctrl-C as a terminal delivers it: a test run started in the background by a non-interactive shell inherits
    # SIGINT ignored, and Python then installs no KeyboardInterrupt handler (the command would sleep on).
    paused = (
        "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import sys, time; import captioning.commands.caption_batch as cli; real, calls = cli.caption_items, []\n"
        "def third_waits(*a, **k):\n"
        "    calls.append(1)\n"
        "    if len(calls) == 3: time.sleep(900)\n"
        "    return real(*a, **k)\n"
        "from captioning.commands.caption import caption_main\n"
        "cli.caption_items = third_waits; sys.exit(caption_main(sys.argv[1:]))"
    )
    proc = subprocess.Popen([sys.executable, "-c", paused, *args, "--html", str(page)], stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    deadline = time.monotonic() + 600  # a loaded machine is slow to start; the signal waits for the 4 records
    while time.monotonic() < deadline and (not jsonl.is_file() or len(jsonl.read_text().splitlines()) < 4):
        time.sleep(0.05)
    assert jsonl.is_file() and len(jsonl.read_text().splitlines()) == 4, "2 batches were not written in 600 s"
    proc.send_signal(getattr(signal, sig))
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == exit_code and "Traceback" not in err, err
    note = [line for line in err.splitlines() if "interrupted" in line]
    assert len(note) == 1 and note[0].startswith("caption: interrupted after ") and "--resume" in note[0], err
    first = [json.loads(line)["image"] for line in jsonl.read_text().splitlines()]
    assert len(first) == 4  # the two batches before the signal, whole
    shown = page.read_text()  # the page of those 4, said to be partial
    assert "Partial page: the run was interrupted after 4 image(s)" in shown
    assert shown.count('<section class="item') == 4
    done = subprocess.run([sys.executable, "-c", code, *args, "--resume"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    images = [json.loads(line)["image"] for line in jsonl.read_text().splitlines()]
    assert sorted(images) == sorted(str(p) for p in folder.iterdir()) and len(set(images)) == n


def test_a_huge_image_gets_our_note_not_pillows_warning(capsys, model_file, monkeypatch):
    import warnings

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 30_000)  # coffee.png (256 x 171) is "huge" now, not a bomb (2x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)  # leaking Pillow's warning would fail here
        code, out, err = run(capsys, PHOTOS[0], "--model", model_file, *FAST)
    assert code == 0 and out.strip()
    notes = [line for line in err.splitlines() if "very large image" in line]
    assert len(notes) == 1 and notes[0].startswith(f"caption: note: {PHOTOS[0]}: a very large image")


@pytest.mark.parametrize(
    "module, main, prog",
    [
        ("captioning.commands.caption", "caption_main", "caption"),
        ("captioning.commands.export", "export_main", "caption-export"),
        ("text_attn.translation.export", "export_main", "text-export"),
        ("text_attn.translation.translate_cli", "translate_main", "translate"),
    ],
)
def test_help_answers_without_importing_torch(module, main, prog):
    """``--help`` is the first thing a newcomer types: it must not wait seconds for torch to load."""
    import subprocess
    import sys

    probe = f"import sys\nfrom {module} import {main}\ntry:\n    {main}(['--help'])\n"
    probe += "except SystemExit as e:\n    print('exit', e.code, 'torch' in sys.modules)\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert f"usage: {prog}" in done.stdout and done.stdout.strip().endswith("exit 0 False"), done.stderr[-500:]


def test_after_ctrl_c_only_the_fd_sharing_threads_broken_connection_is_dropped(monkeypatch):
    """A worker stopped mid-handover breaks multiprocessing's fd-sharing thread (resource_sharer.py); its traceback
    would print as the loop unwinds. That one is dropped; another thread's error still prints."""
    import multiprocessing.resource_sharer as sharer
    import threading

    passed_on = []
    monkeypatch.setattr(threading, "excepthook", lambda args: passed_on.append(str(args.exc_value)))
    caption_loop._drop_handover_noise()  # wraps the hook above
    hook = threading.excepthook
    caption_loop._drop_handover_noise()  # a second caption_main in the process: still the one hook, not a chain
    assert threading.excepthook is hook
    namespace: dict = {}
    exec(compile("def _serve():\n    raise ConnectionResetError('peer gone')\n", sharer.__file__, "exec"), namespace)

    def elsewhere():
        raise ConnectionResetError("another thread")

    for target in (namespace["_serve"], elsewhere):
        thread = threading.Thread(target=target)
        thread.start()
        thread.join()
    assert passed_on == ["another thread"]


def test_export_takes_a_bundled_model_by_name(tmp_path, capsys):
    # as --model and model.init_from take it ("shapes: no such file" was the answer)
    out = tmp_path / "shapes.pt"
    assert export_main(["shapes", str(out)]) == 0
    assert "from model file " in capsys.readouterr().err and Captioner.load(out).vocab == Captioner.load("shapes").vocab


def test_files_that_are_not_photos_are_each_one_line_and_the_rest_are_captioned(capsys, model_file, tmp_path,
                                                                                monkeypatch):  # fmt: skip
    """A FIFO named like a photo hung the run (opening it waits for a writer); a name too long for the file system or
    with a NUL byte (a list on stdin) ended it with a traceback, the other photos uncaptioned; a symbolic link loop was
    "no such file"."""
    import io
    import os

    good = tmp_path / "good.jpg"
    good.write_bytes((IMAGES / "rocket.jpg").read_bytes())
    os.mkfifo(tmp_path / "fifo.jpg")
    (tmp_path / "loopA.jpg").symlink_to(tmp_path / "loopB.jpg")
    (tmp_path / "loopB.jpg").symlink_to(tmp_path / "loopA.jpg")
    code, out, err = run(capsys, tmp_path, "a" * 300 + ".jpg", "--model", model_file, *FAST, "--workers", "0")
    assert code == 1 and out.splitlines()[0].startswith(f"{good}\t"), (out, err)
    assert f"{tmp_path / 'fifo.jpg'}: not a regular file (a FIFO, socket or device): not read" in err
    assert f"{tmp_path / 'loopA.jpg'}: a symbolic link loop, not a file" in err
    assert f"{'a' * 300}.jpg: a file name too long for the file system" in err and "Traceback" not in err
    other = tmp_path / "other.jpg"
    other.write_bytes(good.read_bytes())
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{good}\nbad\0name.jpg\n{other}\n"))
    code, out, err = run(capsys, "-", "--model", model_file, *FAST, "--workers", "0")
    assert code == 1 and len(out.splitlines()) == 2 and "bad\\x00name.jpg: a file name with a NUL byte in it" in err


def test_the_closing_notes_name_the_first_images_then_count_the_rest(capsys):
    from captioning.commands.caption_batch import _closing_notes, tally

    counts: dict = {}
    names = [f"p{i}.jpg" for i in range(NAMED + 3)]
    for name in names:
        tally(counts, "cut", name)
    tally(counts, "far", "odd\nname.png")  # a name with a line break is written escaped: it cannot forge a line
    captioner = types.SimpleNamespace(known=lambda: "the photos")
    args = types.SimpleNamespace(max_len=6, model="m.pt", unsure=None)
    _closing_notes(captioner, args, counts)
    assert capsys.readouterr().err.splitlines() == [
        f"caption: note: {NAMED + 3} caption(s) reached --max-len 6 and are cut off: {', '.join(names[:NAMED])} "
        "and 3 more",
        "caption: note: 1 image(s) look unlike the photos: their captions may be wrong (odd\\x0aname.png)",
    ]
    # several processes that kept no names (counts alone): the records' field says which
    _closing_notes(captioner, args, {"cut": 2, "far": 0})
    assert capsys.readouterr().err == (
        "caption: note: 2 caption(s) reached --max-len 6 and are cut off: their records' 'truncated' says which\n"
    )


@pytest.mark.parametrize(
    ("given", "named"),
    [
        (["--decode-on-device"], "--decode-on-device"),  # the demo draws its overlays here: it was taken, unused
        (["--batch-size", "2"], "--batch-size"),
        (["--workers", "0", "--batch-size", "3"], "--batch-size and --workers"),
        (["shapes", "--workers", "1"], "--workers"),
    ],
)
def test_the_demo_refuses_the_options_of_a_run_over_images(capsys, given, named):
    """Each was accepted and not used, silently (exit 0)."""
    with pytest.raises(SystemExit) as exc:
        caption_main(["--demo", *given])
    assert exc.value.code == 2
    said = f"{named}: for a run over IMAGE inputs; --demo captions a few pictures of its own in one batch"
    assert capsys.readouterr().err == f"caption: error: {said}, drawn here: give it without\n"


def test_a_batch_and_workers_are_no_larger_than_the_photos_need(model_file, tmp_path, monkeypatch, capsys):
    """--batch-size 10**9 made the loader fill 17 GB before its first photo (a list of the batch's size), and
    --workers 40 on 37 photos started ~30 processes; torch's advice on workers past the cores came twice, with its
    source line. The batch is capped at the photos to do, the workers at the batches, and a note says the rest."""
    folder = tmp_path / "three"
    folder.mkdir()
    for i in range(3):
        Image.new("RGB", (40, 30), (60 * i, 90, 160)).save(folder / f"{i}.png")
    from captioning.photos import photo_stream

    made = []
    real = photo_stream.photo_batches
    monkeypatch.setattr(photo_stream, "photo_batches", lambda stream, workers: made.append((stream.batch_size,
                        workers)) or real(stream, 0))  # fmt: skip
    args = [str(folder), "--model", str(model_file), *FAST]
    assert caption_main([*args, "--batch-size", "65536", "--workers", "8"]) == 0
    assert made[-1] == (3, 0)  # one batch of the three: no worker started for it
    monkeypatch.setattr(caption_loop, "cpu_ids", lambda: {0})  # one CPU this process may use
    assert caption_main([*args, "--batch-size", "1", "--workers", "8"]) == 0
    assert made[-1] == (1, 3)  # three batches: three workers, not eight
    err = capsys.readouterr().err
    assert "caption: note: --workers 3 on 1 core(s): the workers share the cores" in err
    assert "This DataLoader will create" not in err
    # shards: their photos are counted as they are read, so the workers asked for are started (2 stood for "more than
    # one batch" and capped them at 2)
    from helpers.shards import write_shard

    shard = write_shard(tmp_path / "s.tar", 0, 4)
    assert caption_main([str(shard), "--model", str(model_file), *FAST, "--batch-size", "1", "--workers", "4"]) == 0
    assert made[-1] == (1, 4)


def test_an_interrupted_run_says_how_many_of_its_photos_failed(capsys, model_file, album, tmp_path, monkeypatch):
    """ "interrupted after 2 image(s) in FILE; --resume continues after them" counted a photo that failed, which the
    --resume then tried again: the failed ones are said."""
    import captioning.commands.caption_batch as cli

    (album / "0broken.png").write_bytes(b"not a png")  # sorted first: in the first batch
    monkeypatch.setattr(cli, "caption_items", ctrl_c_at(cli.caption_items, 2))
    jsonl = tmp_path / "out.jsonl"
    with pytest.raises(SystemExit) as exc:
        caption_main([str(album), "--model", str(model_file), *FAST, "--batch-size", "2", "--workers", "0", "--jsonl",
                      str(jsonl)])  # fmt: skip
    assert exc.value.code == 130
    said = f"caption: interrupted after 2 image(s) in {jsonl}; --resume continues after them"
    assert capsys.readouterr().err.splitlines()[-1] == f"{said} (1 failed: --resume tries them again)"
