"""Tests for captioning.model.encoder: shapes, freezing, preprocessing, weights (offline and real)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image
from torch import nn

from captioning.model.encoder import (
    LITE,
    LITE_SIZES,
    EncoderWeightsError,
    ImageEncoder,
    _lite_network,
    _lite_weights_file,
    _read_state_dict,
)
from captioning.photos.preprocess import IMAGENET_MEAN, IMAGENET_STD, LITE_MEAN, LITE_STD, Preprocess, to_rgb

IMAGES = Path(__file__).parent.parent / "fixtures" / "images"

# (backbone, stride) -> D
OUT_DIM = {
    ("resnet18", 32): 512,
    ("resnet18", 16): 256,
    ("resnet50", 32): 2048,
    ("resnet50", 16): 1024,
    ("vgg16", 32): 512,
    ("vgg16", 16): 512,
    ("efficientnet_lite0", 32): 1280,
    ("efficientnet_lite0", 16): 112,
    ("efficientnet_lite0", 8): 40,
}


pytestmark = pytest.mark.usefixtures("one_thread")


def _encoder(backbone: str, **kw) -> ImageEncoder:
    torch.manual_seed(0)
    kw.setdefault("weights", None)
    return ImageEncoder(backbone, **kw)


@pytest.mark.parametrize(("backbone", "stride"), list(OUT_DIM))
def test_output_shape_per_backbone_and_stride(backbone: str, stride: int) -> None:
    enc = _encoder(backbone, stride=stride, grid=5)
    x = torch.randn(2, 3, 64, 64)
    fmap = enc.feature_map(x)
    assert fmap.shape == (2, OUT_DIM[backbone, stride], 64 // stride, 64 // stride)
    out = enc(x)
    assert out.shape == (2, 25, OUT_DIM[backbone, stride])
    assert enc.out_dim == OUT_DIM[backbone, stride] and enc.num_regions == 25 and enc.grid == 5


@pytest.mark.parametrize(("backbone", "dim"), [("resnet34", 512), ("resnet101", 2048), ("vgg19", 512)])
def test_other_backbones_build_and_run(backbone: str, dim: int) -> None:
    enc = _encoder(backbone, grid=2)
    assert enc(torch.randn(1, 3, 32, 32)).shape == (1, 4, dim)


@pytest.mark.slow
def test_resnet152_builds_and_runs() -> None:
    enc = _encoder("resnet152", grid=2)
    assert enc(torch.randn(1, 3, 32, 32)).shape == (1, 4, 2048)


def test_default_grid_is_the_papers_196_regions() -> None:
    enc = _encoder("resnet18")
    assert enc.num_regions == 196
    assert enc(torch.randn(1, 3, 64, 64)).shape == (1, 196, 512)


def test_regions_are_row_major_and_small_maps_are_replicated() -> None:
    enc = _encoder("resnet18", stride=16, grid=4)
    x = torch.randn(1, 3, 64, 64)
    fmap = enc.feature_map(x)  # (1, 256, 4, 4): grid == map size, pooling is the identity
    out = enc(x)
    for r in range(4):
        for c in range(4):
            torch.testing.assert_close(out[0, r * 4 + c], fmap[0, :, r, c])
    enc.grid, enc.num_regions = 8, 64  # map 4x4 < grid 8: each cell becomes a 2x2 block
    out8 = enc(x)
    for r, c in [(0, 0), (1, 3), (3, 2)]:
        for dr in (0, 1):
            for dc in (0, 1):
                torch.testing.assert_close(out8[0, (2 * r + dr) * 8 + 2 * c + dc], fmap[0, :, r, c])


def test_unknown_backbone_and_bad_options() -> None:
    with pytest.raises(ValueError, match="resnet101.*efficientnet_lite0"):
        ImageEncoder("alexnet", weights=None)
    with pytest.raises(ValueError, match="stride 8 is available for the efficientnet_lite backbones only"):
        ImageEncoder("resnet18", weights=None, stride=8)
    with pytest.raises(ValueError, match="stride must be 8, 16 or 32"):
        ImageEncoder("resnet18", weights=None, stride=4)
    with pytest.raises(ValueError, match="fine_tune"):
        ImageEncoder("resnet18", weights=None, fine_tune="some")
    with pytest.raises(ValueError, match=r"\(B, 3, H, W\)"):
        _encoder("resnet18")(torch.randn(3, 32, 32))


# --- freezing -------------------------------------------------------------------------------


def _bn_layers(module: nn.Module) -> list[nn.BatchNorm2d]:
    return [m for m in module.modules() if isinstance(m, nn.BatchNorm2d)]


def test_frozen_encoder_has_no_trainable_params_and_bn_statistics_do_not_drift() -> None:
    enc = _encoder("resnet18")
    assert sum(p.requires_grad for p in enc.parameters()) == 0
    enc.train()
    assert enc.training and all(not bn.training for bn in _bn_layers(enc))
    before = [bn.running_mean.clone() for bn in _bn_layers(enc)]
    out = enc(torch.randn(4, 3, 64, 64) * 3 + 1)
    assert not out.requires_grad
    for bn, mean in zip(_bn_layers(enc), before, strict=True):
        torch.testing.assert_close(bn.running_mean, mean, rtol=0, atol=0)


def test_fine_tune_last_trains_only_the_last_stage() -> None:
    enc = _encoder("resnet18", fine_tune="last", frozen_bn=False)
    trainable = {n for n, p in enc.named_parameters() if p.requires_grad}
    layer4 = {n for n, _ in enc.named_parameters() if n.startswith("body.layer4.")}
    assert trainable == layer4 and layer4
    enc.train()
    assert all(bn.training for bn in _bn_layers(enc.body.layer4))
    assert not any(bn.training for bn in _bn_layers(enc.body.layer3))
    enc(torch.randn(2, 3, 64, 64)).sum().backward()
    assert all(p.grad is not None for p in enc.body.layer4.parameters())
    assert all(p.grad is None for p in enc.body.layer3.parameters())
    enc.eval()
    assert not any(bn.training for bn in _bn_layers(enc))


@pytest.mark.parametrize(
    ("backbone", "stride", "last"),
    [("vgg16", 16, "block5"), ("efficientnet_lite0", 32, "stride32"), ("resnet18", 16, "layer3")],
)
def test_fine_tune_last_per_family(backbone: str, stride: int, last: str) -> None:
    weights = "imagenet" if backbone == "efficientnet_lite0" else None
    enc = _encoder(backbone, stride=stride, fine_tune="last", weights=weights)
    trainable = {n.split(".")[1] for n, p in enc.named_parameters() if p.requires_grad}
    assert trainable == {last}


def test_fine_tune_all_trains_everything() -> None:
    enc = _encoder("resnet18", fine_tune="all", frozen_bn=False)
    assert all(p.requires_grad for p in enc.parameters())
    enc.train()
    assert all(bn.training for bn in _bn_layers(enc))


def test_frozen_bn_trains_the_weights_but_keeps_the_statistics() -> None:
    enc = _encoder("resnet18", fine_tune="last2")  # frozen_bn: the default
    trainable = {n.split(".")[1] for n, p in enc.named_parameters() if p.requires_grad}
    assert trainable == {"layer3", "layer4"}
    enc.train()
    assert enc.training and not any(bn.training for bn in _bn_layers(enc))
    before = [bn.running_mean.clone() for bn in _bn_layers(enc)]
    enc(torch.randn(2, 3, 64, 64) * 3 + 1).sum().backward()
    assert all(p.grad is not None for p in enc.body.layer3.parameters())
    for bn, mean in zip(_bn_layers(enc), before, strict=True):
        torch.testing.assert_close(bn.running_mean, mean, rtol=0, atol=0)
    assert "frozen_bn" not in enc.config()  # the default is not written: older files rebuild as before
    assert _encoder("resnet18", fine_tune="last", frozen_bn=False).config()["frozen_bn"] is False


@pytest.mark.parametrize("fine_tune", ["last", "last2"])
def test_a_stored_frozen_map_gives_the_encoders_features(fine_tune: str) -> None:
    """frozen_map once, from_frozen_map every step: the same features (and gradients) as the whole encoder."""
    enc = _encoder("efficientnet_lite0", fine_tune=fine_tune, weights="imagenet", grid=3)
    assert enc.stage_cacheable and enc.frozen_stage_count == len(enc.body) - (1 if fine_tune == "last" else 2)
    images = torch.randn(2, 3, 96, 96)
    stored = enc.frozen_map(images).half()  # as the cache keeps it
    assert not stored.requires_grad and stored.shape[0] == 2
    enc.train()
    whole = enc(images)
    from_map = enc.from_frozen_map(stored.float())
    assert from_map.shape == whole.shape == (2, 9, enc.out_dim)
    torch.testing.assert_close(from_map, whole, atol=2e-2, rtol=2e-2)  # float16 storage
    from_map.sum().backward()
    assert all(p.grad is not None for p in enc.parameters() if p.requires_grad)
    # what a stored map depends on: every weight and statistic of the frozen stages, none of the trainable ones
    frozen, trainable = enc.frozen_state(), {n for n, p in enc.named_parameters() if p.requires_grad}
    stages = list(enc.body._modules)
    assert {k.split(".")[1] for k in frozen} == set(stages[: enc.frozen_stage_count])
    assert {k.split(".")[1] for k in trainable} == set(stages[enc.frozen_stage_count :])
    assert len(frozen) + sum(1 for k in enc.state_dict() if k.split(".")[1] in stages[enc.frozen_stage_count :]) == len(
        enc.state_dict()
    )


def test_frozen_map_refuses_encoders_with_nothing_to_store() -> None:
    for kwargs in ({"fine_tune": "none"}, {"fine_tune": "all"}):
        enc = _encoder("resnet18", **kwargs)
        assert not enc.stage_cacheable
        with pytest.raises(ValueError, match="no frozen stages"):
            enc.frozen_map(torch.randn(1, 3, 32, 32))


# --- preprocessing --------------------------------------------------------------------------


def test_crop_box_hand_computed() -> None:
    crop = Preprocess(224, True)
    assert crop.crop_box(600, 400) == (100.0, 0.0, 500.0, 400.0)
    assert crop.crop_box(300, 451) == (0.0, 75.5, 300.0, 375.5)
    assert crop.crop_box(256, 256) == (0.0, 0.0, 256.0, 256.0)
    assert Preprocess(224, False).crop_box(600, 400) == (0.0, 0.0, 600.0, 400.0)


def _expected(rgb: tuple[int, int, int], pre: Preprocess) -> torch.Tensor:
    return torch.tensor([(v / 255 - m) / s for v, m, s in zip(rgb, pre.mean, pre.std, strict=True)])


MODE_IDS = ["L", "1", "RGBA", "RGBA-clear", "LA", "CMYK-white", "CMYK-red", "I16-max", "I16", "I16-high", "I16-8bit",
            "I", "I-8bit", "F", "La"]  # fmt: skip


@pytest.mark.parametrize(
    ("img", "rgb"),
    [
        (Image.new("L", (30, 20), 100), (100, 100, 100)),
        (Image.new("1", (30, 20), 1), (255, 255, 255)),
        (Image.new("RGBA", (30, 20), (200, 10, 20, 255)), (200, 10, 20)),
        (Image.new("RGBA", (30, 20), (0, 0, 0, 0)), (255, 255, 255)),  # transparent -> white
        (Image.new("LA", (30, 20), (50, 255)), (50, 50, 50)),
        (Image.new("CMYK", (30, 20), (0, 0, 0, 0)), (255, 255, 255)),
        (Image.new("CMYK", (30, 20), (0, 255, 255, 0)), (255, 0, 0)),
        (Image.new("I;16", (30, 20), 65535), (255, 255, 255)),
        (Image.new("I;16", (30, 20), 257 * 100), (100, 100, 100)),
        (Image.new("I;16", (30, 20), 257 * 200), (200, 200, 200)),  # 65535 -> 255 is / 257 (/ 256 gives 201)
        (Image.new("I;16", (30, 20), 200), (200, 200, 200)),  # 8-bit values (Image.convert("I;16") of an L image)
        (Image.new("I", (30, 20), 257 * 40), (40, 40, 40)),
        (Image.new("I", (30, 20), 200), (200, 200, 200)),
        (Image.new("F", (30, 20), 0.5), (128, 128, 128)),
        (Image.new("LA", (30, 20), (100, 128)).convert("La"), (177, 177, 177)),  # as LA's 100 at half alpha does
    ],
    ids=MODE_IDS,
)
def test_preprocess_converts_any_mode(img: Image.Image, rgb: tuple[int, int, int]) -> None:
    pre = Preprocess(16, True)
    x = pre(img)
    assert x.shape == (3, 16, 16) and x.dtype == torch.float32
    torch.testing.assert_close(x, _expected(rgb, pre).view(3, 1, 1).expand(3, 16, 16), atol=1e-5, rtol=0)


def test_a_float_photos_nan_or_infinity_reads_as_zero_and_leaves_the_rest_as_it_was() -> None:
    """One NaN in a float (F) TIFF made its maximum NaN: the photo was read as 0..255 and came out black."""
    arr = np.full((4, 6), 0.5, dtype=np.float32)
    arr[0, 0], arr[1, 1], arr[2, 2] = np.nan, np.inf, -np.inf
    grey = np.asarray(to_rgb(Image.fromarray(arr, mode="F")))[..., 0]
    assert grey[0, 0] == grey[1, 1] == grey[2, 2] == 0 and (grey[3] == 128).all()


def test_preprocess_palette_image() -> None:
    img = Image.new("P", (20, 20), 1)
    img.putpalette([0, 0, 0, 10, 200, 30] + [0] * 762)
    pre = Preprocess(8, False)
    torch.testing.assert_close(pre(img)[:, 3, 3], _expected((10, 200, 30), pre), atol=1e-5, rtol=0)


def test_crop_true_drops_the_sides_and_crop_false_keeps_them() -> None:
    arr = np.zeros((20, 40, 3), dtype=np.uint8)
    arr[:, :, 2] = 255  # blue image ...
    arr[:, :10] = (255, 0, 0)  # ... whose left quarter is red, outside the centre square
    img = Image.fromarray(arr)
    mean, std = torch.tensor(IMAGENET_MEAN), torch.tensor(IMAGENET_STD)
    for crop in (True, False):
        pre = Preprocess(8, crop)
        red = pre(img)[0] * std[0] + mean[0]  # back to 0..1
        if crop:
            # the crop box (10, 0, 30, 20) holds no red; only the antialiasing filter of the
            # first column reaches just past the box edge
            assert red[:, 1:].max() < 1e-5 and red[:, 0].max() < 0.25
        else:
            assert red[:, 0].min() > 0.99 and red[:, -1].max() < 1e-5


def test_preprocess_is_json_able_and_encoders_carry_their_own() -> None:
    pre = Preprocess(160, False, LITE_MEAN, LITE_STD)
    assert Preprocess(**json.loads(json.dumps(asdict(pre)))) == pre
    assert _encoder("resnet18").preprocess == Preprocess(224, True, IMAGENET_MEAN, IMAGENET_STD)
    enc = _encoder("vgg16", image_size=96, crop=False)
    assert enc.preprocess == Preprocess(96, False, IMAGENET_MEAN, IMAGENET_STD)
    lite = ImageEncoder("efficientnet_lite0", weights=None).preprocess
    assert lite.mean == pytest.approx((127 / 255,) * 3) and lite.std == pytest.approx((128 / 255,) * 3)
    cfg = enc.config()
    assert json.loads(json.dumps(cfg)) == cfg and cfg["backbone"] == "vgg16"


# --- weights --------------------------------------------------------------------------------


def test_imagenet_weights_not_in_the_hub_cache_are_one_line_and_never_downloaded(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))  # an empty hub cache
    monkeypatch.setattr(torch.hub, "download_url_to_file", lambda *a, **k: pytest.fail("a download was tried"))
    with pytest.raises(EncoderWeightsError) as info:
        ImageEncoder("resnet101", weights="imagenet")
    msg = str(info.value)
    cached = Path(torch.hub.get_dir()) / "checkpoints" / "resnet101-cd907fc2.pth"
    assert "\n" not in msg and msg.startswith("ImageNet weights for resnet101 are not in torch's hub cache")
    assert f"download https://download.pytorch.org/models/resnet101-cd907fc2.pth to {cached} yourself" in msg
    assert "set model.encoder.weights to the path of a torchvision state_dict file" in msg and "to null" in msg
    assert msg.endswith(
        "or take model.encoder.backbone efficientnet_lite2 (or _lite0, _lite1), whose ImageNet "
        "weights come installed, as the bundled model and configs/caption/your_photos.yaml do"
    )


def test_imagenet_weights_in_the_hub_cache_load_and_a_damaged_file_is_named(monkeypatch, tmp_path) -> None:
    """torch.hub checks a download's SHA-256 against the hex digits its name ends with; the cache is read so too."""
    from captioning.model import encoder as encoder_module

    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    monkeypatch.setattr(torch.hub, "download_url_to_file", lambda *a, **k: pytest.fail("a download was tried"))
    torch.manual_seed(1)
    reference = torchvision.models.resnet18(weights=None)
    url = torchvision.models.ResNet18_Weights.DEFAULT.url
    real_name = Path(torch.hub.get_dir()) / "checkpoints" / url.rsplit("/", 1)[1]
    real_name.parent.mkdir(parents=True)
    torch.save(reference.state_dict(), real_name)  # random weights under the real name: not what the name says
    with pytest.raises(EncoderWeightsError, match=f"{real_name} is damaged \\(its SHA-256 does not begin with"):
        ImageEncoder("resnet18", weights="imagenet")
    named = real_name.with_name(f"resnet18-{hashlib.sha256(real_name.read_bytes()).hexdigest()[:8]}.pth")
    real_name.rename(named)  # the same bytes under a name that fits them: loaded as they are
    monkeypatch.setattr(encoder_module, "_hub_cache_file", lambda u: named if u == url else pytest.fail(u))
    enc = ImageEncoder("resnet18", weights="imagenet")
    torch.testing.assert_close(enc.body.stem[0].weight, reference.conv1.weight, rtol=0, atol=0)


