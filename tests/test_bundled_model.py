"""The bundled default model (captioning/assets/shapes_soft.pt): `caption --demo` and photos work out of the box."""

import json
import random

import pytest
from PIL import Image

from captioning import caption_cli
from captioning.captioner import Captioner
from captioning.shapes import VOCAB, make_scene

IMAGES = caption_cli.Path(__file__).parent / "fixtures" / "images"


pytestmark = pytest.mark.usefixtures("one_thread")


def test_bundled_model_is_a_small_self_contained_file():
    path = caption_cli.BUNDLED_MODEL
    assert path.is_file() and path.stat().st_size < 8 * 2**20
    model = Captioner.load(path).model
    assert model.decoder.cfg.attention == "soft" and model.encoder.backbone == "efficientnet_lite0"


def test_demo_captions_fresh_scenes_correctly_with_the_bundled_model(capsys, tmp_path):
    import random

    exact = 0
    for seed in range(6):
        rc = caption_cli.caption_main(["--demo", "--seed", str(seed), "--overlay", str(tmp_path), "--json"])
        assert rc == 0
        record = json.loads(capsys.readouterr().out)[0]
        scene = make_scene(random.Random(seed), size=record["size"][0])
        refs = {" ".join(c) for c in scene.captions}
        exact += record["caption"] in refs
        assert len(record["attention"]) == len(record["words"])
        with Image.open(record["overlay"]) as im:
            assert im.width > im.height > 0
    assert exact >= 4  # the model knows shapes scenes: most captions equal one of the references word for word


def test_bundled_model_captions_a_photo(capsys):
    assert caption_cli.caption_main([str(IMAGES / "coffee.png")]) == 0
    out, err = capsys.readouterr()
    words = out.split()
    # it speaks only its shapes language, whatever the picture (on a photo that is a guess, often a repeated word),
    # and says so: the out-of-domain note
    assert words and set(words) <= set(VOCAB)
    assert "look unlike what this model was trained on (synthetic shapes)" in err


def test_the_bundled_model_says_when_an_image_is_not_a_shapes_scene(capsys, tmp_path):
    import torch

    captioner = Captioner.load(caption_cli.BUNDLED_MODEL)
    assert captioner.domain == "synthetic shapes" and captioner.domain_check["radius"] > 0
    scene = make_scene(random.Random(11), size=128).image
    photos = [Image.open(p).convert("RGB") for p in sorted(IMAGES.glob("*.png"))]
    with torch.no_grad():
        feats = captioner.model.encode(torch.stack([captioner.preprocess(im) for im in [scene, *photos]]))
    assert captioner.out_of_domain(feats) == [False] + [True] * len(photos)
    assert caption_cli.caption_main([str(p) for p in sorted(IMAGES.glob("*.png"))]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "look unlike" in line]
    assert len(notes) == 1 and "synthetic shapes" in notes[0] and "--model" in notes[0]
