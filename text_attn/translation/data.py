"""TranslationDataModule: sentence pairs -> padded id batches of similar lengths.

Synthetic tasks draw train / val / test from three different seeds; a user's corpus (``tsv`` or ``parallel``) is
shuffled once with the seed and split by ``val_size`` / ``test_size``, each pair once (a pair on several lines, as
Tatoeba and Anki exports repeat them, is kept at its first, with one note: none is in train and in val or test); a
corpus in the ``<split>.<lang>[.gz]`` layout (task ``pair``: Multi30k, WMT-style folders) keeps its own train / val /
test files. Vocabularies come from the train split only.

Real text can be split into subword units (``tokenizer: subword``): one SentencePiece model is learned from both
sides of the train split (translation.subwords), every word is spelled from its pieces (no <unk>), and the model keeps
case and punctuation, so what ``translate`` prints reads as text. Examples of real corpora keep their sentences as
written (``src_text`` / ``tgt_text``): the references of sacreBLEU and chrF.

With ``attention_targets: true`` every batch also carries ``attn_targets`` (B, T+1, S) and ``attn_targets_mask``
(B, T+1), aligned with the decoder's output steps (``tgt[:, 1:]``) and the padded ``src``: output step j (predicting
target token j) is one-hot on the source position that token translates (``reorder``: its examples keep the true
alignment), or uniform over the tokens of the source words its word is linked to (task ``pair`` with
``alignments``: a file of word links for the train split, a line per pair in the Pharaoh format word aligners
write, e.g. benchmarks/word_align.py's or fast_align's; guided alignment, Garg et al. 2019). The final eos step,
padding, words without a link and the val and test pairs have no target (mask False, zeros). For
text_attn.core.attention_supervision.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset, SequentialSampler

from text_attn.core.attention_supervision import dense_targets
from text_attn.core.batching import LengthBatchSampler, ResumableBatches, overfits, train_order
from text_attn.core.casing import composed
from text_attn.core.common_words import SAMPLE, languages_read, unspaced
from text_attn.core.data_note import note_facts
from text_attn.core.ranks import say
from text_attn.core.safe_files import inert
from text_attn.core.streaming import is_chunk_folder, streaming_loader, world_size_of
from text_attn.core.vocab import SPECIALS, Vocabulary, is_word
from text_attn.translation.corpora import corpus_file, read_parallel_text, read_tsv_text
from text_attn.translation.pairs import Example, TaskError
from text_attn.translation.source_check import LANGUAGES, source_check, token_lengths, unlike_language
from text_attn.translation.subwords import MODEL_TYPES, SubwordError, Subwords, learned_from
from text_attn.translation.tasks import load_examples
from text_attn.translation.tokens import CHAR_TASKS, TextCodec, read_by_sides
from text_attn.translation.unread import unread_path

CORPUS_TASKS = ("tsv", "parallel", "pair")  # sentences a user brings (the others are made up here)


@dataclass
class StartVocabulary:
    """How the model a run starts from (``model.init_from``) reads text: its tokenizer and vocabularies, and whether
    the train split's new tokens are added to them (``model.init_vocab: extend``) or read as <unk> (``keep``)."""

    name: str  # model.init_from as given
    codec: TextCodec
    src: Vocabulary
    tgt: Vocabulary
    extend: bool
    shared: bool = False  # the start's network ties its embeddings: one vocabulary for both sides, whatever the data's
    check: dict | None = None  # its source check (source_check.py): is the corpus's source side the language it reads?

    def vocabularies(self, src: Vocabulary, tgt: Vocabulary) -> tuple[Vocabulary, Vocabulary]:
        """The run's (source, target) vocabularies from the data's own ``src`` and ``tgt`` (one object when shared)."""
        if src is tgt or self.shared:  # one vocabulary for both sides, as the start must have
            if self.src != self.tgt:
                raise ValueError(
                    f"model.init_from {self.name} has a source and a target vocabulary; data.shared_vocab asks for one"
                )
            one = self.src.extended(src).extended(tgt) if self.extend else self.src
            return one, one
        return (self.src.extended(src), self.tgt.extended(tgt)) if self.extend else (self.src, self.tgt)

    def fits(self, dm) -> bool:
        """Whether the data module's tokenizer and vocabularies (a chunk folder's) are the start's."""
        theirs, mine = dm.codec.metadata(), self.codec.metadata()  # a subword model's bytes as a tensor: built once
        theirs.pop("target_lang", None), mine.pop("target_lang", None)  # how output is joined: no token id moves
        same_codec = theirs.keys() == mine.keys() and all(
            torch.equal(a, mine[k]) if isinstance(a, torch.Tensor) else a == mine[k] for k, a in theirs.items()
        )
        return same_codec and dm.src_vocab == self.src and dm.tgt_vocab == self.tgt