def test_local_weights_file_loads_and_matches_torchvision(tmp_path) -> None:
    torch.manual_seed(2)
    reference = torchvision.models.resnet18(weights=None).eval()
    path = tmp_path / "resnet18.pth"
    torch.save(reference.state_dict(), path)
    enc = ImageEncoder("resnet18", weights=str(path))
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        r = reference
        expected = r.layer4(r.layer3(r.layer2(r.layer1(r.maxpool(r.relu(r.bn1(r.conv1(x))))))))
    # Our encoder runs channels-last (another convolution kernel): equal up to float rounding.
    torch.testing.assert_close(enc.feature_map(x), expected, atol=1e-4, rtol=1e-4)


def test_vgg_loads_torchvision_features_and_ignores_the_classifier(tmp_path) -> None:
    torch.manual_seed(3)
    # torchvision's own VGG-16 conv stack (building all of vgg16 would add a 120M-param head)
    features = torchvision.models.vgg.make_layers(torchvision.models.vgg.cfgs["D"]).eval()
    state = {f"features.{k}": v for k, v in features.state_dict().items()}
    state["classifier.6.weight"] = torch.zeros(1000, 4096)  # a head the encoder must ignore
    path = tmp_path / "vgg16.pth"
    torch.save(state, path)
    enc = ImageEncoder("vgg16", weights=path, stride=16)
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        expected = features[:-1](x)  # everything but pool5
    torch.testing.assert_close(enc.feature_map(x), expected)


