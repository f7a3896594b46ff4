"""text_attn.core.empty_build: a network built for loading draws nothing at random, computes what it computes rather
than draws (an unsaved table, a LayerNorm's ones), keeps tied weights tied and, once loaded, computes what the network
it was saved from computes; only the thread that builds it skips its init."""

from __future__ import annotations

import math
import threading

import torch
from torch import nn

from text_attn.core.empty_build import allocate, built_uninitialised


class Tied(nn.Module):
    """Embedding -> LSTM cell -> LayerNorm -> output layer sharing the embedding's weight, and a computed, unsaved
    buffer (as the Transformer's sinusoid table)."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(11, 6)
        self.cell = nn.LSTMCell(6, 6)
        self.norm = nn.LayerNorm(6)
        self.out = nn.Linear(6, 11)
        self.out.weight = self.embedding.weight
        nn.init.xavier_uniform_(self.cell.weight_ih)  # a hand-written init, as the Transformer's
        self.register_buffer("table", torch.arange(4.0) * math.pi, persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h, _ = self.cell(self.embedding(tokens))
        return self.out(self.norm(h)) + self.table[0]


def test_built_uninitialised_draws_nothing_computes_the_rest_and_loads_to_the_same_outputs():
    torch.manual_seed(0)
    ref = Tied().eval()
    rng = torch.random.get_rng_state()
    net = built_uninitialised(Tied)
    assert torch.equal(torch.random.get_rng_state(), rng)  # no init drew from the random stream
    assert net.out.weight is net.embedding.weight  # tied as the network ties them
    assert torch.equal(net.table, torch.arange(4.0) * math.pi) and torch.equal(net.norm.weight, torch.ones(6))
    net.load_state_dict(ref.state_dict())  # strict: every saved tensor filled
    tokens = torch.tensor([1, 5, 10])
    assert torch.equal(net.eval()(tokens), ref(tokens))


def test_another_thread_building_meanwhile_draws_its_init_as_usual():
    """The skip is the building thread's alone: a training run built beside a load keeps its seeded init."""
    torch.manual_seed(0)
    want = nn.Linear(40, 40).weight.detach().clone()
    got: list[torch.Tensor] = []
    inside, done = threading.Event(), threading.Event()

    def other() -> None:
        inside.wait(10)
        torch.manual_seed(0)
        got.append(nn.Linear(40, 40).weight.detach().clone())
        done.set()

    def build() -> nn.Module:
        inside.set()  # the other thread builds while this build's skip is active
        done.wait(10)
        return nn.Linear(2, 2)

    thread = threading.Thread(target=other)
    thread.start()
    built_uninitialised(build)
    thread.join(10)
    assert got and torch.equal(got[0], want)


def test_allocate_lays_4d_parameters_out_as_asked_and_keeps_ties():
    with torch.device("meta"):
        net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Linear(4, 4), nn.Linear(4, 4))
        net[3].weight = net[2].weight
    allocate(net, torch.channels_last)
    weight = net[0].weight
    assert not weight.is_meta and weight.is_contiguous(memory_format=torch.channels_last)
    assert not weight.is_contiguous() and net[1].running_mean.shape == (8,) and net[1].weight.requires_grad
    assert net[3].weight is net[2].weight and not net[2].weight.is_meta
