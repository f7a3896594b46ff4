"""Speed of the toolkit on this machine, in one run: a few minutes on 2 CPU cores. Prints a markdown table.

    python benchmarks/speed.py                    # 2 threads, 3 repeats
    python benchmarks/speed.py --threads 1 --repeats 5 --json speed.json

Every comparison is measured in this run, its variants interleaved in each repeat (a machine that slows down slows
them alike); the table gives medians. Rows:
- matmul peak: fp32 (N x N) @ (N x N), the ceiling the training step is compared with (GFLOP/s).
- compiled kernels: the attention score's and the cross-entropy's C kernels (text_attn/core/native.py) or, where no C
  compiler works, PyTorch.
- beam search, Show-Attend-Tell at the paper's size (32 images of 14 x 14 regions of 2048 features; embedding,
  attention and LSTM 512; vocabulary 10,000; beam 5; exactly 20 steps: the end token is never produced): the batched
  search against the same search one image at a time, and whether their captions are identical. Goal: >= 5x.
- training step of that decoder (batch 32, captions of 20 words: teacher forcing, cross-entropy + doubly stochastic
  term, backward, Adam: ours fused as CaptionModule's, the reference's plain as in its tutorial) on cached features:
  time, GFLOP/s counted by torch's FlopCounterMode, and that as a fraction of the matmul peak; against the same step
  of the popular public PyTorch decoder's algorithm (sgrvinod's tutorial, written here as ReferenceDecoder: it
  projects the regions again at every step). Goal: >= 6x, as the median of the repeats' ratios (each repeat runs
  ours, then the reference).
- caption throughput of the shapes model (captioning/assets/shapes_soft.pt, EfficientNet-Lite0 at 128 px, end to end:
  preprocess, encode, generate) at beam 1 / 3 / 5 and batch 1 / 32 (images/s).
- `caption FOLDER --jsonl FILE` as a user runs it with the default (Flickr8k) model, on a folder of 192 photos of
  500 x 375 (JPEG; cut from the bundled CC0 photos): files read and decoded by the CLI's workers, preprocessed,
  encoded, captioned at beam 1 / 3, written; model loading included (images/s). Goal at beam 3: >= 40. Beside it,
  beam 3 with the encoder in PyTorch (CAPTION_ONNX=0; by default ONNX Runtime runs the frozen encoder, and a row says
  which did). Then where the time goes: the encoder alone (ONNX Runtime, and PyTorch: the same features to 1e-3) and
  the beam 3 search alone on the same photos (batches of 16), that search
  stepping every image until the batch's last caption ends (what it did before ended images left the batch), and
  EfficientNet-Lite0 at 224 px alone (the encoder the goal's figures are for; the bundled model's is Lite2 at 260).
- `caption FOLDER` of 25 phone photos (4032 x 3024 JPEGs, 12 megapixels: the bundled photos scaled up), beam 3:
  large JPEGs decoded at a reduced scale (the default since it was added) against decoded in full (before), and how
  many captions are the same both ways.
- self-critical training step of the bundled Flickr8k model (its decoder: Lite2's 9 x 9 regions of 1280 features,
  512 wide; the SCST config's 64 photos x 5 samples of at most 20 words, CIDEr-D + BLEU-4 reward, backward) on the
  folder's photos: as it runs now (each photo's keys projected once for its 5 samples; ended samples leave the
  sampling batch; the samples scored in up to 4 groups of similar length) against as it ran before (keys projected
  per sample, every sample stepped to the 20th word and scored over the longest sample's length).
- translation throughput of an RNN with Bahdanau attention of the reorder configs' size (random weights; 64 sentences
  of 30 tokens, 30 output tokens each) at beam 1 / 3 (output tokens/s).
- with ``--multi30k-root`` (its val.de[.gz] and val.en[.gz]): the bundled German -> English model on 256 Multi30k
  val sentences in batches of 64, beam 1 and 8, the search dropping ended sentences from the batch against stepping
  them to the end (sentences/s).
- peak memory: the process's maximum resident set.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from text_attn.core.errors import new_file
from text_attn.core.safe_files import write_text

ROOT = Path(__file__).resolve().parents[1]


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def interleaved_times(variants: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """Seconds of every repeat per variant; each repeat runs every variant once, in turn (after one warm-up call
    each)."""
    for fn in variants.values():
        fn()
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            times[name].append(timed(fn))
    return times


def interleaved(variants: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median seconds per variant (see :func:`interleaved_times`)."""
    return {k: statistics.median(v) for k, v in interleaved_times(variants, repeats).items()}


