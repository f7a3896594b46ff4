"""captioning/model/resnet.py against torchvision's ResNets: the same parameter names and shapes, the same weights
from the same seed, the same output, and torchvision's state_dicts load into it."""

import pytest
import torch
import torchvision

from captioning.model.resnet import ResNet


def _trunk(net: torch.nn.Module):
    return lambda x: net.layer4(net.layer3(net.layer2(net.layer1(net.maxpool(net.relu(net.bn1(net.conv1(x))))))))


@pytest.mark.parametrize("backbone", ["resnet18", "resnet50"])
def test_same_names_weights_and_output_as_torchvision(backbone):
    torch.manual_seed(3)
    ours = ResNet(backbone).eval()
    torch.manual_seed(3)
    theirs = getattr(torchvision.models, backbone)(weights=None).eval()
    mine = ours.state_dict()
    ref = {k: v for k, v in theirs.state_dict().items() if not k.startswith("fc.")}
    assert list(mine) == list(ref)  # the same names, in the same order
    for k, v in ref.items():
        assert torch.equal(mine[k], v), k  # the same seeded init, buffers included
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        out = ours(x)
        assert out.shape == (2, 512 * ours.expansion, 2, 2)
        assert torch.equal(out, _trunk(theirs)(x))


def test_a_torchvision_state_dict_loads_and_gives_its_output():
    torch.manual_seed(0)
    theirs = torchvision.models.resnet18(weights=None).eval()
    with torch.no_grad():  # BatchNorm statistics that are not the defaults: they must travel too
        for m in theirs.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    torch.manual_seed(1)  # another seed: every value must come from the file
    ours = ResNet("resnet18").eval()
    missing, unexpected = ours.load_state_dict(theirs.state_dict(), strict=False)
    assert missing == [] and unexpected == ["fc.weight", "fc.bias"]
    x = torch.randn(1, 3, 96, 80)
    with torch.no_grad():
        assert torch.equal(ours(x), _trunk(theirs)(x))


def test_init_false_draws_nothing_and_takes_every_weight_it_is_given():
    torch.manual_seed(5)
    ref = ResNet("resnet18").eval()
    state = torch.random.get_rng_state()
    bare = ResNet("resnet18", init=False)
    assert torch.equal(torch.random.get_rng_state(), state)  # nothing drawn: a seeded run's stream is untouched
    assert [(k, v.shape, v.dtype) for k, v in bare.state_dict().items()] == [
        (k, v.shape, v.dtype) for k, v in ref.state_dict().items()
    ]
    assert all(p.device.type == "cpu" and p.requires_grad for p in bare.parameters())  # no meta tensor is left
    bare.load_state_dict(ref.state_dict())
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        assert torch.equal(bare.eval()(x), ref(x))
