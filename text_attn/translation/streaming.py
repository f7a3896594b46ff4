"""Sentence pairs as LitData chunks: ``text-train optimize`` writes them, ``text-train fit --data.root DIR`` reads
them (text_attn.core.streaming holds what both families share).

A sample is ``{"index": i, "pair": JSON}``: i is the pair's place in its split as the folder reader numbers it, and
the JSON holds the tokens (``src``, ``tgt``), their ids in the train split's vocabularies (``src_ids`` with eos,
``tgt_ids`` with bos and eos), the sentences as written (``src_text``, ``tgt_text``: sacreBLEU's references) and the
true ``alignment`` when the task has one. The vocabularies and the tokenizer (a SentencePiece model included) are
built from the train split, as ``fit`` builds them, and stored in ``data_state.pt``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from text_attn.core.attention_supervision import dense_targets
from text_attn.core.streaming import (
    ChunkError,
    finished_earlier,
    optimize_splits,
    read_all,
    read_manifest,
    read_state,
    shuffled_for_writing,
)
from text_attn.core.vocab import Vocabulary
from text_attn.translation.pairs import Example
from text_attn.translation.tokens import TextCodec, read_by_sides

FAMILY = "text"
# options that shape the samples or the vocabularies: a fit must use those the chunks were made with
SHAPING = ("lower", "tokenizer", "subword_vocab", "subword_type", "min_freq", "max_vocab", "shared_vocab")


def sample(index: int, ex: Example, src_ids: list[int], tgt_ids: list[int]) -> tuple[int, str]:
    """One pair as optimize's input: (index, JSON text)."""
    record = {"src": ex.src, "tgt": ex.tgt, "src_ids": src_ids, "tgt_ids": tgt_ids}
    if ex.src_text is not None:
        record.update(src_text=ex.src_text, tgt_text=ex.tgt_text)
    if ex.alignment is not None:
        record["alignment"] = ex.alignment
    return index, json.dumps(record, ensure_ascii=False)


def make_item(entry: tuple[int, str]) -> dict[str, Any]:
    """optimize's function (runs in LitData's workers): the sample as LitData stores it."""
    return {"index": entry[0], "pair": entry[1]}


def optimize_text(dm, out: str | Path, num_workers: int = 1, chunk_bytes: str = "64MB") -> dict[str, Any]:
    """Read the corpus the data module ``dm`` describes (its folder reader, vocabularies from train) and write it as
    chunks to ``out``. Returns the manifest."""
    options = dict(dm.hparams)
    if dm._start is not None:  # read the way of the model fit starts from: its token ids, not the corpus's own
        options.update(init_from=dm._start.name, init_vocab="extend" if dm._start.extend else "keep")
    if (done := finished_earlier(out, FAMILY, options)) is not None:
        return done
    dm.setup("fit")
    inputs = {}
    for split, ds in dm.splits.items():
        inputs[split] = [sample(i, ex, ds.src[i].tolist(), ds.tgt[i].tolist()) for i, ex in enumerate(ds.examples)]
    inputs["train"] = shuffled_for_writing(inputs["train"], dm.hparams.seed)
    state = {
        "src_vocab": dm.src_vocab.to_dict(),
        "tgt_vocab": dm.tgt_vocab.to_dict(),
        "shared_vocab": dm.src_vocab is dm.tgt_vocab,
        "codec": dm.codec.metadata(),
        "source_check": dm.source_check,
    }
    return optimize_splits(out, FAMILY, options, state, inputs, lambda split: make_item, num_workers, chunk_bytes)


def _example(record: dict[str, Any]) -> Example:
    return Example(
        record["src"], record["tgt"], record.get("alignment"), record.get("src_text"), record.get("tgt_text")
    )