@torch.no_grad()
def matmul_peak(repeats: int, n: int = 1536) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    t = interleaved({"mm": lambda: a @ b}, max(repeats, 5))["mm"]
    return 2 * n**3 / t / 1e9


def paper_decoder():
    from captioning.model.decoder import DecoderConfig, ShowAttendTellDecoder

    torch.manual_seed(0)
    cfg = DecoderConfig(vocab_size=10_000, feature_dim=2048, embed_dim=512, hidden_dim=512, attn_dim=512)
    return ShowAttendTellDecoder(cfg)


def beam_search_rows(repeats: int) -> list[dict]:
    from text_attn.core.decoding import beam_search

    dec = paper_decoder().eval()
    images, steps, beam, eos = 32, 20, 5, 10_005  # eos outside the vocabulary: every caption runs all 20 steps
    feats = torch.randn(images, 196, 2048)

    @torch.no_grad()
    def batched():
        return beam_search(dec, dec.init_state(feats), images, 1, eos, steps, beam)

    @torch.no_grad()
    def one_by_one():
        return [beam_search(dec, dec.init_state(feats[i : i + 1]), 1, 1, eos, steps, beam) for i in range(images)]

    a, b = batched(), one_by_one()
    same = all(torch.equal(a.tokens[i], b[i].tokens[0]) for i in range(images))
    t = interleaved({"batched": batched, "one image at a time": one_by_one}, repeats)
    ratio = t["one image at a time"] / t["batched"]
    return [
        {"what": "beam 5, 32 images, batched", "value": f"{t['batched']:.2f} s", "seconds": t["batched"]},
        {"what": "beam 5, one image at a time", "value": f"{t['one image at a time']:.2f} s"},
        {"what": "batched speed-up (goal >= 5x)", "value": f"{ratio:.2f}x, identical captions: {same}", "x": ratio},
    ]


class ReferenceDecoder(torch.nn.Module):
    """The popular public PyTorch Show-Attend-Tell decoder's algorithm (sgrvinod's tutorial), written here for the
    comparison: at every step the regions of the still-running captions are projected again (U a_i, (b, L, D) ->
    (b, L, A)), the batch shrinks as captions end (sorted by length), vector gate, ReLU attention scores, dropout on
    h before the output layer. Same sizes as ours."""

    def __init__(self, vocab: int = 10_000, feat: int = 2048, dim: int = 512):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab, dim)
        self.encoder_att, self.decoder_att = torch.nn.Linear(feat, dim), torch.nn.Linear(dim, dim)
        self.full_att = torch.nn.Linear(dim, 1)
        self.init_h, self.init_c = torch.nn.Linear(feat, dim), torch.nn.Linear(feat, dim)
        self.f_beta = torch.nn.Linear(dim, feat)
        self.lstm = torch.nn.LSTMCell(dim + feat, dim)
        self.fc = torch.nn.Linear(dim, vocab)
        self.dropout = torch.nn.Dropout(0.5)

    def forward(self, feats: torch.Tensor, captions: torch.Tensor, lengths: list[int]):
        B, T = captions.size(0), max(lengths)
        mean = feats.mean(1)
        h, c = self.init_h(mean), self.init_c(mean)
        emb = self.embedding(captions)  # (B, T, E)
        logits = feats.new_zeros(B, T, self.fc.out_features)
        alphas = feats.new_zeros(B, T, feats.size(1))
        for t in range(T):
            b = sum(n > t for n in lengths)  # captions still running (sorted longest first)
            att = self.full_att(torch.relu(self.encoder_att(feats[:b]) + self.decoder_att(h[:b]).unsqueeze(1)))
            alpha = torch.softmax(att.squeeze(2), dim=1)  # (b, L)
            context = torch.sigmoid(self.f_beta(h[:b])) * (feats[:b] * alpha.unsqueeze(2)).sum(1)
            h, c = self.lstm(torch.cat([emb[:b, t], context], dim=1), (h[:b], c[:b]))
            logits[:b, t] = self.fc(self.dropout(h))
            alphas[:b, t] = alpha
        return logits, alphas


