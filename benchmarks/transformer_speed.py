"""Transformer speed: KV-cached decoding vs recomputing the prefix, and a training step vs torch.nn.Transformer.

    python benchmarks/transformer_speed.py                       # CPU, the torch default thread count
    python benchmarks/transformer_speed.py --threads 1 --json speed.json
    python benchmarks/transformer_speed.py --device cuda --batch 64 --train-batch 128

Everything is measured in one run, with the variants interleaved in every repeat (so a machine that slows down
mid-run slows all of them alike); the table reports the median over repeats.

- Generation: greedy search (`text_attn.core.decoding.greedy_search`) for exactly --out-len tokens (no eos can
  stop it) from an untrained model, once with our key/value cache (`Transformer.step`) and once with a step that
  re-runs the decoder over the whole prefix and projects only its last position to the vocabulary. Neither computes
  attention weights for plots. Goal: the cache at least 3x faster at 64 tokens.
- Training: one step (forward, label-smoothed cross-entropy, backward, Adam) on the same batch for our Transformer
  and for a model with the same embeddings, positions and tied output layer around `torch.nn.Transformer` of equal
  dimensions (post-norm, ReLU, dropout 0.1; torch.nn.Transformer also adds a final LayerNorm to each stack). Ours runs
  twice: as configured by default (the paper: no dropout on the attention weights, so the fused attention kernel
  applies) and with attention dropout 0.1 like torch.nn.Transformer (the same work). Goal: ours at least as fast.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from _runs import alternating, torch_device
from torch import nn

from text_attn.core.decoding import greedy_search
from text_attn.core.errors import new_file
from text_attn.core.safe_files import write_text
from text_attn.translation.transformer import Transformer, TransformerConfig

BOS, PAD = 1, 0


class RecomputeStepper:
    """The step protocol without a cache: every step decodes the whole prefix again."""

    def __init__(self, model: Transformer):
        self.model = model

    def step(self, tokens: torch.Tensor, state: dict):
        prefix = torch.cat([state["prefix"], tokens.unsqueeze(1)], dim=1)  # (N, t+1)
        hidden, _ = self.model.decode_hidden(prefix, state)
        log_probs = torch.log_softmax(self.model.out(hidden[:, -1]), dim=-1)
        return log_probs, None, {**state, "prefix": prefix}


class TorchTransformerModel(nn.Module):
    """The same embeddings, positions and tied output projection around torch.nn.Transformer."""

    def __init__(self, ours: Transformer):
        super().__init__()
        cfg = ours.cfg
        self.src_embed = nn.Embedding(cfg.src_vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        self.tgt_embed = nn.Embedding(cfg.tgt_vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        self.src_pos, self.tgt_pos = ours.src_pos, ours.tgt_pos
        self.core = nn.Transformer(
            cfg.d_model, cfg.num_heads, cfg.enc_layers, cfg.dec_layers, cfg.ff_dim, cfg.dropout, batch_first=True
        )
        self.drop = nn.Dropout(cfg.dropout)
        self.out = nn.Linear(cfg.d_model, cfg.tgt_vocab_size)
        self.out.weight = self.tgt_embed.weight
        self.scale = ours.scale

    def forward(self, src: torch.Tensor, src_lens: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        S, T = src.size(1), tgt_in.size(1)
        pad = torch.arange(S, device=src.device).unsqueeze(0) >= src_lens.unsqueeze(1)  # torch: True = ignore
        causal = nn.Transformer.generate_square_subsequent_mask(T, device=src.device)
        x = self.drop(self.src_embed(src) * self.scale + self.src_pos(S))
        y = self.drop(self.tgt_embed(tgt_in) * self.scale + self.tgt_pos(T))
        h = self.core(x, y, tgt_mask=causal, src_key_padding_mask=pad, memory_key_padding_mask=pad, tgt_is_causal=True)
        return self.out(h)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _timed(fn, device: torch.device) -> float:
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", type=torch_device, default="cpu", help="cpu or cuda (default: cpu)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's default)")
    p.add_argument("--d-model", type=int, default=256, help="the model's width (default 256)")
    p.add_argument("--heads", type=int, default=4, help="attention heads; must divide --d-model (default 4)")
    p.add_argument("--layers", type=int, default=3, help="encoder and decoder layers each")
    p.add_argument("--ff-dim", type=int, default=1024, help="feed-forward inner width (default 1024)")
    p.add_argument("--vocab", type=int, default=1000, help="source and target vocabulary size")
    p.add_argument("--batch", type=int, default=8, help="sentences per generation batch")
    p.add_argument("--src-len", type=int, default=30, help="source length (generation and training)")
    p.add_argument("--out-len", type=int, default=64, help="generated tokens per sentence")
    p.add_argument("--train-batch", type=int, default=32, help="sentence pairs per training step")
    p.add_argument("--tgt-len", type=int, default=30, help="target length in training")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats of each variant, interleaved; the median "
                   "is reported (default 5)")  # fmt: skip
    p.add_argument("--json", type=new_file, help="also write the results here")
    args = p.parse_args(argv)
    sizes = ("threads", "d_model", "heads", "layers", "ff_dim", "vocab", "batch", "src_len", "out_len", "train_batch",
             "tgt_len", "repeats")  # fmt: skip
    for name in sizes:
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.d_model % args.heads:
        p.error(f"--d-model {args.d_model} is not divisible by --heads {args.heads}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        p.error(f"--device {args.device}: torch sees no CUDA GPU here")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    cfg = TransformerConfig(
        args.vocab, args.vocab, args.d_model, args.heads, args.layers, args.layers, args.ff_dim, dropout=0.1
    )
    ours = Transformer(cfg).to(device)
    ours.step_attention = False  # plots off: both decoders compute the same thing, one with a cache
    theirs = TorchTransformerModel(ours).to(device)
    # the same weights with dropout on the attention weights too, as torch.nn.Transformer does
    matched = Transformer(TransformerConfig(**{**vars(cfg), "attn_dropout": cfg.dropout})).to(device)
    matched.load_state_dict(ours.state_dict())

    # generation inputs: sources of varied length (padding is masked)
    B, S = args.batch, args.src_len
    src_lens = torch.randint(S // 2, S + 1, (B,), device=device)
    src = torch.randint(3, args.vocab, (B, S), device=device) * (torch.arange(S, device=device) < src_lens[:, None])
    recompute = RecomputeStepper(ours)

    @torch.no_grad()
    def generate(cached: bool) -> None:
        ours.eval()
        state = ours.encode(src, src_lens)
        if cached:
            greedy_search(ours, state, B, BOS, -1, args.out_len)  # eos -1: never produced, exactly out-len tokens
        else:
            state["prefix"] = torch.empty(B, 0, dtype=torch.long, device=device)
            greedy_search(recompute, state, B, BOS, -1, args.out_len)

    # training inputs
    TB, T = args.train_batch, args.tgt_len
    t_lens = torch.randint(S // 2, S + 1, (TB,), device=device)
    t_src = torch.randint(3, args.vocab, (TB, S), device=device) * (torch.arange(S, device=device) < t_lens[:, None])
    tgt = torch.randint(3, args.vocab, (TB, T + 1), device=device)
    tgt[:, 0] = BOS
    opts = {m: torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9) for m in (ours, matched, theirs)}

    def train_step(model: nn.Module) -> None:
        model.train()
        out = model(t_src, t_lens, tgt[:, :-1])
        logits = out[0] if isinstance(out, tuple) else out
        loss = F.cross_entropy(logits.transpose(1, 2), tgt[:, 1:], ignore_index=PAD, label_smoothing=0.1)
        opts[model].zero_grad(set_to_none=True)
        loss.backward()
        opts[model].step()

    jobs = {
        "generate (KV cache)": lambda: generate(True),
        "generate (recompute prefix)": lambda: generate(False),
        "train step (ours)": lambda: train_step(ours),
        "train step (ours, attention dropout)": lambda: train_step(matched),
        "train step (torch.nn.Transformer)": lambda: train_step(theirs),
    }
    for fn in jobs.values():  # warm-up: allocator, kernels, Adam state
        fn()
    times: dict[str, list[float]] = {name: [] for name in jobs}
    names = list(jobs)
    for _, name in alternating(names, args.repeats):  # alternate the order too
        times[name].append(_timed(jobs[name], device))
    med = {name: statistics.median(ts) for name, ts in times.items()}

    gen_tokens = B * args.out_len
    cached_tps = gen_tokens / med["generate (KV cache)"]
    recompute_tps = gen_tokens / med["generate (recompute prefix)"]
    train_ratio = med["train step (torch.nn.Transformer)"] / med["train step (ours)"]
    matched_ratio = med["train step (torch.nn.Transformer)"] / med["train step (ours, attention dropout)"]
    threads = torch.get_num_threads() if device.type == "cpu" else None
    where = f"{device.type}" + (f", {threads} thread(s)" if threads else f" ({torch.cuda.get_device_name(device)})")
    print(
        f"\nTransformer speed on {where}: d_model {args.d_model}, {args.heads} heads, {args.layers}+{args.layers} "
        f"layers, ff {args.ff_dim}, vocab {args.vocab}; median of {args.repeats} interleaved repeats\n"
    )
    print("| measurement | median time | throughput | speed-up |")
    print("|---|---|---|---|")
    print(
        f"| greedy, {args.out_len} tokens x {B} sentences, KV cache | {med['generate (KV cache)'] * 1000:.0f} ms | "
        f"{cached_tps:.0f} tokens/s | {cached_tps / recompute_tps:.1f}x |"
    )
    print(
        f"| greedy, {args.out_len} tokens x {B} sentences, recompute prefix | "
        f"{med['generate (recompute prefix)'] * 1000:.0f} ms | {recompute_tps:.0f} tokens/s | 1.0x |"
    )
    for name, label in [
        ("train step (ours)", "ours (default: no attention dropout)"),
        ("train step (ours, attention dropout)", "ours, attention dropout 0.1 as torch"),
        ("train step (torch.nn.Transformer)", "torch.nn.Transformer"),
    ]:
        speedup = med["train step (torch.nn.Transformer)"] / med[name]
        print(
            f"| train step, {TB} pairs x {S}/{T} tokens, {label} | {med[name] * 1000:.0f} ms | "
            f"{TB / med[name]:.1f} pairs/s | {speedup:.2f}x |"
        )
    goal_gen = "met" if cached_tps >= 3 * recompute_tps else "NOT met"
    goal_train = "met" if min(train_ratio, matched_ratio) >= 1.0 else "NOT met"
    print(
        f"\ngoals: cache >= 3x recompute: {goal_gen}; training at least as fast as torch.nn.Transformer: {goal_train}"
    )
    if args.json:
        result = {
            "device": where,
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "median_seconds": med,
            "all_seconds": times,
            "generate_tokens_per_s": {"kv_cache": cached_tps, "recompute": recompute_tps},
            "generate_speedup": cached_tps / recompute_tps,
            "train_speedup_vs_torch": train_ratio,
            "train_speedup_vs_torch_attention_dropout": matched_ratio,
        }
        write_text(args.json, json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
