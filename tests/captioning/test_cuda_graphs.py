"""model.cuda_graphs (captioning.training.cuda_graphs), as far as a CPU can check it:
- the length buckets: captions padded with pad to a multiple of 8 give the same loss and the same gradient of every
  parameter as unpadded, soft and hard attention (hard: the same regions drawn), training and validation's loss;
- what a graph would capture (the decoder's plain loop) plus the loss and the backward read nothing back to the host:
  run on the meta device (the branches a GPU takes) under text_attn.core.sync_check.no_host_sync, soft and hard;
- off CUDA the graphed forward is the decoder's own (eager), and caption-train documents the option and ignores it
  with one line;
and on a GPU (skipped without CUDA): the graphed training step gives the eager plain step's loss and gradients, two
steps of two shapes, soft and hard, with the optimiser moving the weights in between; and caption-train's 4 steps
with the option give the weights of 4 without it, the graphs replayed."""

from __future__ import annotations

import copy
import types

import pytest
import torch

from captioning.model.decoder import DecoderConfig, DecoderOutput, ShowAttendTellDecoder
from captioning.training.cuda_graphs import LENGTH_BUCKET, GraphedDecoder, _PlainLoop, bucket_length, pad_to_bucket
from captioning.training.objective import CaptionObjective, ObjectiveConfig, caption_loss, hard_attention_loss
from text_attn.core.sync_check import no_host_sync

PAD, V, L, D = 0, 23, 9, 10


def _decoder(attention: str, dropout: float = 0.0, fast_path: bool = False) -> ShowAttendTellDecoder:
    torch.manual_seed(0)
    cfg = DecoderConfig(vocab_size=V, feature_dim=D, embed_dim=8, hidden_dim=12, attn_dim=6, dropout=dropout,
                        attention=attention, soft_prob=0.5, fast_path=fast_path)  # fmt: skip
    return ShowAttendTellDecoder(cfg)


def _batch(lengths: list[int], device: str = "cpu", attn_targets: bool = False) -> dict:
    """Captions of these word counts: captions_in = bos + words, targets = words + eos, then pad; (B, max + 1)."""
    g = torch.Generator().manual_seed(sum(lengths))
    T = max(lengths) + 1
    captions_in = torch.full((len(lengths), T), PAD)
    targets = torch.full((len(lengths), T), PAD)
    for b, n in enumerate(lengths):
        words = torch.randint(4, V, (n,), generator=g)
        captions_in[b, : n + 1] = torch.cat([torch.tensor([1]), words])
        targets[b, : n + 1] = torch.cat([words, torch.tensor([2])])
    batch = {"captions_in": captions_in.to(device), "targets": targets.to(device)}
    if attn_targets:  # each real word's attention on region b % L
        target = torch.zeros(len(lengths), T, L)
        for b in range(len(lengths)):
            target[b, :, b % L] = 1.0
        batch["attn_targets"], batch["attn_targets_mask"] = target.to(device), (targets != PAD).to(device)
    return batch


def test_bucket_padding_shapes_and_values():
    assert [bucket_length(t) for t in (1, 7, 8, 9, 16, 17)] == [8, 8, 8, 16, 16, 24] and LENGTH_BUCKET == 8
    batch = _batch([3, 10], attn_targets=True)  # T = 11 -> 16
    padded = pad_to_bucket(batch, PAD)
    assert padded["captions_in"].shape == padded["targets"].shape == (2, 16)
    assert padded["attn_targets"].shape == (2, 16, L) and padded["attn_targets_mask"].shape == (2, 16)
    for key in ("captions_in", "targets", "attn_targets", "attn_targets_mask"):
        assert torch.equal(padded[key][:, :11], batch[key])  # the batch as it was, then padding
    assert (padded["targets"][:, 11:] == PAD).all() and (padded["captions_in"][:, 11:] == PAD).all()
    assert not padded["attn_targets_mask"][:, 11:].any() and (padded["attn_targets"][:, 11:] == 0).all()
    assert pad_to_bucket(padded, PAD) is padded  # already a multiple: untouched


