"""Photos mixed into training beside a folder's own (data.mix_root: Flickr8k's train photos; data.mix_image_dir with
data.mix_captions_tsv: another folder): trained on, never held out, a seeded sample of data.mix_size, the data's own
photos among them left out, the JPEG step read from the data's own photos alone, and the refusals."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch
from helpers.scene_corpus import write_flickr8k
from PIL import Image

from captioning.commands.caption import model_info
from captioning.commands.train import caption_train_cli, train_main
from captioning.model.captioner import Captioner
from captioning.photos.domain import novelty
from captioning.photos.jpeg_step import photo_format
from captioning.training.data import FLICKR8K_TERMS, CaptionDataModule
from captioning.training.mixing import with_mixed_held_out
from captioning.training.readers import CaptionDataError, read_flickr8k

CONFIG = str(Path(__file__).parent.parent / "fixtures/captions/tiny_shapes.yaml")


def _own(tmp_path: Path, n: int = 20) -> tuple[Path, Path]:
    """n PNG photos of one colour each ("a zebra" in every caption: a word Flickr8k's scenes do not have)."""
    folder = tmp_path / "mine"
    folder.mkdir()
    for k in range(n):
        Image.new("RGB", (32, 32), (11 * k % 256, 90, 200)).save(folder / f"p{k:02d}.png")
    tsv = tmp_path / "mine.tsv"
    tsv.write_text("".join(f"p{k:02d}.png\ta zebra number {k}\n" for k in range(n)), encoding="utf-8")
    return folder, tsv


def _data(folder: Path, tsv: Path, **mix) -> CaptionDataModule:
    dm = CaptionDataModule(source="folder", image_dir=str(folder), captions_tsv=str(tsv), **mix)
    dm.setup("fit")
    return dm


def _names(dm: CaptionDataModule, split: str) -> list[str]:
    return [Path(p).name for p in dm.splits[split].images]


def test_flickr8k_train_photos_are_trained_on_and_never_held_out(tmp_path, capsys):
    folder, tsv = _own(tmp_path)
    flickr = write_flickr8k(tmp_path / "flickr8k", n=30)  # 18 train, 6 dev, 6 test photos
    train_names = {p.name for p in (it.path for it in read_flickr8k(flickr)["train"])}
    plain = _data(folder, tsv)
    capsys.readouterr()
    mixed = _data(folder, tsv, mix_root=str(flickr), mix_size=5)
    assert mixed.mixed == 5 and plain.mixed == 0
    for split in ("val", "test"):  # the folder's held-out photos are the same, none of them mixed in
        assert _names(mixed, split) == _names(plain, split)
    own = _names(plain, "train")
    assert _names(mixed, "train")[: len(own)] == own  # the data's own first, then the mix: all Flickr8k train photos
    added = _names(mixed, "train")[len(own) :]
    assert len(added) == 5 and set(added) <= train_names
    refs = mixed.splits["train"].references[len(own) :]
    assert all(len(caps) == 3 for caps in refs)  # each photo with all its captions
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "caption data: mixed in 5 of Flickr8k's train photos (15 captions): trained on, never validated or tested on"
    )
    assert mixed.facts == {"mixed_in": "5 of Flickr8k's train photos", "terms": FLICKR8K_TERMS}
    assert plain.facts == {}
    # the vocabulary is the train captions', the mix's words too; the JPEG step the folder's PNG files' (none), not
    # the mix's JPEG files' (mixed with PNG ones, "not all JPEG files")
    assert {"zebra", "circle"} <= set(mixed.vocab.itos) and "circle" not in plain.vocab.itos
    assert mixed.train_photo_format() == plain.train_photo_format() == photo_format(plain.splits["train"].images)
    assert photo_format(mixed.splits["train"].images) != mixed.train_photo_format()


