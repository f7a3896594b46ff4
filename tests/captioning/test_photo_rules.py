"""Whether a model's domain check applies the pixel rules for photographs (CaptionDataModule.photo_rules): judged on
its own train images. A model trained on drawings (a folder of shape scenes) had them on, and noted half of its own
scenes as unlike its training photos (278 of 540 on the your_photos benchmark's shapes folder)."""

from __future__ import annotations

from pathlib import Path

import torch
from PIL import Image

from captioning.model.bundled import DEMO_PHOTOS
from captioning.photos.domain import PIXELS_ONLY, far_from_domain
from captioning.photos.photo_check import count_unlike, photo_stats, unlike_a_photo
from captioning.training.data import CaptionDataModule
from captioning.training.shapes import make_scenes

CONFIG = str(Path(__file__).parent.parent / "fixtures/captions/tiny_shapes.yaml")


def _drawings(folder: Path, n: int, seed: int = 0) -> Path:
    """n shape scenes as PNG files in ``folder`` and their captions file beside it: a user's folder of drawings."""
    folder.mkdir(parents=True)
    lines = []
    for i, scene in enumerate(make_scenes(n, seed, size=64, max_objects=2)):
        scene.image.save(folder / f"d{i:03d}.png")
        lines += [f"d{i:03d}.png\t{' '.join(c)}\n" for c in scene.captions[:2]]
    tsv = folder.parent / f"{folder.name}.tsv"
    tsv.write_text("".join(lines), encoding="utf-8")
    return tsv


