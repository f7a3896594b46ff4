"""TranslationDataModule: sentence pairs -> padded id batches of similar lengths.

Synthetic tasks draw train / val / test from three different seeds; a user's corpus (``tsv`` or ``parallel``) is
shuffled once with the seed and split by ``val_size`` / ``test_size``. Vocabularies come from the train split only.

With ``attention_targets: true`` (``reorder`` only: its examples keep the true alignment) every batch also carries
``attn_targets`` (B, T+1, S) and ``attn_targets_mask`` (B, T+1), aligned with the decoder's output steps
(``tgt[:, 1:]``) and the padded ``src``: output step j (predicting target word j) is one-hot on the source position
that word translates; the final eos step and padding have no target (mask False, zeros). For
text_attn.core.attention_supervision.
"""

from __future__ import annotations

import random
from functools import partial

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset, SequentialSampler

from text_attn.core.attention_supervision import dense_targets
from text_attn.core.batching import EpochShuffle, LengthBatchSampler, ResumableBatches
from text_attn.core.vocab import Vocabulary
from text_attn.translation.tasks import Example, load_examples
from text_attn.translation.tokens import CHAR_TASKS


class PairDataset(Dataset):
    def __init__(self, examples: list[Example], src_vocab: Vocabulary, tgt_vocab: Vocabulary):
        self.examples = examples
        self.src = [torch.tensor(src_vocab.encode(e.src, eos=True)) for e in examples]
        self.tgt = [torch.tensor(tgt_vocab.encode(e.tgt, bos=True, eos=True)) for e in examples]

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> int:
        return i  # the collate function gathers by index, so it can also return the examples


def collate(dataset: PairDataset, indices: list[int], pad_id: int = 0, attention_targets: bool = False) -> dict:
    src = [dataset.src[i] for i in indices]
    tgt = [dataset.tgt[i] for i in indices]
    batch = {
        "src": torch.nn.utils.rnn.pad_sequence(src, batch_first=True, padding_value=pad_id),  # (B, S)
        "src_lens": torch.tensor([len(s) for s in src]),  # (B,)
        "tgt": torch.nn.utils.rnn.pad_sequence(tgt, batch_first=True, padding_value=pad_id),  # (B, T+2) bos..eos
        "index": torch.tensor(indices),
    }
    if attention_targets:
        items = []
        for i in indices:
            alignment = dataset.examples[i].alignment
            if alignment is None:
                raise ValueError(f"example {i} has no alignment: attention targets need a task that keeps one")
            items.append([(j, [a]) for j, a in enumerate(alignment)])
        steps, positions = batch["tgt"].size(1) - 1, batch["src"].size(1)
        batch["attn_targets"], batch["attn_targets_mask"] = dense_targets(items, steps, positions)  # (B, T+1, S)
    return batch


class TranslationDataModule(ResumableBatches, pl.LightningDataModule):
    def __init__(
        self,
        task: str = "reorder",
        train_size: int = 20000,
        val_size: int = 500,
        test_size: int = 1000,
        seed: int = 0,
        batch_size: int = 64,
        min_len: int = 5,
        max_len: int = 60,
        path: str | None = None,
        src_path: str | None = None,
        tgt_path: str | None = None,
        lower: bool = True,
        min_freq: int = 1,
        max_vocab: int | None = None,
        shared_vocab: bool = False,
        attention_targets: bool = False,
    ):
        """
        Args:
            task: ``reorder`` | ``dates`` (synthetic) or ``tsv`` (needs ``path``) | ``parallel`` (``src_path``,
                ``tgt_path``) for a corpus you bring.
            train_size: synthetic training pairs (for a corpus: the cap on pairs read, 0 = all).
            val_size: validation pairs. test_size: test pairs.
            seed: data seed (train/val/test use seed, seed+1, seed+2 for synthetic tasks).
            batch_size: sentence pairs per batch.
            min_len: shortest synthetic source (reorder). max_len: longest synthetic source (reorder).
            path: the TSV file for ``tsv``. src_path: source file for ``parallel``. tgt_path: its target file.
            lower: lowercase corpus text.
            min_freq: words seen fewer times in train become <unk>. max_vocab: vocabulary size cap (specials count).
            shared_vocab: one vocabulary for both sides (for tied embeddings).
            attention_targets: batches also carry the true alignment as ``attn_targets`` (B, T+1, S) and
                ``attn_targets_mask`` (B, T+1) (module doc); ``reorder`` only.
        """
        if attention_targets and task != "reorder":
            raise ValueError(f"attention_targets needs a true alignment, which only task 'reorder' has (got {task!r})")
        super().__init__()
        self.save_hyperparameters()
        self.tokenizer = "char" if task in CHAR_TASKS else "word"
        self.src_vocab: Vocabulary | None = None
        self.tgt_vocab: Vocabulary | None = None
        self.splits: dict[str, PairDataset] = {}

    def _load_splits(self) -> dict[str, list[Example]]:
        hp = self.hparams
        if hp.task in ("reorder", "dates"):
            kw = {"min_len": hp.min_len, "max_len": hp.max_len} if hp.task == "reorder" else {}
            return {
                "train": load_examples(hp.task, hp.train_size, hp.seed, **kw),
                "val": load_examples(hp.task, hp.val_size, hp.seed + 1, **kw),
                "test": load_examples(hp.task, hp.test_size, hp.seed + 2, **kw),
            }
        kw = {"path": hp.path, "src_path": hp.src_path, "tgt_path": hp.tgt_path, "lower": hp.lower}
        examples = load_examples(hp.task, hp.train_size, hp.seed, **{k: v for k, v in kw.items() if v is not None})
        random.Random(hp.seed).shuffle(examples)
        n_val, n_test = hp.val_size, hp.test_size
        if len(examples) <= n_val + n_test:
            raise ValueError(f"{len(examples)} pairs are too few for val_size={n_val} and test_size={n_test}")
        return {"val": examples[:n_val], "test": examples[n_val : n_val + n_test], "train": examples[n_val + n_test :]}

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        data = self._load_splits()
        hp = self.hparams
        train = data["train"]
        if hp.shared_vocab:
            self.src_vocab = self.tgt_vocab = Vocabulary.build(
                [e.src for e in train] + [e.tgt for e in train], hp.min_freq, hp.max_vocab
            )
        else:
            self.src_vocab = Vocabulary.build([e.src for e in train], hp.min_freq, hp.max_vocab)
            self.tgt_vocab = Vocabulary.build([e.tgt for e in train], hp.min_freq, hp.max_vocab)
        self.splits = {k: PairDataset(v, self.src_vocab, self.tgt_vocab) for k, v in data.items()}

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        ds = self.splits[split]
        seed = self.hparams.seed
        order = EpochShuffle(ds, seed) if shuffle else SequentialSampler(ds)
        skip = self.take_resume_skip() if shuffle else None
        sampler = LengthBatchSampler(order, [len(s) for s in ds.src], self.hparams.batch_size, seed=seed, skip=skip)
        collate_fn = partial(collate, ds, attention_targets=self.hparams.attention_targets)
        return DataLoader(ds, batch_sampler=sampler, collate_fn=collate_fn)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)

    def predict_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)