def test_bad_weights_files_fail_clearly(tmp_path) -> None:
    with pytest.raises(EncoderWeightsError, match="does not exist"):
        ImageEncoder("resnet18", weights=str(tmp_path / "missing.pth"))
    wrong = tmp_path / "resnet34.pth"
    torch.save(torchvision.models.resnet34(weights=None).state_dict(), wrong)
    with pytest.raises(EncoderWeightsError, match="do not fit resnet18"):
        ImageEncoder("resnet18", weights=wrong)
    junk = tmp_path / "junk.pth"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(EncoderWeightsError, match="cannot read"):
        ImageEncoder("resnet18", weights=junk)


def imagenet_classifier(backbone: str = "efficientnet_lite0") -> tuple[torch.nn.Module, Preprocess]:
    """The package's EfficientNet-Lite with its ImageNet head and offline weights, in eval mode: the reference."""
    net = _lite_network(backbone, _read_state_dict(_lite_weights_file(backbone)))
    return net.eval(), Preprocess(LITE_SIZES[backbone], True, LITE_MEAN, LITE_STD)


def test_init_false_builds_from_the_weights_alone_and_draws_nothing():
    """What Captioner.load does: the backbone is not drawn at random first (the weights it loads replace it all)."""
    state = _read_state_dict(_lite_weights_file("efficientnet_lite0"))
    # channels-last, the layout ImageEncoder computes in: init=False allocates its convolutions that way at once
    ref = _lite_network("efficientnet_lite0", state).eval().to(memory_format=torch.channels_last)
    rng = torch.random.get_rng_state()
    bare = _lite_network("efficientnet_lite0", state, init=False).eval()
    assert torch.equal(torch.random.get_rng_state(), rng)
    assert bare._conv_stem.weight.is_contiguous(memory_format=torch.channels_last)
    x = torch.randn(1, 3, 96, 96)
    with torch.no_grad():
        assert torch.equal(bare.extract_features(x), ref.extract_features(x))
    torch.manual_seed(0)
    vgg = ImageEncoder("vgg16", weights=None, grid=2, image_size=64)
    rng = torch.random.get_rng_state()
    bare = ImageEncoder("vgg16", weights=None, grid=2, image_size=64, init=False)
    assert torch.equal(torch.random.get_rng_state(), rng)
    bare.load_state_dict(vgg.state_dict())
    with torch.no_grad():
        assert torch.equal(bare.eval()(x[..., :64, :64]), vgg.eval()(x[..., :64, :64]))