def our_train_step(dec, opt, feats, captions_in, targets, forward=None) -> None:
    """One training step of our decoder: teacher forcing, cross-entropy and the doubly stochastic term (lambda 1),
    backward, Adam. ``forward``: what runs the decoder instead of ``dec`` itself (benchmarks/gpu.py: the graphed one,
    captioning.training.cuda_graphs)."""
    from captioning.training.objective import caption_loss

    out = (forward or dec)(feats, captions_in)
    loss, _ = caption_loss(out.logits, targets, out.alphas, pad_id=0, ds_lambda=1.0)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def reference_train_step(ref: ReferenceDecoder, opt, feats, captions_in, targets) -> None:
    """One training step of the reference decoder: cross-entropy and its doubly stochastic term (lambda 1), backward,
    Adam. Every caption runs all its words: the same work as ours (no shrinking batch)."""
    logits, alphas = ref(feats, captions_in, [captions_in.size(1)] * feats.size(0))
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
    loss = loss + ((1.0 - alphas.sum(1)) ** 2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def train_step_rows(repeats: int, peak: float) -> list[dict]:
    from torch.utils.flop_counter import FlopCounterMode

    dec = paper_decoder().train()
    opt = torch.optim.Adam(dec.parameters(), lr=1e-4, fused=True)  # as CaptionModule's; the tutorial's is plain Adam
    feats = torch.randn(32, 196, 2048)
    captions = torch.randint(4, 10_000, (32, 21))
    captions_in, targets = captions[:, :-1], captions[:, 1:]

    def step():
        our_train_step(dec, opt, feats, captions_in, targets)

    torch.manual_seed(0)
    ref = ReferenceDecoder().train()
    ref_opt = torch.optim.Adam(ref.parameters(), lr=1e-4)

    def reference_step():
        reference_train_step(ref, ref_opt, feats, captions_in, targets)

    with FlopCounterMode(display=False) as counter:
        step()
    flops = counter.get_total_flops()
    runs = interleaved_times({"ours": step, "reference": reference_step}, repeats)
    times = {k: statistics.median(v) for k, v in runs.items()}
    t = times["ours"]
    rate = flops / t / 1e9
    # The speed-up is the median of each repeat's ratio (ours, then the reference right after it): a pair measured
    # back to back sees the same machine, where the two medians of times can come from repeats the machine slowed
    # differently (a busy run gave repeats of 6.3, 6.0, 5.9, 5.8, 5.3x and medians 1.35 s / 7.32 s = 5.4x).
    pairs = [r / o for o, r in zip(runs["ours"], runs["reference"], strict=True)]
    ratio, each = statistics.median(pairs), ", ".join(f"{x:.1f}" for x in pairs)
    of_medians = times["reference"] / t
    return [
        {"what": "training step, batch 32 x 20 words", "value": f"{t:.2f} s ({flops / 1e9:.0f} GFLOP)", "seconds": t},
        {"what": "reference decoder's step (sgrvinod's algorithm)", "value": f"{times['reference']:.2f} s"},
        {
            "what": "training speed-up over the reference (goal >= 6x)",
            "value": f"{ratio:.1f}x (each repeat: {each}; ratio of the median times {of_medians:.1f}x)",
            "x": ratio,
        },
        {
            "what": "training step GFLOP/s (share of peak)",
            "value": f"{rate:.1f} ({rate / peak:.0%})",
            "share": rate / peak,
        },
    ]


def caption_rows(repeats: int) -> list[dict]:
    from captioning.model.captioner import Captioner
    from captioning.training.shapes import make_scenes

    captioner = Captioner.load(ROOT / "captioning" / "assets" / "shapes_soft.pt")
    images = [s.image for s in make_scenes(32, 7, 128, 3)]
    variants = {}
    for beam in (1, 3, 5):
        variants[f"beam {beam}, batch 32"] = lambda b=beam: captioner.caption_images(images, b, 30)
        variants[f"beam {beam}, batch 1"] = lambda b=beam: [captioner.caption_images([im], b, 30) for im in images]
    t = interleaved(variants, repeats)
    return [{"what": f"caption, {k}", "value": f"{len(images) / v:.1f} images/s"} for k, v in t.items()]


def photo_folder(folder: Path, n: int = 192) -> Path:
    """n JPEG photos of 500 x 375 (Flickr's usual size): crops and flips of the bundled CC0 photos."""
    import random

    from PIL import Image, ImageOps

    from captioning.commands.caption import DEMO_PHOTOS

    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    sources = [Image.open(p).convert("RGB") for p in DEMO_PHOTOS]
    for i in range(n):
        im = sources[i % len(sources)]
        w, h = im.size
        cw, ch = rng.randint(w * 2 // 3, w), rng.randint(h * 2 // 3, h)
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        crop = im.crop((x, y, x + cw, y + ch)).resize((500, 375), Image.Resampling.BICUBIC)
        (ImageOps.mirror(crop) if i % 2 else crop).save(folder / f"photo{i:04d}.jpg", quality=90)
    return folder


def caption_folder_rows(repeats: int) -> list[dict]:
    import io
    import tempfile

    from captioning.commands.caption import BUNDLED_MODEL, caption_main
    from captioning.model import onnx_encoder

    if not BUNDLED_MODEL.is_file():
        return [{"what": "caption FOLDER (Flickr8k model)", "value": f"skipped: {BUNDLED_MODEL.name} is missing"}]
    with tempfile.TemporaryDirectory() as tmp:
        folder = photo_folder(Path(tmp) / "photos")
        n = len(list(folder.iterdir()))

        encoders = set()  # which library ran the encoder in the default runs (captioning.model.onnx_encoder.status)

        def run(beam: int) -> None:
            out = Path(tmp) / f"beam{beam}.jsonl"
            out.unlink(missing_ok=True)
            with contextlib.redirect_stderr(io.StringIO()):
                code = caption_main([str(folder), "--beam-size", str(beam), "--jsonl", str(out)])
            if code != 0 or len(out.read_text().splitlines()) != n:
                raise RuntimeError(f"caption {folder} at beam {beam} failed (exit code {code})")

        def run_default(beam: int) -> None:
            run(beam)
            encoders.add(onnx_encoder.status())

        def run_torch() -> None:  # the encoder in PyTorch, as before ONNX Runtime ran it
            with onnx_off():
                run(3)

        t = interleaved({**{f"beam {b}": (lambda b=b: run_default(b)) for b in (1, 3)}, "torch": run_torch}, repeats)
        rows = [
            {"what": f"caption FOLDER of {n} photos (Flickr8k model), beam {b}", "value": f"{n / t[f'beam {b}']:.1f} "
             "images/s", "rate": n / t[f"beam {b}"]}
            for b in (1, 3)
        ]  # fmt: skip
        rows.append({"what": "the same at beam 3, the encoder in PyTorch (CAPTION_ONNX=0)",
                     "value": f"{n / t['torch']:.1f} images/s ({t['torch'] / t['beam 3']:.2f}x the time)"})  # fmt: skip
        rows.append({"what": "frozen encoder (beam 1 / 3 rows)", "value": "; ".join(sorted(encoders))})
        return rows + folder_split_rows(folder, repeats)


@contextlib.contextmanager
def onnx_off():
    """CAPTION_ONNX=0 for the block: the frozen encoder runs in PyTorch (captioning.model.onnx_encoder)."""
    before = os.environ.get("CAPTION_ONNX")
    os.environ["CAPTION_ONNX"] = "0"
    try:
        yield
    finally:
        if before is None:
            del os.environ["CAPTION_ONNX"]
        else:
            os.environ["CAPTION_ONNX"] = before


def folder_split_rows(folder: Path, repeats: int, batch: int = 16) -> list[dict]:
    """Where the folder's time goes: the model's encoder alone and its beam 3 search alone over the same photos, in
    the CLI's batches of 16, and the search stepping every image to the end (drop_ended False) against the default,
    which stops stepping an image once its beams have all ended (the same captions)."""
    from captioning.commands.caption import BUNDLED_MODEL
    from captioning.model.captioner import Captioner
    from captioning.model.encoder import EncoderConfig, ImageEncoder, preprocess_for
    from captioning.photos.preprocess import load_image, prepared

    captioner = Captioner.load(BUNDLED_MODEL)
    side = captioner.preprocess.decode_side
    pixels = torch.stack([captioner.preprocess(load_image(p, side)) for p in sorted(folder.iterdir())])
    n = len(pixels)

    def encode():
        return torch.cat([captioner.encode(pixels[i : i + batch]) for i in range(0, n, batch)])

    def encode_torch():
        with onnx_off():
            return encode()

    features = encode()
    torch.testing.assert_close(encode_torch(), features, rtol=1e-3, atol=1e-3)  # the same features, either library

    def search(drop: bool):
        return [
            " ".join(c.words)
            for i in range(0, n, batch)
            for c in captioner.caption_features(features[i : i + batch], 3, 30, drop_ended=drop)
        ]

    # EfficientNet-Lite0 at 224 px, the encoder the goal's own figures are for (the bundled model's is Lite2 at 260):
    # what a Lite0 captioner's encoder would cost here, frozen and folded the same way
    cfg0 = EncoderConfig("efficientnet_lite0", grid=7, image_size=224, crop=False)
    lite0, pre0 = ImageEncoder.from_config(cfg0).eval(), preprocess_for(cfg0)
    small = torch.stack([prepared(p, pre0) for p in sorted(folder.iterdir())])

    @torch.no_grad()
    def encode_lite0():
        return torch.cat([lite0(small[i : i + batch]) for i in range(0, n, batch)])

    same = search(True) == search(False)
    t = interleaved({"encode": encode, "torch": encode_torch, "lite0": encode_lite0, "drop": lambda: search(True),
                     "all": lambda: search(False)}, repeats)  # fmt: skip
    # the two in turn, nothing else (no files, no decoding); the search is the bundled decoder's over 81 regions (a
    # Lite0 model's 7 x 7 grid has 49: its search would cost somewhat less)
    both = 1 / (t["lite0"] / n + t["drop"] / n)
    return [
        {"what": f"the folder's photos: encoder alone, batch {batch}", "value": f"{n / t['encode']:.1f} images/s"},
        {"what": "the same encoder in PyTorch (CAPTION_ONNX=0)",
         "value": f"{n / t['torch']:.1f} images/s ({t['torch'] / t['encode']:.2f}x the time)"},
        {"what": f"the folder's photos: beam 3 search alone, batch {batch}", "value": f"{n / t['drop']:.1f} images/s"},
        {"what": "the same search stepping every image to the end (ended images kept in the batch)",
         "value": f"{n / t['all']:.1f} images/s ({t['all'] / t['drop']:.2f}x the time), identical captions: {same}"},
        {"what": f"the folder's photos: EfficientNet-Lite0 at 224 px alone (not the bundled encoder), batch {batch}",
         "value": f"{n / t['lite0']:.1f} images/s; with the beam 3 search above, about {both:.1f} images/s"},
    ]  # fmt: skip


def scst_step_rows(repeats: int, n: int = 64, samples: int = 5, max_len: int = 20) -> list[dict]:
    """The self-critical step of the bundled model on n of the folder's photos, now against before (module doc)."""
    import tempfile

    from captioning.commands.caption import BUNDLED_MODEL
    from captioning.model.captioner import Captioner
    from captioning.photos.preprocess import load_image
    from captioning.training.objective import CaptionReward, self_critical_step
    from text_attn.core.decoding import Sampling
    from text_attn.core.self_critical import self_critical_step as shared_step

    if not BUNDLED_MODEL.is_file():
        return [{"what": "SCST step (Flickr8k model)", "value": f"skipped: {BUNDLED_MODEL.name} is missing"}]
    captioner = Captioner.load(BUNDLED_MODEL)
    captioner.model.decoder = captioner.decoders[0]  # training steps one decoder: an ensemble's members train apart
    model, vocab = captioner.model.float(), captioner.vocab
    with tempfile.TemporaryDirectory() as tmp:
        paths = sorted(photo_folder(Path(tmp) / "photos", n).iterdir())
        side = captioner.preprocess.decode_side
        pixels = torch.stack([captioner.preprocess(load_image(p, side)) for p in paths])
    features = torch.cat([captioner.encode(pixels[i : i + 16]) for i in range(0, n, 16)]).float()  # (n, L, D)
    # the rewards' values do not change the work: each photo's references are its greedy caption, 5 times
    greedy = [c.words for c in captioner.caption_features(features, 1, max_len)]
    references = [[words] * 5 for words in greedy]
    reward = CaptionReward(references, bleu=1.0)
    bos, eos, pad = vocab.bos_id, vocab.eos_id, vocab.pad_id
    repeated = features.repeat_interleave(samples, dim=0)  # (n*K, L, D): before, every sample had its own copy
    words: dict[str, list[float]] = {"now": [], "before": []}

    def step(kind: str) -> None:
        if kind == "now":
            loss, stats = self_critical_step(model, vocab, features, references, reward, samples, "leave_one_out",
                                             max_len)  # fmt: skip
        else:  # a seeded Sampling steps every row to the end, as every sampling search did before
            loss, stats = shared_step(
                model,
                sample=lambda: model.generate(repeated, bos, eos, max_len, sampling=Sampling(seed=len(words[kind]))),
                greedy=lambda: None,
                reward=lambda ids, copies: reward([vocab.decode(i) for i in ids],
                                                  [r for r in references for _ in range(copies)]),
                score=lambda inputs, rows: model.decoder(repeated, inputs).logits,
                samples=samples, baseline="leave_one_out", bos_id=bos, pad_id=pad, max_groups=1,
            )  # fmt: skip
        loss.backward()
        model.zero_grad(set_to_none=True)
        words[kind].append(float(stats["tokens"]))

    model.train()
    t = interleaved({"now": lambda: step("now"), "before": lambda: step("before")}, repeats)
    mean = {k: statistics.mean(v) for k, v in words.items()}
    return [
        {"what": f"SCST step, bundled Flickr8k decoder, {n} photos x {samples} samples",
         "value": f"{t['now']:.2f} s ({mean['now']:.1f} tokens a sample)"},
        {"what": "the same step with keys per sample, every sample to word 20, one scoring batch",
         "value": f"{t['before']:.2f} s ({mean['before']:.1f} tokens a sample): "
                  f"{t['before'] / t['now']:.2f}x the time"},
    ]  # fmt: skip


def phone_folder_rows(repeats: int, n: int = 25) -> list[dict]:
    """``caption`` of a folder of n 12-megapixel phone photos (4032 x 3024 JPEGs: the 5 bundled CC0 photos, scaled up),
    beam 3: large JPEGs decoded at a reduced scale (captioning.photos.preprocess.load_photo, the default) against
    decoded in full (before); images/s both ways and how many captions are the same word for word."""
    import io
    import tempfile
    from unittest import mock

    from PIL import Image

    from captioning.commands.caption import BUNDLED_MODEL, DEMO_PHOTOS, caption_main
    from captioning.photos.preprocess import Preprocess

    if not BUNDLED_MODEL.is_file():
        return [{"what": "caption FOLDER of phone photos", "value": f"skipped: {BUNDLED_MODEL.name} is missing"}]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "phone"
        folder.mkdir()
        for i in range(n):
            photo = Image.open(DEMO_PHOTOS[i % len(DEMO_PHOTOS)]).convert("RGB")
            photo.resize((4032, 3024), Image.Resampling.BICUBIC).save(folder / f"IMG_{i:04d}.jpg", quality=90)
        captions: dict[str, list[str]] = {}

        def run(full: bool) -> None:
            out = Path(tmp) / f"full{full}.jsonl"
            out.unlink(missing_ok=True)
            everything = mock.patch.object(Preprocess, "decode_side", property(lambda self: None))
            with contextlib.redirect_stderr(io.StringIO()), everything if full else contextlib.nullcontext():
                code = caption_main([str(folder), "--beam-size", "3", "--jsonl", str(out)])
            if code != 0:
                raise RuntimeError(f"caption {folder} failed (exit code {code})")
            captions[str(full)] = [json.loads(line)["caption"] for line in out.read_text().splitlines()]

        t = interleaved({"reduced": lambda: run(False), "full": lambda: run(True)}, repeats)
    k = len(DEMO_PHOTOS)  # the files are copies of these k photos, in turn: compare each photo once
    same = sum(a == b for a, b in zip(captions["False"][:k], captions["True"][:k], strict=True))
    return [
        {"what": f"caption FOLDER of {n} phone photos (12 megapixels, JPEG), beam 3", "value":
         f"{n / t['reduced']:.1f} images/s"},
        {"what": "the same, every photo decoded in full (no reduced-scale JPEG decoding)", "value":
         f"{n / t['full']:.1f} images/s ({t['full'] / t['reduced']:.2f}x the time), the same caption for {same} of "
         f"the {k} photos"},
    ]  # fmt: skip


def translate_rows(repeats: int) -> list[dict]:
    from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig

    torch.manual_seed(0)
    cfg = Seq2SeqConfig(src_vocab_size=200, tgt_vocab_size=200, attention="bahdanau", rnn="gru", embed_dim=64,
                        enc_hidden=64, dec_hidden=128, attn_dim=64)  # fmt: skip
    net = Seq2Seq(cfg).eval()
    src = torch.randint(4, 200, (64, 30))
    lens = torch.full((64,), 30)
    out_len = 30

    def run(beam: int):
        return net.generate(src, lens, 1, 10_000, max_len=out_len, beam_size=beam)  # eos never: 30 tokens each

    t = interleaved({f"beam {b}": (lambda b=b: torch.no_grad()(run)(b)) for b in (1, 3)}, repeats)
    return [{"what": f"translate, {k}, batch 64", "value": f"{64 * out_len / v:.0f} tokens/s"} for k, v in t.items()]


def translate_real_rows(repeats: int, root: Path | None, n: int = 256, batch: int = 64) -> list[dict]:
    """The bundled German -> English GRU (``bahdanau``) on Multi30k's first n val sentences (real lengths: the
    sentences of a batch end at different steps), batches of 64, beam 1 and 8 (its val-chosen width, length penalty
    1): sentences/s with ended sentences dropped from the batch (the default) and stepped to the end (before), the same
    output."""
    from text_attn.translation.corpora import corpus_file, read_parallel_text
    from text_attn.translation.pairs import TaskError
    from text_attn.translation.translator import Translator

    what = "translate Multi30k val (bundled de->en bahdanau model)"
    try:
        if root is None:
            raise TaskError("no --multi30k-root")
        pairs = read_parallel_text(corpus_file(root, "val", "de"), corpus_file(root, "val", "en"), max_pairs=n)
    except TaskError as err:
        return [{"what": what, "value": f"skipped: {err}"}]
    translator = Translator.load("bahdanau")
    sentences = [src for src, _ in pairs]

    def run(beam: int, drop: bool) -> list[str]:
        return [
            t.text
            for i in range(0, len(sentences), batch)
            for t in translator.translate(sentences[i : i + batch], beam, 1.0, drop_ended=drop)
        ]

    rows = []
    for beam in (1, 8):
        same = run(beam, True) == run(beam, False)
        t = interleaved({"drop": lambda b=beam: run(b, True), "all": lambda b=beam: run(b, False)}, repeats)
        rows.append({"what": f"{what}, {len(sentences)} sentences, beam {beam}, batch {batch}",
                     "value": f"{len(sentences) / t['drop']:.1f} sentences/s; stepping every sentence to the end "
                              f"{len(sentences) / t['all']:.1f} ({t['all'] / t['drop']:.2f}x the time), "
                              f"identical output: {same}"})  # fmt: skip
    return rows


def kernels_row(native) -> str:
    k = native.kernels()
    return f"compiled C ({Path(k.path).name}, in $TEXT_ATTN_CACHE)" if k is not None else native.status()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default: 2)")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats per variant; the median is reported")
    p.add_argument("--json", type=new_file, help="also write the rows here")
    p.add_argument(
        "--parts",
        nargs="+",
        default=["beam", "train", "caption", "folder", "phone", "scst", "translate", "translate-real"],
        help="which rows beside the matmul peak and memory: beam, train, caption, folder, phone, scst, translate, "
        "translate-real (all)",
    )
    p.add_argument("--multi30k-root", type=Path, help="Multi30k (val.de[.gz], val.en[.gz]) for the translate-real rows")
    args = p.parse_args(argv)
    for flag, value in (("--threads", args.threads), ("--repeats", args.repeats)):
        if value < 1:
            p.error(f"{flag} must be at least 1, got {value}")
    if args.multi30k_root is not None and "translate-real" in args.parts:
        # a folder the user named is refused up front; left out, the row still says it was skipped
        from _runs import check_corpus  # benchmarks/ is on sys.path when run as a script

        check_corpus(p, "--multi30k-root", args.multi30k_root, "val", "de", "en")
    torch.set_num_threads(args.threads)
    peak = matmul_peak(args.repeats)
    from text_attn.core import native

    rows = [
        {"what": "matmul peak (fp32)", "value": f"{peak:.1f} GFLOP/s", "gflops": peak},
        # the kernel file's name, not its folder (no machine's path in a printed table), or why PyTorch runs them
        {"what": "compiled kernels (score, cross-entropy)", "value": kernels_row(native)},
    ]
    parts = {"beam": beam_search_rows, "train": lambda r: train_step_rows(r, peak), "caption": caption_rows,
             "folder": caption_folder_rows, "phone": phone_folder_rows, "scst": scst_step_rows,
             "translate": translate_rows,
             "translate-real": lambda r: translate_real_rows(r, args.multi30k_root)}  # fmt: skip
    unknown = set(args.parts) - set(parts)
    if unknown:
        p.error(f"--parts: unknown {sorted(unknown)}; choose from {', '.join(parts)}")
    for name, part in parts.items():
        if name not in args.parts:
            continue
        rows += part(args.repeats)
        print(f"... {rows[-1]['what']}: {rows[-1]['value']}", flush=True)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    rows.append({"what": "peak memory (max RSS)", "value": f"{rss:.2f} GiB"})
    print(f"\n{args.threads} threads, median of {args.repeats} repeats\n")
    print("| measurement | result |\n|---|---|")
    for row in rows:
        print(f"| {row['what']} | {row['value']} |")
    if args.json:
        write_text(args.json, json.dumps({"threads": args.threads, "repeats": args.repeats, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
