"""What ``caption`` does per photo outside the model, batched (issue 65): the loader's workers stack a batch's
tensors once (photo_stream.pack), the attention is rounded for the whole batch (caption_batch.rounded_rows) and
written as JSON text by numpy (caption_batch.record_line); each gives what the per-photo code gave."""

from __future__ import annotations

import json

import numpy as np
import torch
from PIL import Image

from captioning.commands.caption_batch import attention_text, record_line, rounded_rows
from captioning.photos.photo_stream import PhotoBatch, PhotoStream, photo_batches
from captioning.photos.preprocess import Preprocess


def _alphas(seed: int, t: int, n: int = 81) -> torch.Tensor:
    a = torch.softmax(3 * torch.randn(t, n, generator=torch.Generator().manual_seed(seed)), dim=-1)
    a[0, :] = 0.0
    a[0, 5] = 1.0  # a word that looked at one region only: 1.0 and zeros
    a[-1, 0] = 4.9e-7  # rounds to 0; 5.1e-7 rounds to 1e-06
    a[-1, 1] = 5.1e-7
    return a


def test_the_batch_is_rounded_as_each_value_was():
    alphas = [_alphas(k, t) for k, t in enumerate((1, 7, 12))]
    rows = rounded_rows(alphas)
    for a, r in zip(alphas, rows, strict=True):
        assert r == [[round(float(v), 6) for v in row] for row in a]  # what the records held before, float for float
    assert rows[2][-1][:2] == [0.0, 1e-06] and rows[0][0][5] == 1.0
    assert rounded_rows([]) == []


def test_a_record_line_reads_back_as_json_dumps_of_the_record():
    (rows,) = rounded_rows([_alphas(3, 9)])
    rec = {"image": 'a "quoted"\\name.jpg', "caption": "a dog", "words": ["a", "dog"], "attention": rows,
           "score": -1.5, "error": None}  # fmt: skip
    line = record_line(rec)
    assert "\n" not in line and json.loads(line) == json.loads(json.dumps({**rec, "attention": list(rows)}))
    assert json.loads(attention_text(rows.ks)) == list(rows)  # each value's six decimals read back as the float
    assert attention_text(np.array([[10**6, 0, 12]])) == "[[1.000000, 0.000000, 0.000012]]"
    failed = {"image": "x.jpg", "attention": [], "error": "x.jpg: not an image"}
    assert record_line(failed) == json.dumps(failed)


def test_the_loaders_workers_stack_each_batch_once(tmp_path):
    for i in range(5):
        Image.new("RGB", (20 + i, 16), (40 * i, 90, 160)).save(tmp_path / f"{i}.png")
    (tmp_path / "bad.png").write_bytes(b"no png")
    pre = Preprocess(image_size=8)
    paths = sorted(str(p) for p in tmp_path.iterdir())
    for workers in (0, 1):
        batches = list(photo_batches(PhotoStream(paths, pre, 4), workers))
        assert [len(b) for b in batches] == [4, 2] and all(isinstance(b, PhotoBatch) for b in batches)
        for b in batches:
            good = [it for it in b if it["error"] is None]
            assert b.tensor.shape == (len(good), 3, 8, 8)
            for k, it in enumerate(good):  # each item's tensor is its row of the batch's, as read alone
                assert torch.equal(it["tensor"], b.tensor[k]) and it["tensor"].data_ptr() == b.tensor[k].data_ptr()
                assert torch.equal(it["tensor"], pre(Image.open(it["name"]).convert("RGB")))
        assert [it["error"] is not None for b in batches for it in b] == [False] * 5 + [True]
