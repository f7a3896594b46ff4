"""A frozen EfficientNet-Lite encoder rewritten for inference: the same numbers (to float rounding), fewer passes.

In eval mode every convolution of EfficientNet-Lite is followed by a BatchNorm with fixed statistics, and every
stride-1 convolution pads its input with a separate ``F.pad`` (the package's TensorFlow-style "same" padding). On a
CPU the depthwise layers are bound by memory traffic, so each extra pass over an activation costs about as much as
the convolution itself. ``fold_for_inference`` returns a copy of the encoder's body in which
- each BatchNorm is folded into the convolution before it (w' = w γ/σ, b' = β − μ γ/σ) and becomes an Identity;
- each stride-1 convolution pads inside the convolution (its "same" padding is symmetric there), not in a copy.
Strided convolutions keep their dynamic padding (asymmetric for even inputs). The training module never sees this:
``Captioner.encode`` uses it for a frozen encoder in eval mode, and so do ``caption`` and the feature cache's
encoding (the cache's key is still the original weights').
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from text_attn.core.empty_build import built_uninitialised


def _fold(conv: nn.Conv2d, bn: nn.BatchNorm2d) -> nn.Conv2d:
    """A plain nn.Conv2d computing bn(conv(x)) (eval statistics), with "same" padding inside when stride is 1."""
    k = conv.kernel_size[0]
    stride_one = tuple(conv.stride) == (1, 1) and conv.kernel_size[0] == conv.kernel_size[1] and k % 2 == 1
    # on the body's device and in its dtype: a body moved to the GPU (caption --device cuda) folds into a GPU copy
    where = {"device": conv.weight.device, "dtype": conv.weight.dtype}
    if stride_one:
        # its random init skipped (both tensors are overwritten below): drawn from torch's global generator, the first
        # encode of a run would shift every later draw, and a run whose feature cache was on disk (no encode) would
        # train other weights than the same config and seed encoding it
        padding = k // 2 * conv.dilation[0]
        args = (conv.in_channels, conv.out_channels, conv.kernel_size, 1, padding, conv.dilation, conv.groups)
        out = built_uninitialised(lambda: nn.Conv2d(*args, bias=True, **where))
    else:
        out = copy.deepcopy(conv)
        if out.bias is None:
            out.bias = nn.Parameter(torch.zeros(conv.out_channels, **where))
    scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)  # (C_out,)
    bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
    with torch.no_grad():
        out.weight.copy_(conv.weight * scale.view(-1, 1, 1, 1))
        out.bias.copy_((bias - bn.running_mean) * scale + bn.bias)
    return out.requires_grad_(False)


def fold_for_inference(body: nn.Module) -> nn.Module:
    """A copy of an EfficientNet-Lite encoder body (ImageEncoder.body) with BatchNorms folded (module doc)."""
    body = copy.deepcopy(body).eval()
    pairs = (("_expand_conv", "_bn0"), ("_depthwise_conv", "_bn1"), ("_project_conv", "_bn2"))
    for module in list(body.modules()):
        for conv_name, bn_name in pairs:  # MBConv blocks
            conv, bn = getattr(module, conv_name, None), getattr(module, bn_name, None)
            if isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d):
                setattr(module, conv_name, _fold(conv, bn))
                setattr(module, bn_name, nn.Identity())
        if isinstance(module, nn.Sequential):  # the stem (conv, bn, relu6) and the head
            items = list(module)
            for i in range(len(items) - 1):
                if isinstance(items[i], nn.Conv2d) and isinstance(items[i + 1], nn.BatchNorm2d):
                    module[i] = _fold(items[i], items[i + 1])
                    module[i + 1] = nn.Identity()
    for module in body.modules():
        if isinstance(module, nn.ReLU6):
            module.inplace = True  # its input is a fresh convolution output nobody else reads
    return body.to(memory_format=torch.channels_last)