class ChunkPairs:
    """An evaluation split read from chunks, shaped like data.PairDataset (examples, src and tgt id tensors), so the
    evaluation loaders and the module's scoring run unchanged."""

    def __init__(self, root: str | Path, split: str):
        records = []
        for item in read_all(root, split):
            try:
                records.append((int(item["index"]), json.loads(item["pair"])))
            except (KeyError, TypeError, ValueError):
                raise ChunkError(f"{Path(root) / split}: a sample cannot be read: a damaged chunk") from None
        records.sort(key=lambda r: r[0])
        self.examples = [_example(r) for _, r in records]
        self.src = [torch.tensor(r["src_ids"]) for _, r in records]
        self.tgt = [torch.tensor(r["tgt_ids"]) for _, r in records]

    def read_by_sides(self, codec: TextCodec, source: Vocabulary, target: Vocabulary) -> ChunkPairs:
        """Its pairs read again from their text as translate reads a source (tokens.read_by_sides): a folder written
        before 2026-12-02 holds the joint subword model's pieces, <unk> where only the other side knew one."""
        self.examples = read_by_sides(self.examples, codec, source, target)
        self.src = [torch.tensor(source.encode(e.src, eos=True)) for e in self.examples]
        self.tgt = [torch.tensor(target.encode(e.tgt, bos=True, eos=True)) for e in self.examples]
        return self

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> int:
        return i


def load_chunks(dm) -> None:
    """Fill the data module ``dm`` from the chunk folder ``dm.hparams.root``: vocabularies, tokenizer and source check
    from ``data_state.pt``, val and test in memory; the train split streams (``stream_collate``)."""
    root = dm.hparams.root
    manifest = read_manifest(root, FAMILY)
    made = manifest["options"]
    for name in SHAPING:
        if name in made and made[name] != dm.hparams[name]:
            raise ChunkError(
                f"data.{name}={dm.hparams[name]!r}, but {root} was made with {made[name]!r}: give the same data "
                "options to optimize and fit, or optimize again"
            )
    if dm.hparams.attention_targets and not made.get("attention_targets") and made.get("task") != "reorder":
        raise ChunkError(f"data.attention_targets: {root} holds no alignments (made from task {made.get('task')!r})")
    state = read_state(root)
    dm.src_vocab = Vocabulary.from_dict(state["src_vocab"])
    dm.tgt_vocab = dm.src_vocab if state["shared_vocab"] else Vocabulary.from_dict(state["tgt_vocab"])
    dm.codec = TextCodec.from_metadata(state["codec"], (dm.src_vocab, dm.tgt_vocab))
    dm.source_check = state.get("source_check")
    dm.chunks_made = (made, manifest["splits"]["train"]["items"])  # what they were made of, and the train pairs
    dm.splits = {
        split: ChunkPairs(root, split).read_by_sides(dm.codec, dm.src_vocab, dm.tgt_vocab) for split in ("val", "test")
    }


def stream_collate(items: list[dict[str, Any]], pad_id: int = 0, attention_targets: bool = False) -> dict:
    """Streamed samples -> the batch data.collate makes: src (B, S), src_lens (B,), tgt (B, T+2), index (B,)."""
    records = [json.loads(it["pair"]) for it in items]
    src = [torch.tensor(r["src_ids"]) for r in records]
    tgt = [torch.tensor(r["tgt_ids"]) for r in records]
    batch = {
        "src": torch.nn.utils.rnn.pad_sequence(src, batch_first=True, padding_value=pad_id),  # (B, S)
        "src_lens": torch.tensor([len(s) for s in src]),  # (B,)
        "tgt": torch.nn.utils.rnn.pad_sequence(tgt, batch_first=True, padding_value=pad_id),  # (B, T+2)
        "index": torch.tensor([int(it["index"]) for it in items]),  # (B,)
    }
    if attention_targets:
        targets = [[(j, [a]) for j, a in enumerate(r["alignment"])] for r in records]
        steps, positions = batch["tgt"].size(1) - 1, batch["src"].size(1)
        batch["attn_targets"], batch["attn_targets_mask"] = dense_targets(targets, steps, positions)  # (B, T+1, S)
    return batch
