"""The bundled default model (captioning/assets/shapes_soft.pt): `caption --demo` and photos work out of the box."""

import json

import pytest
from PIL import Image

from captioning import caption_cli
from captioning.captioner import Captioner
from captioning.shapes import make_scene

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
    words = capsys.readouterr().out.split()
    assert words and words[0] in ("a", "there")  # it speaks its shapes language, whatever the picture