def test_the_sample_is_the_same_each_run_and_a_larger_one_keeps_it(tmp_path):
    folder, tsv = _own(tmp_path)
    flickr = write_flickr8k(tmp_path / "flickr8k", n=30)

    def sample(size, seed=0):
        dm = CaptionDataModule(source="folder", image_dir=str(folder), captions_tsv=str(tsv), mix_root=str(flickr),
                               mix_size=size, seed=seed)  # fmt: skip
        dm.setup("fit")
        return _names(dm, "train")[-dm.mixed :]

    three, seven = sample(3), sample(7)
    assert sample(3) == three and seven[:3] == three
    assert sorted(sample(None)) == sorted(p.name for p in (it.path for it in read_flickr8k(flickr)["train"]))
    assert sample(7, seed=1) != seven  # another seed, another sample


def test_the_datas_own_photos_in_the_mix_are_left_out(tmp_path, capsys):
    """A mixed photo that is one of the folder's (the file itself through a link, a copy of the same name and size,
    or a copy under another name: its held-out copy was trained on as the mix's) would be trained on twice, or trained
    on where the folder holds it out."""
    folder, tsv = _own(tmp_path)
    flickr = write_flickr8k(tmp_path / "flickr8k", n=30)
    train = [it.path for it in read_flickr8k(flickr)["train"]]
    shutil.copy(train[0], folder / train[0].name)
    (folder / train[1].name).symlink_to(train[1])
    shutil.copy(train[2], folder / "IMG_0002.jpg")
    with tsv.open("a", encoding="utf-8") as f:
        f.write(f"{train[0].name}\ta copy\n{train[1].name}\ta link\nIMG_0002.jpg\ta renamed copy\n")
    dm = _data(folder, tsv, mix_root=str(flickr))
    mixed = _names(dm, "train")[-dm.mixed :]
    assert dm.mixed == len(train) - 3 and not {train[0].name, train[1].name, train[2].name} & set(mixed)
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "caption data: mixed in 15 of Flickr8k's train photos (45 captions): trained on, never validated or tested "
        "on; 3 left out as the data's own photos"
    )
    with pytest.raises(CaptionDataError, match=r"^data.mix_size 16: data.mix_root .* has 15 photos to mix in \(3 more "
                       r"are the data's own\)$"):  # fmt: skip
        _data(folder, tsv, mix_root=str(flickr), mix_size=16)


def test_another_folder_is_mixed_in_whole_and_flickr8k_token_lines_read(tmp_path, capsys):
    folder, tsv = _own(tmp_path)
    old = tmp_path / "old_photos"
    old.mkdir()
    for k in range(4):
        Image.new("RGB", (32, 32), (0, 40 * k, 0)).save(old / f"o{k}.jpg", quality=80)
    old_tsv = tmp_path / "old.token.txt"  # Flickr8k's token file's way: "photo.jpg#0<TAB>caption"
    old_tsv.write_text("".join(f"o{k}.jpg#{j}\tan old photo {j}\n" for k in range(4) for j in range(2)))
    dm = _data(folder, tsv, mix_image_dir=str(old), mix_captions_tsv=str(old_tsv))
    assert set(_names(dm, "train")[-dm.mixed :]) == {f"o{k}.jpg" for k in range(4)}
    assert all(len(c) == 2 for c in dm.splits["train"].references[-4:])
    assert "caption data: mixed in all 4 of the photos of old_photos (8 captions)" in capsys.readouterr().err
    assert dm.facts == {"mixed_in": "all 4 of the photos of old_photos"}  # a folder's terms are the user's to say


