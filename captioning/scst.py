"""Self-critical sequence training for the captioner (Rennie et al. 2017) and starting a stage from saved weights.

The second stage of modern captioners: after cross-entropy training, the model samples K captions per image; each
earns its CIDEr-D against the image's references (document frequencies from the TRAINING references, computed once),
minus a baseline: the model's own greedy caption's CIDEr-D (the paper) or the mean of the image's other samples
(leave-one-out). The loss, text_attn.core.self_critical, raises the probability of samples that beat the baseline.

Sampling, the greedy baseline and the scoring of the samples all run with the decoder in eval mode (no dropout;
hard attention deterministic), so the policy that drew a caption is the one whose log-probability is raised.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from captioning.model import CaptionModel
from text_attn.core.cider import CiderD
from text_attn.core.decoding import Sampling
from text_attn.core.self_critical import self_critical_step as shared_step
from text_attn.core.training import weight_misfit
from text_attn.core.vocab import Vocabulary


class CaptionReward:
    """CIDEr-D of captions against their image's references, document frequencies from ``train_references``
    (per training image, its reference token lists)."""

    def __init__(self, train_references: list[list[list[str]]]):
        self.cider = CiderD(train_references)

    def __call__(self, captions: list[list[str]], references: list[list[list[str]]]) -> Tensor:
        return torch.as_tensor(self.cider.scores(captions, references), dtype=torch.float32)  # (N,)


def self_critical_step(
    model: CaptionModel,
    vocab: Vocabulary,
    features: Tensor,
    references: list[list[list[str]]],
    reward: CaptionReward,
    samples: int = 5,
    baseline: str = "greedy",
    max_len: int = 30,
) -> tuple[Tensor, dict[str, Tensor]]:
    """One SCST loss: features (B, L, D) of B images, ``references`` per image -> (loss, stats).

    K = ``samples`` captions per image are drawn from the model's distribution (rows b*K .. b*K+K-1 are image b's),
    scored with ``reward``, and compared with ``baseline`` ("greedy" or "leave_one_out"); the shared
    :func:`text_attn.core.self_critical.self_critical_step` does the rest.
    """
    bos, eos = vocab.bos_id, vocab.eos_id
    repeated = features.repeat_interleave(samples, dim=0)  # (B*K, L, D)

    def cider(token_lists: list[list[int]], copies: int) -> Tensor:  # (len,)
        refs = [r for r in references for _ in range(copies)]
        return reward([vocab.decode(ids) for ids in token_lists], refs).to(features.device)

    return shared_step(
        model,
        sample=lambda: model.generate(repeated, bos, eos, max_len, sampling=Sampling()),
        greedy=lambda: model.generate(features, bos, eos, max_len),
        reward=cider,
        score=lambda inputs: model.decoder(repeated, inputs).logits,  # (B*K, T, V)
        samples=samples,
        baseline=baseline,
        bos_id=bos,
        pad_id=vocab.pad_id,
    )


def load_initial_weights(model: CaptionModel, vocab: Vocabulary, path: str | Path) -> None:
    """Start from a model file (``caption``'s, written by fit or caption-export) or a training checkpoint (.ckpt):
    its weights replace the freshly built model's. The network's shape and the vocabulary must match the config's and
    the data's; otherwise one ValueError line says what differs."""
    from captioning.captioner import Captioner
    from text_attn.core.modelfile import ModelFileError

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"model.init_from: no such file {path}")
    if path.suffix == ".ckpt":
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        state = {k.removeprefix("model."): v for k, v in ckpt.get("state_dict", {}).items() if k.startswith("model.")}
        if not state:
            raise ValueError(f"model.init_from: {path} holds no caption model weights")
    else:
        try:
            loaded = Captioner.load(path)
        except ModelFileError as err:
            raise ValueError(f"model.init_from: {err}") from None
        if loaded.vocab.itos != vocab.itos:
            # The ids follow word frequencies in the training captions: the same words from other data (another
            # train_size) can come in another order, which would scramble every output.
            same_words = sorted(loaded.vocab.itos) == sorted(vocab.itos)
            differs = "the same words in another order" if same_words else f"{len(loaded.vocab)} words"
            raise ValueError(
                f"model.init_from: {path} was trained with another vocabulary ({differs}) than this data's "
                f"({len(vocab)} words); use the first stage's data settings (e.g. data.train_size)"
            )
        state = loaded.model.state_dict()
    misfit = weight_misfit(model.state_dict(), state)
    if misfit is not None:
        raise ValueError(f"model.init_from: {path} does not fit this config's network: {misfit}")
    model.load_state_dict(state)
