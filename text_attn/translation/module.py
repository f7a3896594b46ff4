"""TranslationModule: the LightningModule around a text network: model, optimiser, logging, evaluation, checkpoints,
export.

The network is built in ``setup`` because its vocabulary sizes come from the data module (or, with ``init_from``,
from a model file or checkpoint whose weights it starts from; ``load_from_checkpoint``: from the checkpoint's model
metadata, in ``on_load_checkpoint``). What training minimises is the ``model.objective``
block's business (text_attn.translation.objective: cross-entropy with label smoothing, attention supervision,
self-critical training); a training step asks it for the loss and logs what it returns. Validation reports the
teacher-forced loss (pooled over the split) AND BLEU from free-running decoding (teacher-forced scores alone mislead;
each sentence capped as translate caps it), plus the attention's alignment accuracy when the task has a true
alignment: one checkpoint scores the same at any batch size.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, replace
from typing import Any

import pytorch_lightning as pl
import torch

from text_attn.core.empty_build import built_uninitialised
from text_attn.core.errors import one_line
from text_attn.core.metrics import (
    DEFAULT_BUCKETS,
    REAL_BUCKET_LABELS,
    REAL_BUCKETS,
    alignment_hits,
    bleu_by_length,
    bucket_label,
    corpus_bleu,
    sacre_scores,
)
from text_attn.core.self_critical import check_scst_start
from text_attn.core.start_scores import StartScores
from text_attn.core.training import (
    INIT_VOCAB,
    RunState,
    as_config,
    check_finite,
    check_training_options,
    gather_outputs,
    grow_rows,
    pooled_means,
    row_sums,
    started_from,
    weight_misfit,
    weights_digest,
)
from text_attn.core.vocab import Vocabulary, first_difference
from text_attn.translation.data import StartVocabulary
from text_attn.translation.networks import as_saved, build_network, make_config
from text_attn.translation.objective import ObjectiveConfig, TranslationObjective, decode_caps
from text_attn.translation.source_check import restored, valid_check
from text_attn.translation.tokens import TextCodec
from text_attn.translation.transformer import learned_positions
from text_attn.translation.translator import Translator, never_written


def vocabulary_line(name: str, src: Vocabulary, tgt: Vocabulary, dm, extend: bool) -> str | None:
    """What became of init_from's vocabularies (``src``, ``tgt``) and the train split's tokens, in one line; None when
    the data brought nothing new."""

    def some(tokens: list[str]) -> str:
        return ", ".join(tokens[:6]) + (", ..." if len(tokens) > 6 else "")

    sides = [("source", src, dm.src_vocab), ("target", tgt, dm.tgt_vocab)]
    if dm.src_vocab is dm.tgt_vocab:
        sides = [("shared", src, dm.src_vocab)]
    parts = []
    for side, start, run in sides:
        added, unknown = run.itos[len(start) :], dm.unknown_tokens(side)
        if added:
            parts.append(f"{len(added)} {side} tokens added ({some(added)})")
        if unknown:
            why = f"seen fewer than data.min_freq={dm.hparams.min_freq} times" if extend else "not among them"
            parts.append(f"{len(unknown)} other {side} tokens ({some(unknown)}) {why}: read as <unk>")
    if not parts:
        return None
    kept = f"its {dm.codec.mode} tokenizer and vocabularies ({len(src)} source, {len(tgt)} target tokens) kept"
    hint = "" if extend else " (model.init_vocab: extend adds them)"
    return f"model.init_from {name}: {kept}; " + "; ".join(parts) + hint


VOCABS = ("src_vocab", "tgt_vocab")  # the module's (and a checkpoint's model metadata's) vocabularies, source first

# a start or checkpoint of a word model trained before 2026-12-02 (text_attn.core.vocab.marks_split_off)
SPLIT_MARKS = "its word tokens split at combining marks (trained before 2026-12-02): the data is read that way"


# network options whose change keeps every weight's shape but not what the weights compute: refused beside
# model.init_from (num_heads 8 re-read a 4-head start's weights as 8 heads, exit 0)
COMPUTES = frozenset({"num_heads", "norm_first", "attention", "positions", "tie_output", "share_embeddings",
                      "bidirectional", "dot_projection", "rnn"})  # fmt: skip


def start_vocabulary(start: dict, name: str, init_vocab: str = "extend") -> StartVocabulary:
    """How the model file content ``start`` (``model.init_from`` ``name``, read by Translator.read_start) reads text:
    its tokenizer, vocabularies and source check, for a data module to read a corpus its way (``fit``, and
    ``text-train optimize``, whose chunks then hold the start's token ids)."""
    src, tgt = Vocabulary.from_dict(start["src_vocab"]), Vocabulary.from_dict(start["tgt_vocab"])
    tied = bool((start.get("config") or {}).get("share_embeddings")) and src == tgt
    codec = TextCodec.from_metadata(start, (src, tgt))  # a word model's of before 2026-12-02 too
    check = restored(start.get("source_check"))  # its language tells a corpus whose columns are swapped
    return StartVocabulary(name, codec, src, tgt, init_vocab == "extend", tied, check if valid_check(check) else None)


class TranslationModule(RunState, pl.LightningModule):
    command = "text-train"

    def __init__(
        self,
        arch: str = "rnn",
        network: dict[str, Any] | None = None,
        objective: ObjectiveConfig = ObjectiveConfig(),  # noqa: B008 - a frozen dataclass; stored as a dict below
        lr: float = 1e-3,
        warmup_steps: int = 0,
        val_beam_size: int = 1,
        export_path: str | None = None,
        init_from: str | None = None,
        init_vocab: str = "extend",
        cpu_threads: int | None = None,
    ):
        """
        Args:
            arch: network family: ``rnn`` (translation.seq2seq) or ``transformer`` (translation.transformer).
            network: the family's options: for ``rnn`` the fields of Seq2SeqConfig (attention, rnn, embed_dim, ...),
                for ``transformer`` those of TransformerConfig (d_model, num_heads, enc_layers, ...).
            objective: what training minimises (text_attn.translation.objective.ObjectiveConfig: label_smoothing,
                attn_sup_lambda, scst, scst_samples, scst_baseline, scst_max_len), a dataclass or a dict of its fields.
            lr: Adam learning rate (the peak rate when warmup_steps > 0).
            warmup_steps: 0 = constant rate; > 0 = linear warm-up then inverse square root decay (Vaswani et al.).
            val_beam_size: beam size of the free-running decoding in validation and test (1 = greedy).
            export_path: where fit writes the self-contained model file (default: <log dir>/model.pt).
            init_from: a text model file (``fit``'s or ``text-export``'s) or a text-train checkpoint to start from:
                the network is built from its settings (options under ``network`` override them, as long as the
                weights still fit) and loaded with its weights; a bundled model's name (``transformer``,
                ``bahdanau``) reads its file. The data is read with its tokenizer (its SentencePiece model: none is
                learned) and its vocabularies, whose tokens keep their ids.
            init_vocab: with ``init_from``: ``extend`` adds the train split's tokens its vocabularies lack (those seen
                at least data.min_freq times; their rows start as the mean of its rows), ``keep`` reads them as <unk>.
            cpu_threads: torch CPU threads while the run lasts (null = torch's default; the caller's count is given
                back after). On 2 shared cores 1 is fastest.
        """
        super().__init__()
        objective_config = as_config(ObjectiveConfig, objective, "objective")
        objective = asdict(objective_config)  # checkpoints keep plain dicts (they load with weights_only=True)
        check_training_options(lr, val_beam_size, warmup_steps=(warmup_steps, 0, float("inf")))
        if init_vocab not in INIT_VOCAB:
            raise ValueError(f"model.init_vocab must be one of {', '.join(INIT_VOCAB)}, got {init_vocab!r}")
        self.save_hyperparameters()
        self.objective = TranslationObjective(objective_config)
        self.net: torch.nn.Module | None = None
        self._start_sizes: tuple[int, int] | None = None  # init_from's (source, target) vocabulary sizes
        self._start_info: dict = {}  # init_from's facts: a model trained from it keeps its data's terms
        self._data_facts: dict = {}  # the training data's own (TranslationDataModule.facts), set in setup
        self._start_file: dict | None = None  # init_from's file as read (give_start), once
        self._given: StartVocabulary | None = None  # its tokenizer and vocabularies, as given to the data module
        self._outputs: list[dict] = []
        # init_from's val scores, when the sanity check validated the whole split before training
        # (trainer.num_sanity_val_steps: -1): fit's end compares its best with them, and exports the start where it
        # scored better
        self._start = StartScores()

    # --- building from the data ------------------------------------------------------------------------------------
    def give_start(self, dm: Any) -> dict | None:
        """model.init_from's file, read once, and its tokenizer and vocabularies given to the data module (``dm``),
        which reads the corpus their way (it asks for them before its first read: TranslationDataModule.setup);
        None without init_from."""
        hp = self.hparams
        if not hp.init_from:
            return None
        scored = self._scored_checkpoint() if self._start_file is None else None
        if self._start_file is None:
            self._start_file = scored or Translator.read_start(hp.init_from, hp.arch)
        start = self._start_file
        if self._given is None:  # given once: the data module asks first when Lightning sets it up
            # a checkpoint scored reads text as its run did, its vocabularies grown already: kept as they are
            self._given = start_vocabulary(start, hp.init_from, "keep" if scored else hp.init_vocab)
            if self._given.codec.split_marks and getattr(self._trainer, "is_global_zero", True):
                print(f"text-train: note: model.init_from {hp.init_from}: {SPLIT_MARKS}", file=sys.stderr)
            dm.start_from(self._given)
            self._start_info = started_from(hp.init_from, start.get("info") or {})
        return start

    def _scored_checkpoint(self) -> dict | None:
        """For ``test`` / ``validate`` / ``predict`` of a checkpoint: its model metadata (what a model file holds: its
        vocabularies, tokenizer, network settings), read in place of model.init_from's file. A run started from a
        model read its vocabularies from that file, so scoring its checkpoint failed once the file was gone ("no such
        file") or replaced (a bundled model upgraded: "the checkpoint's vocabulary differs ... use the data settings")
        while the checkpoint holds them itself. None otherwise (a fit, a resume included, reads the start's file: its
        weights are the start an SCST fit compares with)."""
        trainer = self._trainer
        fn = getattr(getattr(trainer, "state", None), "fn", None)
        # the CLI's resolved --ckpt_path (Lightning sets trainer.ckpt_path only after the setup that reads the text)
        given = getattr(self, "scored_checkpoint", None) or getattr(trainer, "ckpt_path", None)
        path = given if fn in ("test", "validate", "predict") else None
        if not path or "://" in str(path):
            return None
        try:
            meta = torch.load(path, map_location="cpu", weights_only=True, mmap=True).get("model_metadata")
        except Exception:  # noqa: BLE001 - an unreadable checkpoint is Lightning's to refuse, with its path
            return None
        fits = isinstance(meta, dict) and meta.get("arch") == self.hparams.arch and "src_vocab" in meta
        return meta if fits else None

    def setup(self, stage: str | None = None) -> None:
        hp = self.hparams
        self.use_cpu_threads(hp.cpu_threads)  # torch's own count again after the run (teardown)
        if self.net is not None:  # built before: by an earlier stage, or from a checkpoint (load_from_checkpoint)
            dm = self.trainer.datamodule
            if dm is not None:  # ids read through other vocabularies score the weights on scrambled words, silently
                _same_vocabularies([getattr(self, k) for k in VOCABS], [getattr(dm, k, None) for k in VOCABS])
            return
        dm = self.trainer.datamodule
        start = self.give_start(dm)
        dm.setup(stage)
        self.src_vocab, self.tgt_vocab, self.codec = dm.src_vocab, dm.tgt_vocab, dm.codec
        self._data_facts = dict(getattr(dm, "facts", {}))  # this data's terms (Multi30k's), over the start's
        self.source_check = getattr(dm, "source_check", None)
        if start is not None:
            src, tgt = self._given.src, self._given.tgt  # the start's own vocabularies, before the data's tokens
            Translator.check_start(hp.init_from, start, self.src_vocab, self.tgt_vocab)
            self._start_sizes = (len(src), len(tgt))
            line = vocabulary_line(hp.init_from, src, tgt, dm, hp.init_vocab == "extend")
            if line and getattr(self.trainer, "is_global_zero", True):
                print(f"text-train: {line}", file=sys.stderr)
        saved = as_saved(hp.arch, start["config"]) if start else {}
        for key, value in dict(hp.network or {}).items():  # same shapes, other computation: the start's weights were
            if key in COMPUTES and key in saved and value != saved[key]:  # re-read unsaid (4 heads' as 8: a review)
                given, theirs = (json.dumps(v) if isinstance(v, bool) or v is None else v for v in (value, saved[key]))
                raise ValueError(f"model.init_from {hp.init_from}: model.network.{key} {given} differs from the "
                                 f"start's {theirs}: its weights compute with {theirs}; leave it out (options "
                                 "that keep every weight's meaning, e.g. dropout, may differ)")  # fmt: skip
        options = {**saved, **dict(hp.network or {})}
        self.config = make_config(
            hp.arch, options, src_vocab_size=len(self.src_vocab), tgt_vocab_size=len(self.tgt_vocab)
        )
        if getattr(self.config, "share_embeddings", False) and self.src_vocab is not self.tgt_vocab:
            raise ValueError(
                "network.share_embeddings needs one vocabulary for both sides: set data.shared_vocab: true"
            )
        self.net = build_network(hp.arch, self.config)
        if start and "state_dict" in start:  # (a checkpoint scored: its own weights come next, from it)
            self._load_start(start["state_dict"])
            self._start_file = None  # its weights are the network's now: not kept twice for the whole run
        self.objective.check(self.net, bool(getattr(dm.hparams, "attention_targets", False)))
        self.objective.banned = never_written(self.tgt_vocab, self.codec)  # SCST samples what translate writes

    def check_fit_start(self, from_checkpoint: bool) -> None:
        check_scst_start(self.objective.cfg, self.hparams.init_from, from_checkpoint)  # SCST from random weights

    def _load_start(self, state: dict[str, torch.Tensor]) -> None:
        """Load ``init_from``'s weights; a weight that does not fit the network built here is one line."""
        own = self.net.state_dict()
        if self._start_sizes is not None:  # the vocabularies the data extended: the new tokens' rows, the mean rows
            state = grow_rows(own, state, self._start_sizes[0], len(self.src_vocab))
            state = grow_rows(own, state, self._start_sizes[1], len(self.tgt_vocab))
        misfit = weight_misfit(own, state)
        if misfit is not None:
            raise ValueError(
                f"model.init_from {self.hparams.init_from}: its weights do not fit the network these options build "
                f"({misfit}); leave out the network options that change a weight's shape"
            )
        self.net.load_state_dict(state)

    def translator(self) -> Translator:
        """The inference object over this module's network: it writes the model file and the checkpoints' metadata."""
        return Translator(
            self.net, self.src_vocab, self.tgt_vocab, self.codec, info={**self._start_info, **self._data_facts} or None,
            source_check=self.source_check,
        )  # fmt: skip

    # --- training ---------------------------------------------------------------------------------------------------
    def training_logs(self) -> frozenset[str]:
        """What :meth:`training_step` may log (the objective's names): lightning_parts.MonitorCheck reads it."""
        return self.objective.training_logs()

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        vocab = self.tgt_vocab
        loss, logs = self.objective.training_loss(self.net, batch, vocab.bos_id, vocab.eos_id, vocab.pad_id)
        check_finite(loss, self.global_step)
        progress = {"train_loss", "train_reward"}
        for name, value in logs.items():
            self.log(name, value, prog_bar=name in progress, batch_size=batch["src"].size(0))
        return loss

    def configure_optimizers(self):
        # Half weights (16-true, bf16-true): the fused step, which computes in float32; the plain one's eps of 1e-9 is
        # 0 in float16, and its first step divided 0 by 0 (nan weights). Elsewhere the plain Adam, its numbers as ever.
        half = str(getattr(self._trainer, "precision", None)) in ("16-true", "bf16-true")
        opt = torch.optim.Adam(self.parameters(), lr=self.hparams.lr, betas=(0.9, 0.98), eps=1e-9, fused=half or None)
        warm = self.hparams.warmup_steps
        if warm <= 0:
            return opt
        # Peak `lr` at step `warm`, then lr * sqrt(warm / step): the paper's schedule, rescaled to a chosen peak.
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warm, math.sqrt(warm / (s + 1))))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    # --- free-running evaluation ------------------------------------------------------------------------------------
    def _decode(self, batch: dict):
        # each sentence's own, as translate caps it (the training lengths' record too): not its batch's longest
        caps = decode_caps(batch["src_lens"], (self.source_check or {}).get("lengths"))
        if (most := learned_positions(self.net)) is not None:  # no step past a learned position table (a traceback)
            caps = caps.clamp(max=most)
        return self.net.generate(
            batch["src"],
            batch["src_lens"],
            self.tgt_vocab.bos_id,
            self.tgt_vocab.eos_id,
            max_len=int(caps.max()),
            beam_size=self.hparams.val_beam_size,
            banned=never_written(self.tgt_vocab, self.codec),  # what translate writes: scored as it translates
            row_max_len=caps,
        )

    def _eval_step(self, batch: dict, stage: str, dataset) -> None:
        # the loss's sums per sentence, pooled over the split at the epoch's end (a mean of batch means moved with
        # data.batch_size); kept in each sentence's output, so DDP's repeated sentences count once
        sums = row_sums(self.objective.evaluation_sums(self.net, batch, self.tgt_vocab.pad_id))
        res = self._decode(batch)
        for row, (i, toks) in enumerate(zip(batch["index"].tolist(), res.token_lists(), strict=True)):
            ex = dataset.examples[i]
            hyp = self.tgt_vocab.decode(toks)
            out = {"index": i, "hyp": self.codec.words(hyp), "ref": self.codec.words(ex.tgt), "src_len": len(ex.src)}
            out["sums"] = sums[row]
            if ex.tgt_text is not None:  # a real corpus: the detokenized text too, for sacreBLEU and chrF
                out["hyp_text"], out["ref_text"] = self.codec.decode(hyp), ex.tgt_text
                out["src_words"] = len(ex.src_text.split())
            if ex.alignment is not None and res.attention is not None:
                out["align"] = alignment_hits(res.attention[row], ex.alignment, len(toks))
            self._outputs.append(out)

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._eval_step(batch, "val", self.trainer.datamodule.splits["val"])

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self._eval_step(batch, "test", self.trainer.datamodule.splits["test"])

    def _eval_epoch_end(self, stage: str) -> None:
        outs, self._outputs = gather_outputs(self._outputs), []  # the whole split, on every rank
        if not outs:
            return
        means = pooled_means(outs)
        scores = {f"{stage}_loss": self.objective.evaluation_loss(means)}  # what a checkpoint may be chosen by
        if "attn_sup" in means:
            scores[f"{stage}_attn_sup"] = means["attn_sup"]
        refs = [[o["ref"]] for o in outs]
        hyps = [o["hyp"] for o in outs]
        scores[f"{stage}_bleu"] = corpus_bleu(refs, hyps)["bleu4"]  # lowercased, tokenized
        if all("ref_text" in o for o in outs):
            refs_text, hyps_text = [o["ref_text"] for o in outs], [o["hyp_text"] for o in outs]
            sacre = sacre_scores(refs_text, hyps_text, lowercase=self.codec.lowercased)  # case:lc if it lowercases
            scores[f"{stage}_sacrebleu"], scores[f"{stage}_chrf"] = sacre["sacrebleu"], sacre["chrf"]
            if stage == "test" and self.trainer.is_global_zero:
                print(f"sacreBLEU {sacre['sacrebleu']:.2f}, chrF {sacre['chrf']:.2f} ({sacre['signature']})")
        aligned = [o["align"] for o in outs if "align" in o]
        if aligned:
            hits, total = map(sum, zip(*aligned, strict=True))
            scores[f"{stage}_align_acc"] = hits / max(total, 1)
        progress = {f"{stage}_{name}" for name in ("loss", "bleu", "sacrebleu")}
        for name, value in scores.items():
            self.log(name, value, prog_bar=name in progress)
        if stage == "val":  # the sanity check's, before the first step: the start's (text_attn.core.start_scores)
            self._start.record(self.trainer, self.hparams.init_from, scores, lambda: weights_digest(self))
        if stage == "test":
            if all("src_words" in o for o in outs):  # real text: by source words, in buckets that fit its lengths
                lengths, bounds, labels = [o["src_words"] for o in outs], REAL_BUCKETS, REAL_BUCKET_LABELS
            else:
                lengths, bounds = [o["src_len"] for o in outs], DEFAULT_BUCKETS
                labels = [bucket_label(lo, hi) for lo, hi in bounds]
            buckets = bleu_by_length(lengths, refs, hyps, bounds)
            for (lo, hi), label in zip(bounds, labels, strict=True):
                b = buckets[bucket_label(lo, hi)]
                if b["count"]:
                    self.log(f"test_bleu_{label}", b["bleu"])

    def on_validation_epoch_end(self) -> None:
        self._eval_epoch_end("val")

    def predict_step(self, batch: dict, batch_idx: int) -> list[dict]:
        """``trainer.predict``: each test pair's translation (its index in the split and the text), decoded as
        validation decodes (model.val_beam_size)."""
        res = self._decode(batch)
        index = batch["index"].tolist()
        return [
            {"index": i, "translation": self.codec.decode(self.tgt_vocab.decode(toks))}
            for i, toks in zip(index, res.token_lists(), strict=True)
        ]

    def on_test_epoch_end(self) -> None:
        self._eval_epoch_end("test")

    # --- checkpoints ----------------------------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["model_metadata"] = self.translator().metadata()  # text-export turns a checkpoint into a model file
        self.save_run_state(checkpoint)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        # the vocabularies built from the data must be the checkpoint's: ids read through others score (or train)
        # the weights on scrambled words, silently (another data.seed, max_vocab or lower than the fit's)
        meta = checkpoint.get("model_metadata") or {}
        if self.net is None:  # TranslationModule.load_from_checkpoint: no setup built the network
            self._build_from(meta)
        self._read_as_trained(meta)
        self._built_as_saved(meta)
        saved = [Vocabulary.from_dict(meta[k]) if isinstance(meta.get(k), dict) else None for k in VOCABS]
        _same_vocabularies(saved, [getattr(self, k, None) for k in VOCABS], "the checkpoint", self._changed(checkpoint))
        self.load_run_state(checkpoint, network_built=self.net is not None)

    def _changed(self, checkpoint: dict) -> str:
        """What of this run's data options (and model.init_from, which gives the vocabularies) differs from the
        checkpoint's, in words, for the vocabulary refusal ("" where nothing recorded differs): it named no option, and
        another data.tgt_lang was said of the source vocabulary."""
        dm = getattr(getattr(self, "_trainer", None), "datamodule", None)
        saved, now = checkpoint.get("datamodule_hyper_parameters"), getattr(dm, "hparams", None)
        said = []
        if isinstance(saved, dict) and now is not None:
            for key in sorted(saved):
                if key in now and key not in ("batch_size", "num_workers") and saved[key] != now[key]:
                    said.append(f"data.{key} {now[key]} (the checkpoint's: {saved[key]})")
        hp = checkpoint.get("hyper_parameters") or {}
        start = getattr(getattr(self, "hparams", None), "init_from", None)
        if start and hp.get("init_from") == start and not said:  # the same name: is it the same file?
            said.append(f"model.init_from {start}, whose vocabularies the run reads: the file the checkpoint's run "
                        "started from, unchanged?")  # fmt: skip
        elif start != hp.get("init_from", start):
            said.append(f"model.init_from {start} (the checkpoint's: {hp.get('init_from')})")
        return "; ".join(said[:4])

    def _build_from(self, meta: dict) -> None:
        """The network built from a checkpoint's model metadata (no data module gave its vocabularies), undrawn, for
        the checkpoint's weights loaded next; with the vocabularies, tokenizer, source check and facts its model file
        would carry, so the module translates as the file text-export writes from it."""
        try:
            arch = meta["arch"]
            config = make_config(arch, as_saved(arch, meta["config"]))
            src, tgt = Vocabulary.from_dict(meta["src_vocab"]), Vocabulary.from_dict(meta["tgt_vocab"])
            codec = TextCodec.from_metadata(meta, (src, tgt))
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(
                f"this checkpoint keeps no model settings to build its network from ({type(err).__name__}: "
                f"{one_line(err)}): load a model file with Translator.load"
            ) from None
        self.config = config
        self.net = built_uninitialised(lambda: build_network(arch, config))
        self.src_vocab, self.tgt_vocab, self.codec = src, tgt, codec
        self.source_check = restored(meta.get("source_check"))
        self._start_info = dict(meta.get("info") or {})  # the start's and the data's facts, as the checkpoint has them
        self.objective.banned = never_written(tgt, codec)

    def _read_as_trained(self, meta: dict) -> None:
        """A checkpoint of a word model trained before 2026-12-02 (its vocabularies hold combining marks split off as
        tokens: text_attn.core.vocab.marks_split_off): the data read again that way, and the network built anew on its
        vocabularies, before the checkpoint's weights are loaded into it (the data read today's way built others)."""
        dm = getattr(getattr(self, "_trainer", None), "datamodule", None)
        if self.net is None or self.codec.mode != "word" or self.codec.split_marks or dm is None:
            return
        try:
            saved = tuple(Vocabulary.from_dict(meta[key]) for key in ("src_vocab", "tgt_vocab"))
        except (KeyError, TypeError, ValueError):
            return  # no vocabularies (a damaged checkpoint): the check after this says what differs
        if not TextCodec.from_metadata(meta, saved).split_marks:
            return
        if getattr(self.trainer, "is_global_zero", True):
            print(f"text-train: note: the checkpoint: {SPLIT_MARKS}", file=sys.stderr)
        dm.split_at_marks()
        self.net = None
        self.setup()

    def _built_as_saved(self, meta: dict) -> None:
        """A luong-dot checkpoint of before 2026-12-02 (its keys projected first: seq2seq.saved_options) resumed or
        scored with --ckpt_path: the network setup built from the network options, which do not say so, built again
        as the checkpoint's was, before its weights are loaded into it."""
        saved = meta.get("config")
        if self.net is None or getattr(self.config, "attention", None) != "luong-dot" or not isinstance(saved, dict):
            return
        projected = bool(as_saved("rnn", saved).get("dot_projection"))
        if projected != self.config.dot_projection:
            self.config = replace(self.config, dot_projection=projected)
            self.net = build_network("rnn", self.config)

    # --- export -----------------------------------------------------------------------------------------------------
    def on_fit_end(self) -> None:
        where = "val pairs (the start may translate them as well)"
        self.export_against_start(self.translator().save, self._start, self.hparams.init_from, where, "text-train",
                                  self.objective.cfg.scst, self._put_start)  # fmt: skip

    def _put_start(self) -> None:
        """init_from's weights in the network again, as setup gave them (read from its file; the new tokens' rows the
        mean rows)."""
        self._load_start(Translator.read_start(self.hparams.init_from, self.hparams.arch)["state_dict"])


def _same_vocabularies(saved: list, data: list, whose: str = "the network", changed: str = "") -> None:
    """One ValueError line unless each vocabulary the data built (source, target) is the one ``whose`` weights were
    trained with (None on either side: nothing to compare). ``changed``: the options that differ from its run's."""
    for side, theirs, own in zip(("source", "target"), saved, data, strict=True):
        if theirs is not None and own is not None and theirs != own:
            fix = f"here {changed}: use those {whose} was trained with" if changed else (
                f"use the data settings {whose} was trained with")  # fmt: skip
            raise ValueError(
                f"{whose}'s {side} vocabulary ({len(theirs)} tokens) differs from the one built from the data "
                f"({len(own)} tokens{first_difference(theirs, own)}): {fix}"
            )