def test_a_flickr8k_copy_without_its_split_files_is_refused_as_a_mix(tmp_path, capsys):
    """Kaggle's download has no split files: its "train" was a random draw, about 1 in 8 of them Flickr8k's standard
    test photos (the everyday photos are scored on them), called "Flickr8k's train photos". With the three files put
    there it is mixed in as the original layout is."""
    from helpers.flickr8k import write_kaggle

    folder, tsv = _own(tmp_path)
    kaggle = write_kaggle(tmp_path / "kaggle")
    with pytest.raises(CaptionDataError, match=re.escape(f"data.mix_root: {kaggle}: no standard split files (")):
        _data(folder, tsv, mix_root=str(kaggle))
    assert "drawn at random" not in capsys.readouterr().err  # refused before the random split's note
    names = sorted(p.name for p in (kaggle / "Images").iterdir())
    for split, part in (("train", names[:-2]), ("dev", names[-2:-1]), ("test", names[-1:])):
        (kaggle / f"Flickr_8k.{split}Images.txt").write_text("\n".join(part) + "\n")
    dm = _data(folder, tsv, mix_root=str(kaggle))
    assert set(_names(dm, "train")[-dm.mixed :]) == set(names[:-2])


def test_unreadable_photos_left_out_are_counted_where_they_were(tmp_path, capsys):
    """A mixed-in photo found unreadable as the features were cached was counted as one of the data's own: the model
    file said "6 mixed in" of 5 and one own photo fewer than were trained on."""
    folder, tsv = _own(tmp_path)
    old = tmp_path / "old_photos"
    old.mkdir()
    for k in range(4):
        Image.new("RGB", (32, 32), (0, 40 * k, 0)).save(old / f"o{k}.jpg", quality=80)
    old_tsv = tmp_path / "old.tsv"
    old_tsv.write_text("".join(f"o{k}.jpg\tan old photo\n" for k in range(4)))
    dm = _data(folder, tsv, mix_image_dir=str(old), mix_captions_tsv=str(old_tsv))
    own = len(dm.splits["train"].images) - 4
    dm.features["train"] = torch.zeros(own + 4, 3)  # as the cache holds them
    dm._leave_out("train", [own + 3, 0])  # the last mixed-in photo and the first own one
    assert dm.mixed == 3 and dm.mixed_said == "all 4 of the photos of old_photos (1 of them unreadable, left out)"
    assert dm.photos_read.startswith(f"{own - 1} train photos ({own - 1} captions) and 3 mixed in")
    assert set(_names(dm, "train")[-dm.mixed :]) == {"o0.jpg", "o1.jpg", "o2.jpg"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"source": "shapes", "mix_root": "f"}, "data.source shapes draws its scenes: photos are mixed into a folder"),
        (
            {"mix_root": "f", "mix_image_dir": "d", "mix_captions_tsv": "t"},
            "data.mix_root (a Flickr8k folder) or data.mix_image_dir with data.mix_captions_tsv: one of the two",
        ),
        ({"mix_image_dir": "d"}, "data.mix_image_dir and data.mix_captions_tsv are read together"),
        ({"mix_captions_tsv": "t"}, "data.mix_image_dir and data.mix_captions_tsv are read together"),
        ({"mix_size": 5}, "data.mix_size is read with data.mix_root or data.mix_image_dir"),
        ({"mix_root": "f", "mix_size": 0}, "data.mix_size must be at least 1, got 0"),
    ],
)
def test_mix_options_that_cannot_be_read_are_refused_at_once(tmp_path, options, message):
    folder, tsv = _own(tmp_path, 4)
    given = {"source": "folder", "image_dir": str(folder), "captions_tsv": str(tsv)}
    if options.get("source") == "shapes":
        given = {}
    with pytest.raises(CaptionDataError, match="^" + re.escape(message)):
        CaptionDataModule(**{**given, **options})


def test_a_mix_of_only_the_datas_own_photos_or_a_missing_folder_is_one_line(tmp_path, cli_run_in_tmp, capsys):
    folder, tsv = _own(tmp_path)
    with pytest.raises(CaptionDataError, match=r"all 20 of its photos are the data's own: nothing to mix in"):
        _data(folder, tsv, mix_image_dir=str(folder), mix_captions_tsv=str(tsv))
    with pytest.raises(SystemExit) as exc:
        train_main(["fit", "--config", CONFIG, "--data.source", "folder", "--data.image_dir", str(folder),
                    "--data.captions_tsv", str(tsv), "--data.mix_root", str(tmp_path / "nowhere")])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"caption-train: error: data.mix_root: {tmp_path / 'nowhere'}: data root not found", err
    with pytest.raises(CaptionDataError, match=r"^data.mix_image_dir, data.mix_captions_tsv: captions file .*gone.tsv "
                       "does not exist$"):  # fmt: skip
        _data(folder, tsv, mix_image_dir=str(folder), mix_captions_tsv=str(tmp_path / "gone.tsv"))


