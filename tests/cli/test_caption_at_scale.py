"""caption at collection scale (slow): a folder of 10,000 small images runs in bounded memory, streaming JSON Lines,
and --resume after it finishes captions nothing again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

from captioning.model.captioner import Captioner
from captioning.model.decoder import DecoderConfig
from captioning.model.encoder import EncoderConfig
from text_attn.core.vocab import Vocabulary

pytestmark = pytest.mark.slow

# The child reports its own peak resident memory after captioning (Linux: ru_maxrss in KiB).
CHILD = (
    "import resource, sys\n"
    "from captioning.commands.caption import caption_main\n"
    "code = caption_main(sys.argv[1:])\n"
    "print('maxrss', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def _folder(root: Path, n: int) -> Path:
    root.mkdir()
    for i in range(n):
        sub = root / f"{i // 1000:02d}"
        sub.mkdir(exist_ok=True)
        Image.new("RGB", (24, 24), ((i * 37) % 256, (i * 91) % 256, (i * 13) % 256)).save(sub / f"{i:05d}.png")
    return root


def _caption(folder: Path, model: Path, jsonl: Path, *extra: str) -> tuple[int, str]:
    args = [str(folder), "--model", str(model), "--jsonl", str(jsonl), "--max-len", "3", "--batch-size", "64"]
    out = subprocess.run([sys.executable, "-c", CHILD, *args, *extra], capture_output=True, text=True, timeout=1500)
    assert out.returncode == 0, out.stderr[-2000:]
    rss = next(int(line.split()[1]) for line in out.stderr.splitlines() if line.startswith("maxrss"))
    return rss, out.stderr


def test_ten_thousand_images_in_bounded_memory_then_resume(tmp_path):
    torch.manual_seed(0)
    vocab = Vocabulary.build([["a", "red", "square"]])
    enc = EncoderConfig(backbone="resnet18", weights=None, stride=16, grid=2, image_size=32)
    model = tmp_path / "tiny.pt"
    Captioner.build(vocab, enc, DecoderConfig(embed_dim=8, hidden_dim=16, attn_dim=8)).save(model)
    small, big = _folder(tmp_path / "small", 1000), _folder(tmp_path / "big", 10_000)
    rss_small, _ = _caption(small, model, tmp_path / "small.jsonl")
    rss_big, _ = _caption(big, model, tmp_path / "big.jsonl")
    records = [json.loads(line) for line in (tmp_path / "big.jsonl").read_text().splitlines()]
    assert len(records) == 10_000 and all(r["error"] is None for r in records)
    assert records[0]["image"].endswith("00000.png") and records[-1]["image"].endswith("09999.png")
    # 10x the images, about the same memory: nothing grows with the collection but the list of paths
    assert rss_big < rss_small + 150 * 1024, (rss_small, rss_big)
    _, err = _caption(big, model, tmp_path / "big.jsonl", "--resume")
    assert "10000 image(s) already in" in err
    assert len((tmp_path / "big.jsonl").read_text().splitlines()) == 10_000
