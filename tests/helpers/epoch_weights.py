"""A callback that keeps a copy of the network's weights at the start of each training epoch, where Lightning's
StochasticWeightAveraging takes the weights it averages (tests/cli/test_lightning_options.py)."""

from __future__ import annotations

import torch
from pytorch_lightning.callbacks import Callback


class EpochStartWeights(Callback):
    def __init__(self) -> None:
        self.taken: dict[int, dict[str, torch.Tensor]] = {}  # epoch -> the network's state dict as it began

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.taken[trainer.current_epoch] = {k: v.detach().clone() for k, v in pl_module.net.state_dict().items()}