def test_a_fit_with_flickr8k_mixed_in_says_so_in_its_model_file(tmp_path, cli_run_in_tmp, capsys):
    folder, tsv = _own(tmp_path)
    flickr = write_flickr8k(tmp_path / "flickr8k", n=30)
    cli = caption_train_cli([
        "fit", "--config", CONFIG, "--data.source", "folder", "--data.image_dir", str(folder),
        "--data.captions_tsv", str(tsv), "--data.train_size", "null", "--data.val_size", "2",
        "--data.test_size", "null", "--data.batch_size", "16", "--data.mix_root", str(flickr),
        "--data.mix_size", "6", "--trainer.max_steps", "2", "--model.export_path", "model.pt",
    ])  # fmt: skip
    assert cli.datamodule.mixed == 6
    model = Captioner.load("model.pt")
    assert {"zebra", "circle"} <= set(model.vocab.itos)
    info = model_info(model, "model.pt")
    assert "mixed in:       6 of Flickr8k's train photos" in info
    assert f"terms:          {FLICKR8K_TERMS}" in info
    assert model.domain == "mine"  # the folder's own name: the photos the model was taught


def test_every_tenth_photo_mixed_in_sets_the_threshold_beside_val():
    train, val = torch.arange(30.0)[:, None], torch.tensor([[100.0]])  # the last 20 rows: photos mixed in
    kept, held = with_mixed_held_out(train, val, 20)
    assert held.flatten().tolist() == [100.0, 19.0, 29.0]  # every tenth of the mixed rows: 10+9, 20+9
    assert kept.flatten().tolist() == [i for i in range(30) if i not in (19, 29)]
    assert with_mixed_held_out(["a", "b"], ["v"], 0) == (["a", "b"], ["v"])  # nothing mixed in: as given
    names = [f"p{i}" for i in range(12)]
    assert with_mixed_held_out(names, None, 10) == ([n for n in names if n != "p11"], ["p11"])
    assert with_mixed_held_out(names, ["v"], 9)[1] == ["v"]  # under 10 mixed in: none to spare


def test_a_model_taught_one_kind_with_another_mixed_in_does_not_flag_the_other(tmp_path):
    """The domain check's threshold was set on val alone, which holds only the folder's kind: a model trained on shape
    scenes with 500 of Flickr8k's photos mixed in flagged 30 of 30 everyday photos as unlike its training photos."""
    folder, tsv = _own(tmp_path, 60)
    flickr = write_flickr8k(tmp_path / "flickr8k", n=200)  # 120 train photos
    dm = _data(folder, tsv, mix_root=str(flickr), val_size=30)
    gen = torch.Generator().manual_seed(0)
    own, mixed = len(dm.splits["train"].images) - dm.mixed, dm.mixed

    def kind(n: int, centre: int, spread: float) -> torch.Tensor:  # (n, L=4, D=16): photos of one kind
        base = torch.zeros(16)
        base[centre] = 1.0
        return base + spread * torch.randn(n, 4, 16, generator=gen)

    dm.features = {"train": torch.cat([kind(own, 0, 0.02), kind(mixed, 1, 0.3)]), "val": kind(30, 0, 0.02)}
    novel = kind(50, 1, 0.3)  # new photos of the kind mixed in
    check = dm.domain_check
    flagged = (novelty(check, novel) > check["threshold"]).float().mean().item()
    assert flagged < 0.2, flagged
    dm._domain_check, dm.mixed = None, 0  # the threshold as it was set: on val alone
    before = dm.domain_check
    assert (novelty(before, novel) > before["threshold"]).float().mean().item() > 0.8