@pytest.mark.parametrize("backbone", LITE)
def test_lite_offline_weights_are_real_imagenet_weights(backbone) -> None:
    net, pre = imagenet_classifier(backbone)
    assert pre.mean == LITE_MEAN and pre.std == LITE_STD
    with Image.open(IMAGES / "coffee.png") as img:
        x = pre(img).unsqueeze(0)  # (1, 3, S, S) at the backbone's own size
    with torch.no_grad():
        top5 = net(x).topk(5).indices[0].tolist()
    assert {967, 968, 504} & set(top5), top5  # espresso, cup, coffee mug


@pytest.mark.parametrize("backbone", LITE)
def test_lite_encoder_matches_the_package_network(backbone) -> None:
    net, pre = imagenet_classifier(backbone)
    enc = ImageEncoder(backbone, grid=3, image_size=96)  # offline ImageNet weights
    assert enc.preprocess == Preprocess(96, True, pre.mean, pre.std)
    assert ImageEncoder(backbone, grid=3, weights=None).preprocess.image_size == LITE_SIZES[backbone]
    with Image.open(IMAGES / "chelsea.png") as img:
        x = enc.preprocess(img).unsqueeze(0)  # (1, 3, 96, 96)
    with torch.no_grad():
        expected = net.extract_features(x)  # (1, 1280, 3, 3)
        torch.testing.assert_close(enc(x), expected.flatten(2).transpose(1, 2), atol=1e-4, rtol=1e-4)  # folded BN
    torch.testing.assert_close(enc.feature_map(x), expected, atol=1e-4, rtol=1e-4)  # channels-last: rounding


def test_multiscale_appends_each_fine_cells_coarse_parent() -> None:
    enc = ImageEncoder("efficientnet_lite0", weights=None, stride=8, grid=8, image_size=64, crop=False, multiscale=True)
    x = torch.randn(1, 3, 64, 64)
    fmap = enc.feature_map(x)  # (1, 40 + 112, 8, 8)
    assert fmap.shape == (1, 152, 8, 8) and enc.out_dim == 152
    coarse = fmap[0, 40:]
    # the stride-16 part is constant over each 2 x 2 block of fine cells (nearest upsampling of one parent cell)
    torch.testing.assert_close(coarse[:, 0::2, 0::2], coarse[:, 1::2, 1::2])
    fine_only = ImageEncoder("efficientnet_lite0", weights=None, stride=8, grid=8, image_size=64, crop=False)
    fine_only.load_state_dict(enc.state_dict(), strict=False)
    torch.testing.assert_close(fmap[0, :40], fine_only.feature_map(x)[0])
    with pytest.raises(ValueError, match="multiscale"):
        ImageEncoder("efficientnet_lite0", weights=None, stride=16, multiscale=True)