class PairDataset(Dataset):
    def __init__(self, examples: list[Example], src_vocab: Vocabulary, tgt_vocab: Vocabulary):
        self.examples = examples
        self.src = [torch.tensor(src_vocab.encode(e.src, eos=True)) for e in examples]
        self.tgt = [torch.tensor(tgt_vocab.encode(e.tgt, bos=True, eos=True)) for e in examples]

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> int:
        # the collate function gathers by index, so it can also return the examples; past the end an IndexError,
        # so that iter(dataset) stops there (it ran forever)
        return range(len(self.examples))[i]


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
            ex = dataset.examples[i]
            if ex.alignment is not None:
                items.append([(j, [a]) for j, a in enumerate(ex.alignment)])
            elif ex.src_text is not None:  # a corpus's pair (data.alignments): val and test pairs have no links
                items.append(ex.links or [])
            else:
                raise ValueError(f"example {i} has no alignment: attention targets need a task that keeps one")
        steps, positions = batch["tgt"].size(1) - 1, batch["src"].size(1)
        batch["attn_targets"], batch["attn_targets_mask"] = dense_targets(items, steps, positions)  # (B, T+1, S)
    return batch


MULTI30K_TERMS = (  # what a model trained on Multi30k says of it (its file's info; benchmarks/multi30k.py's too)
    "Multi30k (Elliott et al. 2016) is for non-commercial research and educational use only; this model was trained "
    "on it: the same terms apply to it."
)
MULTI30K_TRAIN_PAIRS = 29_000  # task 1's train split (../shared/data/README.md): fewer trained on are said (facts)