def _photos(folder: Path, n: int) -> Path:
    """n photos cut from the demo photos (real photographs; each its own bytes: a byte copy would be read as its
    original, captioning.training.readers._copies_as_one) under their own names, and their captions file."""
    folder.mkdir(parents=True)
    for i in range(n):
        src = DEMO_PHOTOS[i % len(DEMO_PHOTOS)]
        with Image.open(src) as photo:
            photo.crop((0, 0, photo.width - 1 - i // len(DEMO_PHOTOS), photo.height)).save(
                folder / f"p{i:03d}{src.suffix}"
            )
    tsv = folder.parent / f"{folder.name}.tsv"
    tsv.write_text("".join(f"{p.name}\ta photo number {k}\n" for k, p in enumerate(sorted(folder.iterdir()))))
    return tsv


def _data(folder: Path, tsv: Path, **options) -> CaptionDataModule:
    dm = CaptionDataModule(source="folder", image_dir=str(folder), captions_tsv=str(tsv), **options)
    dm.setup("fit")
    return dm


def test_photographs_pass_the_rules_and_drawings_break_them(tmp_path):
    scenes = [s.image for s in make_scenes(12, 0, size=64, max_objects=2)]
    broken = [unlike_a_photo(photo_stats(im)) for im in scenes]
    assert count_unlike(scenes) == (sum(broken), 12) and sum(broken) >= 8  # one colour covers most of most of them
    assert count_unlike(DEMO_PHOTOS) == (0, len(DEMO_PHOTOS))
    (tmp_path / "broken.jpg").write_bytes(b"\xff\xd8 not a photo")
    scenes[0].save(tmp_path / "scene.png")  # files are read too; one that cannot be read is not counted
    assert count_unlike([tmp_path / "broken.jpg", tmp_path / "scene.png", DEMO_PHOTOS[0]]) == (int(broken[0]), 2)
    assert count_unlike([]) == (0, 0)


def test_a_folder_of_drawings_turns_the_pixel_rules_off_and_says_so(tmp_path, capsys):
    drawings = _data(tmp_path / "drawings", _drawings(tmp_path / "drawings", 30))
    capsys.readouterr()
    assert drawings.photo_rules is False
    broken, own = count_unlike(drawings.splits["train"].images)
    assert own == len(drawings.splits["train"].images) and broken > own / 2
    assert capsys.readouterr().err.strip() == (
        f"caption data: {broken} of {own} train images looked at break the rules for photographs (one colour over most "
        "of the image, no colour, or noise): the model will tell images unlike its own by their features alone"
    )
    assert drawings.photo_rules is False and capsys.readouterr().err == ""  # judged once
    photos = _data(tmp_path / "photos", _photos(tmp_path / "photos", 30))
    assert photos.photo_rules is True and capsys.readouterr().err == ""
    # one image alone that breaks them (a 1 x 1 file: 1 of 26 train images, past 2%) leaves them on: it turned them
    # off, and the model captioned a flat grey image without the note
    tsv = _photos(tmp_path / "one_odd", 30)
    Image.new("RGB", (1, 1), (0, 128, 0)).save(tmp_path / "one_odd" / "tiny.png")
    tsv.write_text(tsv.read_text() + "tiny.png\ta green dot\n")
    one_odd = _data(tmp_path / "one_odd", tsv)
    assert "tiny.png" in {Path(p).name for p in one_odd.splits["train"].images}
    assert count_unlike(one_odd.splits["train"].images)[0] == 1
    assert one_odd.photo_rules is True and "break the rules" not in capsys.readouterr().err
    # too few photos for a feature check: the photo model keeps the pixel rules alone, the drawings model has none
    for dm in (drawings, photos):
        dm.features = {"train": torch.randn(len(dm.splits["train"].images), 4, 8)}
    assert photos.domain_check == PIXELS_ONLY
    assert drawings.domain_check is None


def test_the_images_mixed_in_are_not_judged(tmp_path, capsys):
    drawings_tsv, photos_tsv = _drawings(tmp_path / "drawings", 30), _photos(tmp_path / "photos", 30)
    drawings, photos = tmp_path / "drawings", tmp_path / "photos"
    mixed = _data(drawings, drawings_tsv, mix_image_dir=str(photos), mix_captions_tsv=str(photos_tsv))
    assert mixed.mixed == 30 and mixed.photo_rules is False  # the model's own kind: drawings
    mixed = _data(photos, photos_tsv, mix_image_dir=str(drawings), mix_captions_tsv=str(drawings_tsv))
    assert mixed.mixed == 30 and mixed.photo_rules is True  # photographs, drawings beside them


def test_a_model_trained_on_drawings_does_not_note_its_own_kind(tmp_path, cli_run_in_tmp, capsys):
    """A real fit on a folder of 80 shape scenes: its model file's check has no pixel rules, and new scenes of the
    same kind are noted no more often than the feature check's own threshold allows (before: most, by their pixels)."""
    from captioning.commands.train import caption_train_cli
    from captioning.model.captioner import Captioner

    tsv = _drawings(tmp_path / "drawings", 80)
    caption_train_cli([
        "fit", "--config", CONFIG, "--data.source", "folder", "--data.image_dir", str(tmp_path / "drawings"),
        "--data.captions_tsv", str(tsv), "--data.train_size", "null", "--data.val_size", "24",
        "--data.test_size", "null", "--data.batch_size", "16", "--trainer.max_steps", "2",
        "--model.export_path", "model.pt",
    ])  # fmt: skip
    assert "break the rules for photographs" in capsys.readouterr().err
    model = Captioner.load("model.pt")
    assert "prototypes" in model.domain_check and "photos" not in model.domain_check
    new = [s.image for s in make_scenes(40, 7, size=64, max_objects=2)]
    by_pixels = sum(unlike_a_photo(photo_stats(im)) for im in new)
    assert by_pixels > 20  # what the pixel rules would have noted
    features = model.encode(torch.stack([model.preprocess(im) for im in new]))
    noted = model.out_of_domain(features, new)
    assert sum(noted) <= 8, sum(noted)  # the feature check alone: a few at most
    assert sum(far_from_domain({**model.domain_check, "photos": True}, features, new)) >= by_pixels
    assert "looks unlike what the model learned from (drawings)" in model.note()
