"""``model.cuda_graphs``: the decoder's teacher-forced training loop captured as CUDA graphs, one per (batch size,
caption length bucket). Off by default: it has never run on a GPU (docs/speed.md, "CUDA graphs").

Why: on a GPU one training step of the paper's size is launch-bound. The loop over the words runs a dozen small
kernels a word, forward and backward, and the Python that launches them costs more than the GPU's work (issue 65: an
H200 ran the step 1.46x the reference's, a few percent of the chip). A CUDA graph launches the whole loop at once.

What is captured (``torch.cuda.make_graphed_callables``): ``ShowAttendTellDecoder.teacher_forced`` over the PLAIN loop
(``fast_path=False``), from the regions (B, L, D) to the logits (B, T, V), α (B, T, L) and hard attention's per-step
outputs; its backward is a second graph. The loss, the optimiser and the encoder stay eager (a few large kernels).
- The plain loop, not the fast path: the fast path takes buffers from Python-side pools (text_attn.core.fused.SCRATCH,
  the decoder's KeyGradSummer) and hands them back in the backward. A capture records a buffer's address once, while
  the pool would hand it to another step, and pool state changed in Python is not replayed. The plain loop is plain
  PyTorch ops; on a GPU the fast path's CPU savings (cache-sized blocks, thin products) are not what limits it.
- Fixed shapes: a graph is one shape, so each batch's captions are padded with pad to a multiple of LENGTH_BUCKET
  (:func:`pad_to_bucket`): a few shapes per run. The loss leaves padded targets out (cross-entropy's ignore_index,
  the step masks of the penalty and of REINFORCE), so the loss and the gradients are those of the unpadded batch
  (tests/captioning/test_cuda_graphs.py).
- Randomness: hard attention's caption coin (``use_soft``) is drawn eagerly before the graph, as the eager forward
  draws it; dropout and the region draws (text_attn.core.attention.sample_categorical: exponential_ + argmax, not
  torch.multinomial, which reads its input back with .item()) run inside, from the default CUDA generator, whose
  graph-safe state each replay advances as the eager kernels would. The capture's warm-up runs draw numbers too:
  the generator's state is put back after them, so a replay draws what the eager step would have drawn.
- Nothing in it reads a value back to the host: tests run the decoder, the loss and the backward under
  text_attn.core.sync_check.no_host_sync.

Eager instead (the same numbers, the decoder's own forward): in eval mode (validation's loss), without gradients, off
CUDA, beyond MAX_GRAPHS shapes and for a shape whose capture ran out of memory. Under autocast the capture runs with
``cache_enabled=False`` (make_graphed_callables refuses the weight cast cache) and the autocast dtype is part of a
graph's key.

Gradients: the backward graph hands autograd its static gradient buffers, and autograd may keep such a buffer as the
parameter's ``.grad`` (it takes a fresh gradient over instead of copying it). The next replay would then write into
``.grad``, and with gradient accumulation (or zero_grad without set_to_none) double it. So each decoder parameter gets
a hook that copies its incoming gradient (one pass over the decoder's ~21M gradients at the paper's size, a fraction
of a millisecond on a GPU); DDP's all-reduce then runs on the copies, outside the graphs, as before.

The outputs of a graphed call live in the graph's memory: the next replay of the same shape overwrites them. The loss
is computed from them at once (new tensors), which is all a training step needs.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from captioning.model.decoder import DecoderOutput, ShowAttendTellDecoder

LENGTH_BUCKET = 8  # captions are padded to a multiple of this many steps: a few shapes a run, at most 7 extra steps
MAX_GRAPHS = 8  # shapes captured at most (each holds its activations' memory); further shapes run eagerly


def bucket_length(steps: int, bucket: int = LENGTH_BUCKET) -> int:
    """The smallest multiple of ``bucket`` that holds ``steps`` (at least one bucket)."""
    return max(1, -(-steps // bucket)) * bucket


def pad_to_bucket(batch: dict, pad_id: int, bucket: int = LENGTH_BUCKET) -> dict:
    """A batch whose ``captions_in`` and ``targets`` (B, T) are padded with ``pad_id`` to T' = bucket_length(T), and
    ``attn_targets`` (B, T, L) / ``attn_targets_mask`` (B, T) with zeros / False; the rest as it is. The batch itself
    when T is a multiple already."""
    steps = batch["captions_in"].size(1)
    extra = bucket_length(steps, bucket) - steps
    if extra == 0:
        return batch
    out = dict(batch)
    out["captions_in"] = F.pad(batch["captions_in"], (0, extra), value=pad_id)  # (B, T')
    out["targets"] = F.pad(batch["targets"], (0, extra), value=pad_id)  # (B, T')
    if "attn_targets" in batch:
        out["attn_targets"] = F.pad(batch["attn_targets"], (0, 0, 0, extra))  # (B, T', L)
        out["attn_targets_mask"] = F.pad(batch["attn_targets_mask"], (0, extra), value=False)  # (B, T')
    return out


class _PlainLoop(nn.Module):
    """The decoder's teacher-forced forward over the plain loop, as make_graphed_callables takes it: tensors in, a
    tuple of tensors out. The decoder is its only child, so the decoder's parameters are the graph's other inputs
    (their gradients come out of the backward graph). Not a submodule of anything: checkpoints never see it."""

    def __init__(self, decoder: ShowAttendTellDecoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, features: Tensor, captions_in: Tensor, use_soft: Tensor | None = None) -> tuple[Tensor, ...]:
        out = self.decoder.teacher_forced(features, captions_in, use_soft, fast_path=False)
        if use_soft is None:  # soft attention: logits (B, T, V), alphas (B, T, L)
            return out.logits, out.alphas
        # hard attention: + log p(s_t) (B, T), H[α_t] (B, T), s_t (B, T)
        return out.logits, out.alphas, out.attn_log_probs, out.entropies, out.chosen


class GraphedDecoder:
    """The decoder's training forward, ``(features (B, L, D), captions_in (B, T), soft_prob=None) -> DecoderOutput``
    as ``ShowAttendTellDecoder.forward``, replayed from a CUDA graph per shape where it can be (module doc), eager
    otherwise. Keeps per shape key (B, T, L, D, dtype, whether the features need a gradient, autocast dtype) its
    graphed callable, or None for a shape that runs eagerly. A plain object: the LightningModule holds it beside the
    model, never in its state_dict."""

    def __init__(self, decoder: ShowAttendTellDecoder, max_graphs: int = MAX_GRAPHS):
        self.decoder = decoder
        self.max_graphs = max_graphs
        self.graphs: dict[tuple, Callable | None] = {}
        self.replays = 0  # graphed calls, for the device check and tests
        self.eager = 0  # calls that ran the decoder's own forward
        self._hooks: list = []  # the gradient copies' hooks (module doc), set before the first capture

    def graphable(self, features: Tensor) -> bool:
        """Whether this call can replay a graph: training mode, gradients on, CUDA."""
        training = self.decoder.training and torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
        return features.is_cuda and training

    def close(self) -> None:
        """Drop the graphs (their memory goes back to PyTorch's allocator) and the gradient hooks."""
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()
        self.graphs.clear()

    def __call__(self, features: Tensor, captions_in: Tensor, soft_prob: float | None = None) -> DecoderOutput:
        dec = self.decoder
        if not self.graphable(features):
            self.eager += 1
            return dec(features, captions_in, soft_prob=soft_prob)
        # Drawn here, as the eager forward draws it first: the graph takes it as an input.
        use_soft = dec.draw_use_soft(captions_in.size(0), features.device, soft_prob)  # (B,) bool or None
        amp = torch.get_autocast_dtype("cuda") if torch.is_autocast_enabled("cuda") else None
        key = (*captions_in.shape, *features.shape[1:], features.dtype, features.requires_grad, amp)
        args = (features, captions_in) if use_soft is None else (features, captions_in, use_soft)
        # make_graphed_callables refuses autocast's weight cache: the same autocast without it, for capture and call
        with torch.autocast("cuda", dtype=amp, cache_enabled=False) if amp is not None else nullcontext():
            graphed = self._graphed(key, args)
            if graphed is None:
                self.eager += 1
                return dec.teacher_forced(features, captions_in, use_soft)
            outs = graphed(*args)
        self.replays += 1
        if use_soft is None:
            return DecoderOutput(*outs)
        logits, alphas, log_probs, entropies, chosen = outs
        return DecoderOutput(logits, alphas, log_probs, entropies, chosen, sampled=~use_soft)

    def _graphed(self, key: tuple, args: tuple[Tensor, ...]) -> Callable | None:
        if key in self.graphs:
            return self.graphs[key]
        if len(self.graphs) >= self.max_graphs:
            return None  # not remembered: a later shape may still be one of the captured ones
        if not self._hooks:  # a parameter's .grad never the graph's own buffer (module doc)
            self._hooks = [p.register_hook(torch.clone) for p in self.decoder.parameters() if p.requires_grad]
        # The graph's own input buffers: make_graphed_callables copies each call's inputs into these.
        sample = tuple(a.detach().clone().requires_grad_(a.requires_grad) for a in args)
        device = args[0].device
        # The warm-up runs draw dropout masks and regions: give their numbers back, so that the first replay draws
        # what the eager step would have drawn (a run repeats with and without graphs, up to the buckets' padding).
        rng = torch.cuda.get_rng_state(device)
        try:
            # thread_local: CUDA calls of other threads (a data loader's) are not this capture's business
            graphed = torch.cuda.make_graphed_callables(
                _PlainLoop(self.decoder), sample, allow_unused_input=True, capture_error_mode="thread_local"
            )
        except torch.OutOfMemoryError:
            graphed = None  # this shape runs eagerly from now on
            torch.cuda.empty_cache()
        except RuntimeError as e:
            B, T = key[:2]
            raise RuntimeError(
                f"model.cuda_graphs: capturing the decoder's training step for batch {B} x {T} steps failed ({e}); "
                "train without it (model.cuda_graphs: false)"
            ) from e
        finally:
            torch.cuda.set_rng_state(rng, device)
        self.graphs[key] = graphed
        return graphed