class TranslationDataModule(ResumableBatches, pl.LightningDataModule):
    """The sentence pairs ``text-train`` trains on (a synthetic task, Multi30k, or your TSV, CSV or two parallel
    files: ``task``), read, split, tokenized (words or subwords) and batched by length; docs/text.md lists each
    option."""

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
        max_tokens: int = 400,
        path: str | None = None,
        src_col: int = 0,
        tgt_col: int = 1,
        src_path: str | None = None,
        tgt_path: str | None = None,
        root: str | None = None,
        src_lang: str | None = None,
        tgt_lang: str | None = None,
        split_names: dict[str, str] | None = None,
        lower: bool = True,
        tokenizer: str = "word",
        subword_vocab: int = 8000,
        subword_type: str = "bpe",
        min_freq: int = 1,
        max_vocab: int | None = None,
        shared_vocab: bool = False,
        attention_targets: bool = False,
        alignments: str | None = None,
    ):
        """
        Args:
            task: ``reorder`` | ``dates`` (synthetic) or, for a corpus you bring, ``tsv`` (needs ``path``) |
                ``parallel`` (``src_path``, ``tgt_path``) | ``pair`` (``root``, ``src_lang``, ``tgt_lang``: files
                ``<split>.<lang>`` or ``<split>.<lang>.gz``, the corpus's own splits). A corpus option another task
                reads is refused (it would go unread).
            train_size: synthetic training pairs (for a corpus: the cap on pairs read, 0 = all).
            val_size: validation pairs. test_size: test pairs. (``pair``: caps on the corpus's splits, 0 = all.)
            seed: data seed (train/val/test use seed, seed+1, seed+2 for synthetic tasks).
            batch_size: sentence pairs per batch.
            min_len: shortest synthetic source (reorder). max_len: longest synthetic source (reorder).
            max_tokens: a corpus's training pairs with a side longer than this many tokens are left out, with one note
                (a pasted paragraph or a line without its line break: one such pair in a batch ran out of memory).
            path: the TSV file for ``tsv`` (a ``.csv`` file: read as CSV); src_col / tgt_col: its columns of the
                source and the target, from 0 (0 and 1; manythings.org's Anki files are English first: English ->
                German reads 0 -> 1, German -> English 1 -> 0). src_path: source file for ``parallel``. tgt_path: its
                target file.
            root: the corpus folder for ``pair``; or, for any task, a folder ``text-train optimize`` wrote: its
                chunks are streamed (translation.streaming; the vocabularies are the ones it stored).
            src_lang: source language code (``de``): task pair's file suffix; for any corpus the language its input
                check names, recorded with tgt_lang (``en``) as the model's pair (``facts``; none given: none guessed).
                A word model writing French (tgt_lang ``fr``) puts a space before ; : ! ? (TextCodec.target_lang).
            split_names: ``pair``: file prefixes of the splits, {train: train, val: val, test: test_2016_flickr} by
                default (Multi30k's), e.g. {test: test_2017_flickr}; names not given keep their default.
            lower: lowercase corpus text (``word`` tokens only: subwords keep case).
            tokenizer: a corpus's tokens: ``word`` (words and punctuation, offline regex) or ``subword``
                (SentencePiece learned from the train split: no <unk>, cased text out; module doc).
            subword_vocab: number of subword units (shared by both languages). subword_type: ``bpe`` or ``unigram``.
            min_freq: words seen fewer times in train become <unk>. max_vocab: vocabulary size cap (specials count).
            shared_vocab: one vocabulary for both sides (for tied embeddings).
            attention_targets: batches also carry the true alignment as ``attn_targets`` (B, T+1, S) and
                ``attn_targets_mask`` (B, T+1) (module doc): ``reorder``'s, or ``pair``'s with ``alignments``.
            alignments: ``pair``: a file of word links of the train split (a line per pair, ``i-j`` source word i,
                target word j, words split at spaces, from 0): the targets of ``attention_targets``.
        """
        paths = {"path": path, "src_path": src_path, "tgt_path": tgt_path, "split_names": split_names}
        if refusal := unread_path(task, paths):  # your corpus beside the default task: a model of the made-up pairs
            raise ValueError(refusal)
        if alignments and task != "pair":
            raise ValueError(f"data.alignments links the train pairs of task pair (a corpus folder), not {task!r}")
        if alignments and not attention_targets:
            raise ValueError("data.alignments are attention targets: set data.attention_targets: true beside them")
        if attention_targets and task != "reorder" and not alignments:
            raise ValueError(
                f"attention_targets needs a true alignment, which only task 'reorder' has (got {task!r}); for a "
                "corpus (task pair) give its word links as data.alignments (a line of Pharaoh i-j links per train "
                "pair: fast_align's output, or the repository's benchmarks/word_align.py)"
            )
        if tokenizer not in ("word", "subword"):
            raise ValueError(f"data.tokenizer {tokenizer!r}: choose word or subword")
        if tokenizer == "subword" and task not in CORPUS_TASKS:
            raise ValueError(f"data.tokenizer subword is for real text (task {', '.join(CORPUS_TASKS)}), not {task!r}")
        if subword_type not in MODEL_TYPES:
            raise ValueError(f"data.subword_type {subword_type!r}: choose {' or '.join(MODEL_TYPES)}")
        if tokenizer == "subword" and subword_vocab < 300:
            raise ValueError(f"data.subword_vocab must be at least 300 (256 byte pieces and more), got {subword_vocab}")
        if task == "pair" and not (root and src_lang and tgt_lang):
            raise ValueError("task pair needs data.root (the corpus folder), data.src_lang and data.tgt_lang")
        unknown = set(split_names or {}) - {"train", "val", "test"}
        if unknown:
            raise ValueError(f"data.split_names: unknown split {sorted(unknown)}; the splits are train, val, test")
        for name, value in (("train_size", train_size), ("val_size", val_size), ("test_size", test_size)):
            if value < 0:
                raise ValueError(f"data.{name} must be 0 or more, got {value}")
            if value == 0 and task not in CORPUS_TASKS:  # 0 is "every pair" of a corpus; a synthetic task makes them
                raise ValueError(f"data.{name} must be at least 1 for the synthetic task {task!r} (0 means all the "
                                 "pairs of a corpus)")  # fmt: skip
            if value == 0 and name == "val_size" and task in ("tsv", "parallel") and not root:
                # a Multi30k config's 0 ("the corpus's whole val split") beside your file: no pair was held out, and
                # the run ended at the sanity check with "no validation logs val_bleu" (a test_size of 0 holds out no
                # test pairs: fit runs, and `test` says there are none)
                raise ValueError(f"data.val_size 0: task {task} cuts its val pairs out of the corpus (it has no val "
                                 "split of its own; 0 means a corpus folder's whole split, task pair): give how many, "
                                 "e.g. --data.val_size 100")  # fmt: skip
        if batch_size < 1:
            raise ValueError(f"data.batch_size must be at least 1, got {batch_size}")
        if min_freq < 1:  # read as 1 before: every word kept, while the run recorded 0
            raise ValueError(f"data.min_freq must be at least 1, got {min_freq}")
        if max_vocab is not None and max_vocab <= len(SPECIALS):  # a vocabulary of <pad> <bos> <eos> <unk> alone
            raise ValueError(f"data.max_vocab must be more than {len(SPECIALS)} (it counts <pad> <bos> <eos> <unk>; "
                             f"omit it for no cap), got {max_vocab}")  # fmt: skip
        if root and task != "pair" and not is_chunk_folder(root):  # said before the Trainer is made, not after
            raise ValueError(f"data.root {root}: not a chunk folder (text-train optimize writes one); task {task} "
                             "reads no data.root")  # fmt: skip
        super().__init__()
        self.save_hyperparameters()
        self.tokenizer = "char" if task in CHAR_TASKS else tokenizer
        self.codec: TextCodec | None = None  # set in setup (a subword model is learned from the train split)
        self.src_vocab: Vocabulary | None = None
        self.tgt_vocab: Vocabulary | None = None
        self.splits: dict[str, PairDataset] = {}
        # a real corpus: whether an input looks like its source side (model files keep it; source_check.py)
        self.source_check: dict | None = None
        self._start: StartVocabulary | None = None  # model.init_from's tokenizer and vocabularies (start_from)
        self._split_marks = False  # the word tokenizer of before 2026-12-02 (split_at_marks)

    def start_from(self, start: StartVocabulary) -> None:
        """Read the corpus as the model a run starts from reads text (``model.init_from``; TranslationModule gives it
        here before setup): its tokenizer (a SentencePiece model included: none is learned) and its vocabularies,
        whose tokens keep their ids, extended with the train split's tokens they lack or not (``model.init_vocab``).
        A chunk folder's samples hold ids of its own vocabularies: refused in one line when they differ."""
        self._start = start
        if self.splits:  # set up before the start was known (no trainer asked for it): read again, the start's way
            self.splits, self.codec = {}, None
            self.setup()

    def split_at_marks(self) -> None:
        """Read the corpus with the word tokenizer of before 2026-12-02, which split combining marks off as tokens of
        their own (text_attn.core.vocab.tokenize): resuming a checkpoint trained then (TranslationModule), whose
        vocabularies hold those tokens. Read again if it was read already."""
        self._split_marks = True
        if self.splits:
            self.splits, self.codec = {}, None
            self.setup()

    def _ask_for_start(self) -> None:
        """Lightning sets the data module up before the module: a module that starts from a model (``give_start``)
        is asked for its tokenizer and vocabularies first, so the corpus is read once, the start's way, and no
        SentencePiece model of its own is learned and thrown away (or fails on a corpus too small for its size)."""
        trainer = getattr(self, "trainer", None)
        module = getattr(trainer, "lightning_module", None) if trainer is not None else None
        give = getattr(module, "give_start", None)
        if self._start is None and give is not None:
            give(self)

    def _load_splits(self) -> dict[str, list[Example]]:
        hp = self.hparams
        if hp.task in ("reorder", "dates"):
            kw = {"min_len": hp.min_len, "max_len": hp.max_len} if hp.task == "reorder" else {}
            return {
                "train": load_examples(hp.task, hp.train_size, hp.seed, **kw),
                "val": load_examples(hp.task, hp.val_size, hp.seed + 1, **kw),
                "test": load_examples(hp.task, hp.test_size, hp.seed + 2, **kw),
            }
        texts = self._load_texts()
        sample = texts["train"][:SAMPLE]  # a corpus's first pairs: enough to tell its languages
        sides = {"source": (hp.src_lang, [s for s, _ in sample]), "target": (hp.tgt_lang, [t for _, t in sample])}
        # each side's language as its text reads (data.src_lang en for German sources is recorded as German)
        notes, self.languages = languages_read(sides)
        for note in notes:
            say(f"text data: note: {note}")
        lang = self.languages["source"]  # the run's own check names it (translate --model-info, the pages' lang)
        if self._start is not None and self._start.check is not None:  # read whether data.src_lang is given or not
            started = _start_language(self._start, [s for s, _ in texts["train"]], hp.task)
            lang = lang or started
        self.source_check = source_check((s for s, _ in texts["train"]), [s for s, _ in texts["val"]], lang)
        if self._start is not None:
            self.codec = self._start.codec
        elif self.tokenizer == "subword":
            train_text = [t for pair in texts["train"] for t in pair]
            sample = learned_from(train_text, hp.seed)  # a large corpus: a sample, the same in every process
            try:
                learned = Subwords.train(sample, hp.subword_vocab, hp.subword_type, seed=hp.seed)
            except SubwordError as err:
                raise SubwordError(f"data.subword_vocab: {err}") from None
            self.codec = TextCodec("subword", False, learned)
            if len(sample) < len(train_text):
                say(f"text data: the subword model is learned from {len(sample):,} of the {len(train_text):,} "
                    f"training sentences (both sides' lines), drawn with data.seed {hp.seed}")  # fmt: skip
        else:
            self.codec = TextCodec("word", hp.lower, split_marks=self._split_marks)
        encode = self.codec.encode
        out = {k: [Example(encode(s), encode(t), src_text=s, tgt_text=t) for s, t in v] for k, v in texts.items()}
        if self.codec.mode == "word":
            _unspaced_note(out["train"])
        out = self._within_max_tokens(out)
        if self.source_check is not None and out["train"]:  # how long its sentences were: translate's long-input note
            self.source_check["lengths"] = token_lengths((e.src, e.tgt) for e in out["train"])
        if hp.alignments:
            from text_attn.translation.links import link_examples

            # data.train_size keeps part of the corpus's train pairs: the file's lines are all of them (the refusal
            # named no option)
            cut = (f" (data.train_size {hp.train_size} keeps the first {hp.train_size:,}: give the file's first "
                   f"{hp.train_size:,} lines, or leave data.train_size out)")  # fmt: skip
            link_examples(out["train"], hp.alignments, encode, cut if len(out["train"]) == hp.train_size else "")
        return out

    def _within_max_tokens(self, splits: dict[str, list[Example]]) -> dict[str, list[Example]]:
        """The training pairs whose sides are at most data.max_tokens tokens long; the others counted in one note
        (val and test stay whole: their scores stay comparable). With data.alignments (a line of links per training
        pair) a long training pair is an error instead: leaving it out would shift every later pair's links."""
        cap = self.hparams.max_tokens
        if cap < 1:
            raise ValueError(f"data.max_tokens must be at least 1, got {cap}")
        held = {name: sum(max(len(e.src), len(e.tgt)) > cap for e in splits.get(name, ())) for name in ("val", "test")}
        if any(held.values()):  # kept, and said: the checkpoint chosen on val rested on pasted paragraphs unsaid (a
            # pair of 600 words scored near 0 BLEU and pulled the split's score down to nothing)
            shown = " and ".join(f"{n} {name}" for name, n in held.items() if n)
            say(f"text data: {shown} pair(s) have more than data.max_tokens={cap} tokens on a side (a paragraph, or "
                "lines joined by a missing line break?): kept, as val and test stay whole, but their scores weigh on "
                "the split's (a translation of a paragraph is of its first sentences)")  # fmt: skip
        train = splits.get("train", [])
        long = [i for i, e in enumerate(train) if max(len(e.src), len(e.tgt)) > cap]
        if not long:
            return splits
        if self.hparams.alignments:  # the train split in the links file's order: the first is the file's
            e = train[long[0]]
            start, size = inert(repr((e.src_text or "")[:40])), max(len(e.src), len(e.tgt))
            raise ValueError(
                f"train pair {long[0] + 1} (its source starting {start}) has {size} tokens on a side, "
                f"more than data.max_tokens={cap}: raise it, or remove the pair and its links"
            )
        if len(long) == len(train) and getattr(self, "_stage", None) in (None, "fit"):  # torch's sampler said
            # "num_samples should be a positive integer value, but got num_samples=0" (test / validate train nothing)
            shortest = min(max(len(x.src), len(x.tgt)) for x in train)
            raise ValueError(f"no training pair left: all {len(train):,} have more than data.max_tokens={cap} tokens "
                             f"on a side (the shortest: {shortest:,}): raise data.max_tokens")  # fmt: skip
        # named: the longest (the first of the shuffled train split was "the first", not the file's first)
        e = max((train[i] for i in long), key=lambda x: max(len(x.src), len(x.tgt)))
        start, size = inert(repr((e.src_text or "")[:40])), max(len(e.src), len(e.tgt))
        say(f"text data: left out {len(long)} training pair(s) with more than data.max_tokens={cap} tokens on a "
            f"side (the longest: {size:,} tokens, its source starting {start}: a paragraph, or lines joined by a "
            "missing line break?)")  # fmt: skip
        gone = set(long)
        return {**splits, "train": [e for i, e in enumerate(train) if i not in gone]}

    @property
    def facts(self) -> dict[str, str]:
        """What model files trained on this data record of it (``translate --model-info`` prints them): for Multi30k
        (task pair with its split names: its test split test_2016_flickr), what it is, its language pair and its terms
        (the data's README: a model trained on it must say so); for another corpus its name and training pairs
        (``trained_on``: "pairs.tsv: 814 training pairs") and its language pair where data.src_lang or data.tgt_lang
        gives it (its terms are the user's to state); {} for a made-up task."""
        hp = self.hparams
        if hp.task not in CORPUS_TASKS:
            return {}  # a made-up task
        names = {"test": "test_2016_flickr", **(hp.split_names or {})}
        multi30k = hp.task == "pair" and names["test"] == "test_2016_flickr"
        own = {} if multi30k else {"trained_on": self._trained_on()}  # said even where its languages are not
        # as the text reads once it is read (:func:`read_as`), else as given
        codes = getattr(self, "languages", None) or {"source": hp.src_lang, "target": hp.tgt_lang}
        if not (codes["source"] or codes["target"]):
            return own  # its languages not given: none is guessed
        pair = " -> ".join(LANGUAGES.get(code, code) if code else "(not given)" for code in codes.values())
        if not multi30k:
            return {**own, "languages": pair}
        # part of it (data.train_size, a folder of fewer lines): the file said "Multi30k" alone, as if the whole
        train = getattr(self, "splits", {}).get("train")
        part = train is not None and len(train) < MULTI30K_TRAIN_PAIRS  # more: a distilled folder's (its data note)
        return {
            "training_data": f"Multi30k task 1 (Elliott et al. 2016), {pair}",  # the pair said here, not twice
            **({"trained_on": f"{len(train):,} of its {MULTI30K_TRAIN_PAIRS:,} training pairs"} if part else {}),
            "terms": MULTI30K_TERMS,
            **note_facts(hp.root),  # a folder whose train text is not the corpus's own says so
        }

    def _trained_on(self) -> str:
        """A corpus of the user's as its model file names it (``trained on:``): its file or folder's name alone, never
        the path it was given (no machine's path in a model file), and its training pairs once read; chunks
        (``text-train optimize``'s) by what they were made of."""
        made, count = getattr(self, "chunks_made", (None, None))
        hp = made if made is not None else dict(self.hparams)
        if hp.get("task") == "pair" or (made is None and self.streams):
            name = Path(hp["root"]).resolve().name
        elif hp.get("task") == "tsv":
            name = Path(hp["path"]).name
        elif hp.get("task") == "parallel":
            name = f"{Path(hp['src_path']).name} and {Path(hp['tgt_path']).name}"
        else:
            name = Path(self.hparams.root).resolve().name  # chunks of a made-up task: the folder
        if made is not None:
            name += f" (as the chunks {Path(self.hparams.root).resolve().name})"
        train = self.splits.get("train")
        count = len(train) if train is not None else count
        return name if count is None else f"{name}: {count:,} training pairs"

    def _load_texts(self) -> dict[str, list[tuple[str, str]]]:
        """A real corpus's sentences per split, as written: (source, target) pairs."""
        hp = self.hparams
        cap = hp.train_size if hp.train_size > 0 else None
        if hp.task == "pair":
            names = {"train": "train", "val": "val", "test": "test_2016_flickr", **(hp.split_names or {})}
            out = {}
            for split, name in names.items():
                try:
                    src, tgt = corpus_file(hp.root, name, hp.src_lang), corpus_file(hp.root, name, hp.tgt_lang)
                except TaskError as err:  # your own corpus's files are rarely named as Multi30k's
                    if not Path(hp.root).is_dir():
                        raise
                    raise TaskError(f"{err}: the {split} split's files; data.split_names names them (now "
                                    f"{names}), e.g. --data.split_names '{{test: test}}'") from None  # fmt: skip
                size = {"train": hp.train_size, "val": hp.val_size, "test": hp.test_size}[split]
                out[split] = read_parallel_text(src, tgt, size if size > 0 else None)
                if split == "train":  # data.src_lang en with data.tgt_lang en: one file read for both sides
                    _same_sides_note(out[split], str(src))
            return out
        if hp.task == "tsv":
            if not hp.path:
                raise ValueError("task tsv needs data.path (the tab-separated file)")
            if min(hp.src_col, hp.tgt_col) < 0 or hp.src_col == hp.tgt_col:
                raise ValueError(f"data.src_col {hp.src_col} and data.tgt_col {hp.tgt_col}: two different columns, "
                                 "counted from 0")  # fmt: skip
            pairs = [(s, t) for s, t, _ in read_tsv_text(hp.path, hp.src_col, hp.tgt_col, max_pairs=cap)]
        elif hp.task == "parallel":
            if not (hp.src_path and hp.tgt_path):
                raise ValueError("task parallel needs data.src_path and data.tgt_path")
            pairs = read_parallel_text(hp.src_path, hp.tgt_path, cap)
        else:
            raise ValueError(f"unknown task {hp.task!r}; known: reorder, dates, {', '.join(CORPUS_TASKS)}")
        where = hp.path if hp.task == "tsv" else hp.src_path
        # data.train_size caps the pairs read, val and test cut from them: with 50 of 400 lines, 30 pairs trained on
        capped = cap is not None and len(pairs) >= cap
        pairs = _without_repeats(pairs)
        _same_sides_note(pairs, where)
        random.Random(hp.seed).shuffle(pairs)
        n_val, n_test = hp.val_size, hp.test_size
        if capped and len(pairs) > n_val + n_test:
            self._capped = (f"text data: {inert(where)}: its first {cap:,} pairs read (data.train_size {cap:,} caps "
                            f"the pairs read; 0: all), data.val_size={n_val} and data.test_size={n_test} held out of "
                            f"them: {len(pairs) - n_val - n_test:,} pairs to train on")  # fmt: skip
        tenth = max(1, len(pairs) // 10)
        # smaller held-out sizes where a tenth of the pairs is smaller; else more pairs are the way (the sizes given
        # were suggested back: "give smaller ones (--data.val_size 1 --data.test_size 1)" to a run given 1 and 1)
        smaller = (f"give smaller ones (--data.val_size {min(tenth, n_val)} --data.test_size {min(tenth, n_test)})"
                   if tenth < max(n_val, n_test) else "give more pairs")  # fmt: skip
        if len(pairs) <= n_val + n_test:
            raise ValueError(f"{where}: {len(pairs)} pair(s) are too few for data.val_size={n_val} and "
                             f"data.test_size={n_test}: {smaller}")  # fmt: skip
        left = len(pairs) - n_val - n_test
        if left < n_val + n_test:  # a 201-pair file trained on one pair, unsaid: fit says it (setup)
            self._few_to_train = (f"text data: {inert(where)}: {left} of its {len(pairs)} pairs are left to train on "
                                  f"beside data.val_size={n_val} and data.test_size={n_test} held out; for more, "
                                  f"{smaller}")  # fmt: skip
        return {"val": pairs[:n_val], "test": pairs[n_val : n_val + n_test], "train": pairs[n_val + n_test :]}

    @property
    def streams(self) -> bool:
        """Whether data.root is a chunk folder (``text-train optimize``'s): the train split is streamed from it."""
        return is_chunk_folder(self.hparams.root)

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        self._stage = stage  # what trains: a fit (or a setup that does not say)
        self._ask_for_start()
        if self.streams:
            if self.hparams.alignments:
                raise ValueError(
                    f"data.alignments with the chunk folder {self.hparams.root}: its train pairs are stored as token "
                    "ids, without the words the links name; give the corpus folder the chunks were made from"
                )
            from text_attn.translation.streaming import load_chunks

            load_chunks(self)  # vocabularies, tokenizer, val and test; train streams
            if self._start is not None and not self._start.fits(self):
                raise ValueError(
                    f"model.init_from {self._start.name}: the chunk folder {self.hparams.root} holds token ids of "
                    "its own tokenizer and vocabularies, which differ from the model's; train it on the corpus the "
                    "chunks were made from (its data options, not data.root)"
                )
            self._write_target_language()
            return
        data = self._load_splits()  # a bad corpus is a TaskError (a ValueError): one line naming the file and line
        for said in ("_capped", "_few_to_train"):
            if stage == "fit" and getattr(self, said, None):
                say(getattr(self, said))
        if self.codec is None:  # synthetic tasks
            self.codec = self._start.codec if self._start is not None else TextCodec(self.tokenizer, self.hparams.lower)
        self._write_target_language()
        hp = self.hparams
        train = data["train"]
        if hp.shared_vocab:
            self.src_vocab = self.tgt_vocab = Vocabulary.build(
                [e.src for e in train] + [e.tgt for e in train], hp.min_freq, hp.max_vocab
            )
        else:
            self.src_vocab = Vocabulary.build([e.src for e in train], hp.min_freq, hp.max_vocab)
            self.tgt_vocab = Vocabulary.build([e.tgt for e in train], hp.min_freq, hp.max_vocab)
        if self._start is not None:  # the start's words at their ids; with extend, the data's new ones after them
            self.src_vocab, self.tgt_vocab = self._start.vocabularies(self.src_vocab, self.tgt_vocab)
        elif stage == "fit" and self.codec.mode == "subword" and (hp.max_vocab or hp.min_freq > 1):
            self._pieces_left_out(train)
        for split in ("val", "test"):  # scored as translate reads them: each side from its own vocabulary's tokens
            data[split] = read_by_sides(data[split], self.codec, self.src_vocab, self.tgt_vocab)
        self.splits = {k: PairDataset(v, self.src_vocab, self.tgt_vocab) for k, v in data.items()}

    def _pieces_left_out(self, train: list) -> None:
        """One note where data.max_vocab or data.min_freq left subword pieces out of the vocabularies: a subword
        model spells every word from its pieces, and those were read as <unk> unsaid (max_vocab 50: 23% of the
        training tokens; translate then named "Zwei, junge" unknown words)."""
        tokens = [(e.src, self.src_vocab) for e in train] + [(e.tgt, self.tgt_vocab) for e in train]
        total = sum(len(toks) for toks, _ in tokens)
        unknown = sum(t not in vocab for toks, vocab in tokens for t in toks)
        if unknown:
            hp = self.hparams
            given = " and ".join(f"data.{k} {v}" for k, v in (("max_vocab", hp.max_vocab), ("min_freq", hp.min_freq))
                                 if v and (k == "max_vocab" or v > 1))  # fmt: skip
            say(f"text data: note: {given} left subword pieces out of the vocabulary: {unknown:,} of the "
                f"{total:,} training tokens ({100 * unknown / total:.1f}%) are read as <unk>; a subword model spells "
                "every word from its pieces: size it with data.subword_vocab and leave these out")  # fmt: skip

    def _write_target_language(self) -> None:
        """A word model joins its output as ``data.tgt_lang`` writes text (TextCodec.target_lang: French's space
        before ; : ! ?); without data.tgt_lang, as its start or chunk folder says."""
        lang = self.hparams.tgt_lang
        if lang and self.codec.mode == "word" and self.codec.target_lang != lang:
            self.codec = replace(self.codec, target_lang=lang)

    def drawn_split(self) -> bool:
        """A file of pairs or two parallel files: val and test drawn from them by data.val_size, test_size, seed."""
        return self.hparams.task in ("tsv", "parallel")

    def held_out(self) -> list[str] | None:
        """The val and test pairs (ResumableBatches: a resume tells whether they are the checkpoint's run's); None
        for a streamed corpus."""
        if self.streams:
            return None
        return [f"{split}:{e.src_text}\t{e.tgt_text}" for split in ("val", "test") if split in self.splits
                for e in self.splits[split].examples]  # fmt: skip

    def unknown_tokens(self, side: str) -> list[str]:
        """The train split's tokens its ``side`` (source, target or shared) vocabulary lacks, most frequent first;
        none for a chunk folder (its samples are ids)."""
        train = self.splits.get("train")
        if train is None or self.streams:
            return []
        vocab = self.tgt_vocab if side == "target" else self.src_vocab
        texts = [e.tgt for e in train.examples] if side == "target" else [e.src for e in train.examples]
        if side == "shared":
            texts += [e.tgt for e in train.examples]
        counts = Counter(t for tokens in texts for t in tokens if t not in vocab)
        return sorted(counts, key=lambda t: (-counts[t], t))

    def _loader(self, split: str, train: bool) -> DataLoader:
        ds = self.splits[split]
        seed = self.hparams.seed
        order = train_order(ds, seed, getattr(self, "trainer", None)) if train else SequentialSampler(ds)
        skip = self.take_resume_skip() if train else None
        sampler = LengthBatchSampler(order, [len(s) for s in ds.src], self.hparams.batch_size, seed=seed, skip=skip)
        collate_fn = partial(collate, ds, attention_targets=self.hparams.attention_targets)
        return DataLoader(ds, batch_sampler=sampler, collate_fn=collate_fn)

    def train_dataloader(self) -> DataLoader:
        if self.streams:
            from text_attn.translation.streaming import stream_collate

            hp = self.hparams
            collate = partial(stream_collate, pad_id=self.tgt_vocab.pad_id, attention_targets=hp.attention_targets)
            world = world_size_of(getattr(self, "trainer", None))
            return streaming_loader(hp.root, hp.batch_size, collate, hp.seed, 0, world, self.take_resume_skip(),
                                    shuffle=not overfits(getattr(self, "trainer", None)))  # fmt: skip
        return self._loader("train", train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", train=False)

    def test_dataloader(self) -> DataLoader:
        if not len(self.splits["test"]):  # Lightning would score nothing, say its loader is empty and exit 0
            raise ValueError("no test pairs: data.test_size is 0" if self.hparams.test_size == 0
                             else "no test pairs: the corpus's test split is empty")  # fmt: skip
        return self._loader("test", train=False)

    def predict_dataloader(self) -> DataLoader:
        return self._loader("test", train=False)


def _as_read(text: str) -> str:
    """A side of a pair as the codecs read it: composed (NFC), invisible characters out, runs of white space one."""
    return " ".join(composed(text).split())


def _without_repeats(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each (source, target) pair once, at its first line, with one note counting the repeats left out. Tatoeba and
    Anki exports repeat lines: a repeated pair landed in train and in val or test (200 lines, 100 of them repeats: 19
    of 30 test pairs also in train), and its scores measured memory, not translation."""
    # as the codecs read a pair: composed (NFC), invisible characters out, runs of white space one ("Mädchen" typed
    # decomposed, "Ein  Mann" were other pairs here, the same tokens in train and test)
    first = {}
    for pair in pairs:  # insertion order: the first occurrence stays, the split repeats with the seed
        first.setdefault(tuple(_as_read(side) for side in pair), pair)
    kept = list(first.values())
    if len(kept) < len(pairs):
        say(f"text data: note: left out {len(pairs) - len(kept)} repeated pair(s) (a pair written on more than one "
            f"line is kept once, at its first, so that no val or test pair is a train pair too); {len(kept)} "
            "pairs remain")  # fmt: skip
    return kept


SAME_SIDES = 0.05  # a share of pairs the same on both sides that is noted: a name or "OK!" alike is normal


def _same_sides_note(pairs: list[tuple[str, str]], where: str) -> None:
    """One note where at least SAME_SIDES of the pairs have the same text on both sides (as the codecs read it): one
    file given for both sides, or a column of copies, trained a model to copy its input, unsaid."""
    same = sum(_as_read(s) == _as_read(t) for s, t in pairs)
    if pairs and same >= SAME_SIDES * len(pairs):
        share = (
            "every pair has"
            if same == len(pairs)
            else f"{same:,} of the {len(pairs):,} pairs ({same / len(pairs):.0%}) have"
        )
        say(f"text data: note: {inert(where)}: {share} the same text on both sides: the model learns to copy them "
            "(the same file or column given for both sides?)")  # fmt: skip


START_SAMPLE = 500  # train sources the start's check reads: the share it flags is settled long before
SWAP_FLAGS = {"tsv": "--data.src_col/--data.tgt_col", "parallel": "--data.src_path/--data.tgt_path",
              "pair": "--data.src_lang/--data.tgt_lang"}  # fmt: skip


def _start_language(start: StartVocabulary, sources: list[str], task: str) -> str | None:
    """The language model.init_from reads (its check's ``lang``), for the run's own check; None, with one note, where
    its check flags most of the train sources (a sample) as another language: the corpus's columns swapped (an Anki
    file is English first) trained the model silently to read the language it writes."""
    sample = [composed(s) for s in sources[:START_SAMPLE]]  # composed: as translate reads a line
    flagged, code = unlike_language(start.check, sample), start.check.get("lang")
    if flagged * 2 <= len(sample):
        return code
    lang = f"the {LANGUAGES.get(code, code)}" if code else "the language"
    say(f"text data: note: most training sources ({flagged} of {len(sample)}) look unlike {lang} that "
        f"model.init_from {start.name} reads: columns swapped? ({SWAP_FLAGS[task]}; unless your source is meant "
        "to be another language)")  # fmt: skip
    return None


def _unspaced_note(train: list[Example]) -> None:
    """One note where a side's training sentences are one or two words each to the word tokenizer though long: a
    language written without spaces (Chinese, Japanese, Thai), each sentence one word, every unseen one <unk>."""

    def words(tokens: list[str]) -> int:  # punctuation left out: "我们今天去公园，然后去看电影。" is 2 words, 4 tokens
        return sum(map(is_word, tokens))

    for side, lengths, chars in (
        ("source", [words(e.src) for e in train], [len(e.src_text or "") for e in train]),
        ("target", [words(e.tgt) for e in train], [len(e.tgt_text or "") for e in train]),
    ):
        if found := unspaced(lengths, chars):
            n, letters = found
            say(f"text data: note: the {side} side's training sentences are {n} word(s) each (the median; "
                f"{letters} characters): a language written without spaces (Chinese, Japanese, Thai)? The word "
                "tokenizer takes each such sentence as one word; data.tokenizer subword splits it into "
                "pieces")  # fmt: skip
