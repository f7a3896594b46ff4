"""A callback for the DDP tests, loaded by the training CLIs in subprocesses (``--trainer.callbacks+=``): it writes
what each rank trained on and the validation metrics it logged to ``<out>/rank<N>.json``."""

from __future__ import annotations

import json
from pathlib import Path

from pytorch_lightning.callbacks import Callback


class Probe(Callback):
    def __init__(self, out: str):
        self.out, self.seen, self.metrics = Path(out), [], {}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        key = "index" if "index" in batch else "pair_index"  # text pairs / caption (image, caption) pairs
        self.seen.append(batch[key].tolist())

    def on_validation_end(self, trainer, pl_module) -> None:
        self.metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val_")}

    def teardown(self, trainer, pl_module, stage: str) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        record = {"world_size": trainer.world_size, "batches": self.seen, "metrics": self.metrics}
        (self.out / f"rank{trainer.global_rank}.json").write_text(json.dumps(record))