def _loss_and_grads(dec, objective, features, batch, seed: int):
    """One training step's loss by the real objective, its parts, and every parameter's gradient (and the features')."""
    dec.zero_grad(set_to_none=True)
    features = features.clone().requires_grad_()
    torch.manual_seed(seed)
    loss, parts = objective.teacher_forced(types.SimpleNamespace(decoder=dec), features, batch, PAD)
    loss.backward()
    grads = {name: p.grad.clone() for name, p in dec.named_parameters() if p.grad is not None}
    return loss.detach(), parts, {**grads, "features": features.grad}


@pytest.mark.parametrize("fast_path", [False, True], ids=["plain", "fast"])
@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_bucket_padding_keeps_the_loss_and_every_gradient(attention, fast_path):
    dec = _decoder(attention, fast_path=fast_path).train()
    hard = attention == "hard"
    # attention supervision on too (soft): its targets and mask are padded with the captions
    cfg = ObjectiveConfig(ds_lambda=0.7, attn_sup_lambda=0.0 if hard else 0.5, entropy_lambda=0.05)
    batch = _batch([2, 5, 9, 4, 6, 3], attn_targets=not hard)  # T = 10 -> 16: six padded steps
    features = torch.randn(6, L, D, generator=torch.Generator().manual_seed(1))
    padded = pad_to_bucket(batch, PAD)
    assert padded["targets"].size(1) == 16
    # Hard attention draws each caption's coin, then each step's regions in step order: the padded steps draw after
    # every real one, so the real steps draw the same regions. Dropout 0: its masks are laid out over (B, T, ...) and
    # would differ (tested below in eval mode, where dropout is off, with dropout 0.5).
    want_loss, want_parts, want = _loss_and_grads(dec, CaptionObjective(cfg, hard), features, batch, seed=5)
    got_loss, got_parts, got = _loss_and_grads(dec, CaptionObjective(cfg, hard), features, padded, seed=5)
    # Float32 sums over the (zero) padded steps may add in another order: a few ulps, never more.
    assert torch.allclose(got_loss, want_loss, rtol=1e-5, atol=1e-6)
    assert set(got) == set(want) and len(want) == len(list(dec.parameters())) + 1
    for name in want:
        assert torch.allclose(got[name], want[name], rtol=1e-5, atol=1e-6), name
        assert want[name].abs().max() > 0, name  # every gradient reached (no vacuous zeros)
    if hard:
        assert want_parts["sampled"].any() and not want_parts["sampled"].all()  # both kinds of caption in the batch
        assert torch.equal(got_parts["sampled"], want_parts["sampled"])
        assert float(want_parts["reinforce"].detach()) != 0.0
        assert torch.allclose(got_parts["reward"], want_parts["reward"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_bucket_padding_keeps_the_validation_loss_with_dropout(attention):
    dec = _decoder(attention, dropout=0.5).eval()
    objective = CaptionObjective(ObjectiveConfig(), attention == "hard")
    batch = _batch([4, 7, 1])
    features = torch.randn(3, L, D, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want, _ = objective.teacher_forced(types.SimpleNamespace(decoder=dec), features, batch, PAD)
        got, _ = objective.teacher_forced(types.SimpleNamespace(decoder=dec), features, pad_to_bucket(batch, PAD), PAD)
    assert torch.allclose(got, want, rtol=1e-6) and float(want) > 0


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_the_captured_work_reads_nothing_back_to_the_host(attention):
    """The graph's content (the plain loop), the loss after it and the backward, on the meta device: no tensor there
    has data, and every ``device.type == "cpu"`` branch goes the way it goes on a GPU."""
    dec = _decoder(attention, dropout=0.5).to("meta").train()
    batch = pad_to_bucket(_batch([3, 6, 2, 5]), PAD)  # (4, 8)
    batch = {k: v.to("meta") for k, v in batch.items()}
    features = torch.empty(4, L, D, device="meta", requires_grad=True)
    with no_host_sync():
        use_soft = dec.draw_use_soft(4, features.device)  # (B,) drawn eagerly, an input of the graph
        outs = _PlainLoop(dec)(features, batch["captions_in"], *(() if use_soft is None else (use_soft,)))
        if attention == "soft":
            loss, _ = caption_loss(outs[0], batch["targets"], outs[1], PAD, ds_lambda=1.0, label_smoothing=0.1)
        else:
            out = DecoderOutput(*outs, sampled=~use_soft)  # as GraphedDecoder builds it
            baseline = torch.zeros((), device="meta")  # the moving average's value, once it has one
            loss, _ = hard_attention_loss(out, batch["targets"], PAD, baseline, ds_lambda=1.0, entropy_lambda=0.01)
        loss.backward()
    assert features.grad is not None and features.grad.shape == features.shape
    assert all(p.grad is not None for p in dec.parameters())  # the backward ran through every parameter
    assert len(outs) == (2 if attention == "soft" else 5)


def test_off_cuda_the_graphed_forward_is_the_decoders_own():
    dec = _decoder("hard").train()
    graphed = GraphedDecoder(dec)
    features, captions = torch.randn(3, L, D), _batch([4, 2, 6])["captions_in"]
    torch.manual_seed(4)
    got = graphed(features, captions, soft_prob=0.0)
    torch.manual_seed(4)
    want = dec(features, captions, soft_prob=0.0)
    assert torch.equal(got.logits, want.logits) and torch.equal(got.chosen, want.chosen)
    assert graphed.eager == 1 and graphed.replays == 0 and graphed.graphs == {}
    assert not any(p._backward_hooks for p in dec.parameters())  # no gradient hooks: nothing was captured


def test_caption_train_documents_the_option(capsys):
    from captioning.commands.train import train_main

    with pytest.raises(SystemExit):
        train_main(["fit", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    start = out.rindex("--model.cuda_graphs {true,false}")  # its help, after the usage line
    text = out[start : out.index("(type: bool, default: False)", start)]
    for phrase in ("captured as CUDA graphs", "one per (batch size, caption length bucket", "Needs CUDA",
                   "Never measured on a GPU yet, so off by default"):  # fmt: skip
        assert phrase in text, phrase


# --- on a GPU -----------------------------------------------------------------------------------------------------
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: run on the device machine")
@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_the_graphed_step_gives_the_eager_steps_loss_and_gradients(attention):
    hard = attention == "hard"
    graphed_dec = _decoder(attention, dropout=0.3).cuda().train()
    eager_dec = copy.deepcopy(graphed_dec)  # the same weights; each moved by its own optimiser
    graphed = GraphedDecoder(graphed_dec)
    cfg = ObjectiveConfig(ds_lambda=1.0, entropy_lambda=0.05)
    objectives = {"eager": CaptionObjective(cfg, hard).cuda(), "graphed": CaptionObjective(cfg, hard).cuda()}
    decs = {"eager": eager_dec, "graphed": graphed_dec}
    optims = {k: torch.optim.Adam(d.parameters(), lr=1e-2) for k, d in decs.items()}
    shapes = [[3, 6, 2, 5], [9, 12, 4, 10], [5, 1, 7, 3], [11, 2, 8, 13]]  # T 7, 13, 8, 14 -> buckets 8, 16, 8, 16
    for step, lengths in enumerate(shapes):
        batch = pad_to_bucket(_batch(lengths, "cuda"), PAD)
        features = torch.randn(4, L, D, device="cuda", generator=torch.Generator("cuda").manual_seed(step))
        results = {}
        for kind in ("eager", "graphed"):
            dec, opt = decs[kind], optims[kind]
            opt.zero_grad(set_to_none=True)
            torch.manual_seed(10 + step)  # the same dropout masks and region draws: graph replays advance the
            # generator as the eager kernels do (the capture's own draws are given back)
            forward = graphed if kind == "graphed" else None
            model, vocab = types.SimpleNamespace(decoder=dec), types.SimpleNamespace(pad_id=PAD)
            loss, _, _ = objectives[kind].training_loss(model, vocab, features, batch, step, forward)  # type: ignore[arg-type]
            loss.backward()
            results[kind] = (loss.detach(), {n: p.grad.clone() for n, p in dec.named_parameters()})
            opt.step()
        (want, want_grads), (got, got_grads) = results["eager"], results["graphed"]
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-5), (step, got, want)
        for name in want_grads:
            assert torch.allclose(got_grads[name], want_grads[name], rtol=1e-3, atol=1e-5), (step, name)
    assert graphed.replays == 4 and graphed.eager == 0 and len(graphed.graphs) == 2  # two shapes, each replayed twice
    for (_, p), (_, q) in zip(eager_dec.named_parameters(), graphed_dec.named_parameters(), strict=True):
        assert torch.allclose(p, q, rtol=1e-3, atol=1e-4)  # the optimiser moved both alike


def _fit_tiny(tmp_path, accelerator: str, graphs: bool):
    """caption-train fit of the tiny shapes config, 4 steps, no validation: the CLI (its trainer and model)."""
    from pathlib import Path

    from captioning.commands.train import caption_train_cli

    config = Path(__file__).parents[1] / "fixtures" / "captions" / "tiny_shapes.yaml"
    return caption_train_cli(
        ["fit", "--config", str(config), "--trainer.max_steps", "4", "--trainer.limit_val_batches", "0"]
        + ["--trainer.accelerator", accelerator, "--model.export_path", str(tmp_path / f"{graphs}.pt")]
        + ["--model.cuda_graphs", str(graphs).lower()]
    )


def _decoder_weights(cli) -> dict[str, torch.Tensor]:
    return {n: p.detach().float().cpu() for n, p in cli.model.model.decoder.named_parameters()}


@pytest.mark.long
def test_caption_train_on_a_cpu_ignores_the_option_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # LightningCLI writes its config.yaml here
    # the accelerator named: on the device machine "auto" would be its GPU, where the option is not ignored
    cli = _fit_tiny(tmp_path, "cpu", graphs=True)
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "cuda_graphs" in line]
    assert said == [
        "caption-train: model.cuda_graphs is ignored on cpu: CUDA graphs need a CUDA device "
        "(the decoder runs its usual loop)"
    ]
    assert "Traceback" not in err and cli.trainer.global_step == 4 and cli.model._graphed is None
    # ignored means the usual loop: the same weights as a run without the option (what the GPU test compares)
    (tmp_path / "eager").mkdir()
    monkeypatch.chdir(tmp_path / "eager")
    eager = _decoder_weights(_fit_tiny(tmp_path, "cpu", graphs=False))
    assert all(torch.equal(w, eager[n]) for n, w in _decoder_weights(cli).items())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: run on the device machine")
def test_caption_train_on_a_gpu_trains_as_the_eager_loop(tmp_path, monkeypatch):
    """The option through caption-train itself (Lightning's loop, the optimiser, clipping): 4 steps captured give the
    eager steps' weights, and the graphs were replayed, not bypassed."""
    replays = []
    close = GraphedDecoder.close

    def counted_close(self):  # on_train_end closes the graphs: count their replays first
        replays.append(self.replays)
        close(self)

    monkeypatch.setattr(GraphedDecoder, "close", counted_close)
    runs = {}
    for graphs in (False, True):
        (tmp_path / str(graphs)).mkdir()
        monkeypatch.chdir(tmp_path / str(graphs))
        cli = _fit_tiny(tmp_path, "gpu", graphs)
        assert cli.trainer.global_step == 4
        runs[graphs] = _decoder_weights(cli)
    assert len(replays) == 1 and replays[0] >= 1, replays
    for name, want in runs[False].items():
        assert torch.allclose(runs[True][name], want, rtol=1e-3, atol=1e-4), name
