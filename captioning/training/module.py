"""CaptionModule: the LightningModule around CaptionModel: model, optimiser, logging, evaluation, checkpoints, export.

The model is built in ``setup`` because its vocabulary comes from the data module (``load_from_checkpoint``: from the
checkpoint's vocabulary and settings, in ``on_load_checkpoint``). What training minimises is the ``model.objective``
block's business (captioning.training.objective: cross-entropy with the doubly stochastic penalty, eq. (12) for hard
attention, SCST, attention supervision); a training step asks it for the loss and logs what it returns (``train_loss``,
``train_ce``, ``train_ds``; for hard attention ``train_reinforce``, ``train_entropy``, ``train_reward``, ``baseline``
(with rl_reward caption, once set); for SCST ``train_reward``, ``train_baseline``, ``train_advantage``;
``train_attn_sup``). Validation and test decode free-running (no teacher forcing) one caption per image and score it
against all its references with the coco-caption metrics: ``{stage}_Bleu_1..4``, ``{stage}_ROUGE_L``,
``{stage}_CIDEr`` (and ``{stage}_METEOR`` when Java runs it on English references), plus the teacher-forced
``{stage}_loss`` on each image's first reference, pooled over the split (the same at any batch size). On shapes it
also logs ``{stage}_grounding`` (fraction of object-naming nouns whose arg-max attention cell lies in the named
object's box; 0 when no noun names an object), ``{stage}_grounding_mass`` (mean attention mass in that box) and
``{stage}_grounding_words``. Monitor ``val_Bleu_4`` or ``val_CIDEr`` (mode "max") in ModelCheckpoint. A batch none of
whose photos can be read (the data module's UNREADABLE_BATCH: its photos are decoded as batches are drawn, data.strict
off) is skipped by every step: no training step, and the split is scored on its other photos.

The module reads the data module's vocabulary (``dm.vocab``), its training references (for SCST's reward) and, for
grounding, its scenes; it calls into it once, in ``setup`` with ``model.init_from``, to give it the starting model's
vocabulary (``dm.use_vocabulary``: its words keep their ids, and the new words are added after them). The
FeatureCacheCallback (captioning.training.feature_cache, added by ``configure_callbacks``) gives the data module the
encoder for preprocessing and the feature cache.
"""

from __future__ import annotations

import math
import sys
import time
from collections import Counter
from dataclasses import asdict

import pytorch_lightning as pl
import torch

from captioning.model.captioner import Captioner, StartWeights
from captioning.model.decoder import DecoderConfig
from captioning.model.encoder import LITE, EncoderConfig, encoder_problem, settled
from captioning.model.network import CaptionModel
from captioning.model.reading import folded_vocabulary
from captioning.photos.jpeg_step import AUTO, PhotoFormat
from captioning.training.cuda_graphs import GraphedDecoder, pad_to_bucket
from captioning.training.distillation import load_teacher
from captioning.training.feature_cache import UNREADABLE_BATCH, FeatureCacheCallback
from captioning.training.grounding import grounding
from captioning.training.objective import CaptionObjective, ObjectiveConfig
from captioning.training.readers import split_clash
from text_attn.core.decoding import evaluating
from text_attn.core.errors import missing
from text_attn.core.fused import SCRATCH
from text_attn.core.lr_budget import LR_SCHEDULES, BudgetProgress, budget_scheduler
from text_attn.core.metrics import coco_metrics, reads_as_english, reported
from text_attn.core.modelfile import file_name
from text_attn.core.precision import parameter_dtype
from text_attn.core.ranks import say
from text_attn.core.safe_files import inert
from text_attn.core.self_critical import check_scst_start
from text_attn.core.start_scores import StartScores
from text_attn.core.training import (
    INIT_VOCAB,
    RunState,
    as_config,
    check_options,
    check_training_options,
    gather_outputs,
    pooled_means,
    row_sums,
    started_from,
    weights_digest,
)
from text_attn.core.vocab import Vocabulary, first_difference


def vocabulary_line(start: StartWeights, vocab: Vocabulary, dm, extend: bool, folded: list[str] | None = None) -> str:
    """The line that says what became of init_from's vocabulary and the train captions' words: those trained on, as
    the data's vocabulary counts them (data.captions_per_image: the first k of each photo's; the others' words were
    called "seen fewer than data.min_freq times" however often they occur). ``folded``: its words written with ’ or
    ‘, read with ' as the captions are (reading.folded_vocabulary)."""
    per_image = dm.hparams.captions_per_image
    counts = Counter(w for caps in dm.train_references for cap in caps[:per_image] for w in cap)
    unknown = sorted((w for w in counts if w not in vocab), key=lambda w: (-counts[w], w))
    added = vocab.itos[len(start.vocab) :]

    def some(words: list[str]) -> str:
        return ", ".join(words[:8]) + (", ..." if len(words) > 8 else "")

    line = f"model.init_from {start.name}: its {len(start.vocab)} words kept at their ids"
    if folded:
        line += f" ({len(folded)} written with ’ or ‘ read with ' as the captions are: {some(folded)})"
    if extend:
        line += f"; {len(added)} words of the train captions added ({some(added)})" if added else "; no new word"
    if unknown:
        why = f"seen fewer than data.min_freq={dm.hparams.min_freq} times" if extend else "not among them"
        line += f"; {len(unknown)} other words ({some(unknown)}) {why}: read as <unk>"
        if not extend:
            line += " (model.init_vocab: extend adds them)"
    return line


def one_val_photo_line(trainer, dm) -> str | None:
    """The note for a monitored CIDEr(-D) over fewer than 2 val photos: CIDEr weighs an n-gram by how few photos'
    references hold it, so over one photo every IDF is log(1/1) and the score is 0 at every epoch: the first
    checkpoint is kept and fit's end says training did not beat the start. None otherwise."""
    val = getattr(dm, "splits", {}).get("val")
    callbacks = [*getattr(trainer, "checkpoint_callbacks", []), *getattr(trainer, "early_stopping_callbacks", [])]
    monitors = sorted({m for cb in callbacks if "CIDEr" in (m := getattr(cb, "monitor", None) or "")})
    if val is None or len(val.images) >= 2 or not monitors:
        return None
    return (
        f"{monitors[0]} over {len(val.images)} val photo is 0 whatever the captions (CIDEr weighs words by how few "
        "photos' references hold them): it cannot rank checkpoints; give data.val_size 2 or more"
    )


def fused_adam_allowed(trainer: pl.Trainer | None) -> bool:
    """Whether the trainer can step a fused Adam: its mixed-precision plugin (16-mixed, bf16-mixed) unscales the
    gradients before clipping them, which a fused optimizer does inside its own step, so Lightning refuses the pair at
    the first step. Full precision (32-true, 64-true), half weights (16-true, bf16-true) or no clipping: fused."""
    mixed = str(getattr(trainer, "precision", None)).endswith("-mixed")  # None: called outside a Trainer
    return not (mixed and (getattr(trainer, "gradient_clip_val", None) or 0) > 0)


def idle_encoder(encoder_lr: float, fine_tune: str | None) -> str | None:
    """The line refusing a fit whose encoder stages are fine-tuned at rate 0 (None: it learns): it ran the stages'
    backward every step, learned nothing, and the model file said its encoder was fine-tuned on captions. Validate and
    test of such a run's checkpoint train nothing: they go on."""
    if encoder_lr != 0 or fine_tune in (None, "none"):
        return None
    return (f"model.encoder_lr 0 with model.encoder.fine_tune {fine_tune}: the encoder would compute its gradients "
            "every step and learn nothing; freeze it with --model.encoder.fine_tune none, or give a positive "
            "encoder_lr")  # fmt: skip


class CaptionModule(RunState, pl.LightningModule):
    command = "caption-train"

    def __init__(
        self,
        encoder: EncoderConfig = EncoderConfig(),  # noqa: B008 - a frozen dataclass; stored as a dict below
        decoder: DecoderConfig = DecoderConfig(),  # noqa: B008
        objective: ObjectiveConfig = ObjectiveConfig(),  # noqa: B008
        lr: float = 4e-4,
        encoder_lr: float = 1e-4,
        lr_patience: int | None = None,
        lr_factor: float = 0.5,
        lr_schedule: str = "plateau",
        val_beam_size: int = 1,
        val_max_len: int = 30,
        val_meteor: bool | None = None,
        export_path: str | None = None,
        cpu_threads: int | None = None,
        init_from: str | None = None,
        init_member: int | None = None,
        init_vocab: str = "extend",
        cuda_graphs: bool = False,
    ):
        """
        Args:
            encoder: the image encoder (captioning.model.encoder.EncoderConfig: backbone, grid, stride, weights,
                fine_tune, image_size, crop, multiscale), a dataclass or a dict of its fields.
            decoder: the Show-Attend-Tell decoder (captioning.model.decoder.DecoderConfig: embed_dim, hidden_dim,
                attn_dim, dropout, gate, deep_output, attention, hard_inference, soft_prob, region_pos, init_from_image,
                attend_on, fast_path), a dataclass or a dict of its fields.
            objective: what training minimises (captioning.training.objective.ObjectiveConfig: ds_lambda,
                label_smoothing, attn_sup_lambda; for hard attention soft_warmup, rl_lambda, rl_reward, entropy_lambda,
                baseline_decay, collapse_warmup, collapse_ratio; scst, scst_samples, scst_baseline, scst_max_len), a
                dataclass or a dict of its fields.
            lr: Adam learning rate of the decoder. encoder_lr: Adam rate of the trainable encoder layers.
            lr_patience: when set, multiply the learning rates by ``lr_factor`` whenever ``val_Bleu_4`` has not
                improved for this many validations (ReduceLROnPlateau); null keeps them constant. A schedule by
                plateaus, not by step count, suits runs capped by ``trainer.max_time``, whose length in steps
                depends on the machine.
            lr_schedule: ``plateau`` (``lr_patience`` above) or ``budget``: the rates fall linearly to zero over the
                run's budget, whichever of trainer.max_steps / max_epochs / max_time ends it first
                (text_attn.core.lr_budget); lr_patience is then unused.
            val_beam_size: beam size of the free-running decoding in validation and test (1 = greedy, fastest).
            val_max_len: longest caption decoded in validation and test.
            val_meteor: METEOR in validation / test: null = when Java is available, false = never (faster); never on
                references that are not English (one note: METEOR scores English).
            export_path: where fit writes the self-contained model file (default: <log dir>/model.pt).
            cpu_threads: torch CPU threads while the run lasts (null = torch's default, one per core; the caller's
                count is given back after). On a small CPU shared with other work, 1 is much faster: threads waiting
                for a busy core stall every op.
            init_from: a model file or training checkpoint whose weights start this run: the cross-entropy model for
                an SCST stage, or a trained captioner to teach your own photos (``flickr8k``, the bundled one: its
                file). The config must build the same network. A resumed run (--ckpt_path) takes the checkpoint's
                weights instead.
            init_member: which decoder of an ensemble ``init_from`` starts from (1 = the first); an ensemble needs it.
            init_vocab: the vocabulary of a run with ``init_from``: its model's words always keep their ids;
                ``extend`` adds the words of the train captions it lacks (those seen at least data.min_freq times;
                their rows start as the mean of its rows, so its captions hardly change until they are learned),
                ``keep`` reads them as <unk> (the model keeps its shape: it can still be ensembled with its source).
            cuda_graphs: the decoder's teacher-forced training loop captured as CUDA graphs, one per (batch size,
                caption length bucket: captions padded to a multiple of 8 words), replayed instead of launching its
                kernels one by one (captioning.training.cuda_graphs; docs/speed.md). Needs CUDA: on another device it
                is ignored, with one line. Never measured on a GPU yet, so off by default. The cross-entropy and
                REINFORCE losses only; validation and SCST's sampling run as usual.
        """
        super().__init__()
        encoder, decoder = as_config(EncoderConfig, encoder, "encoder"), as_config(DecoderConfig, decoder, "decoder")
        objective = as_config(ObjectiveConfig, objective, "objective")
        e = encoder  # now, not when the encoder is built in setup, after the data was read and the run folder made
        if problem := encoder_problem(e.backbone, e.grid, e.stride, e.fine_tune, e.multiscale):
            raise ValueError(f"model.encoder: {problem}")
        self.encoder_config, self.decoder_config = encoder, decoder
        # Checkpoints keep plain dicts (they load with weights_only=True); save_hyperparameters reads these locals.
        encoder, decoder, objective_config, objective = asdict(encoder), asdict(decoder), objective, asdict(objective)
        self.save_hyperparameters()
        inf = float("inf")
        check_training_options(lr, val_beam_size, encoder_lr=(encoder_lr, 0, inf), init_member=(init_member, 1, inf),
                               cpu_threads=(cpu_threads, 1, inf), val_max_len=(val_max_len, 1, inf),
                               lr_patience=(lr_patience, 0, inf))  # fmt: skip
        if not 0 < lr_factor < 1:  # the plateau schedule's factor: PyTorch's own refusal named no option
            raise ValueError(f"model.lr_factor must be between 0 and 1 (both excluded), got {lr_factor:g}")
        d = self.decoder_config  # widths of 0 trained a model that wrote "a is a is a" (torch refused only negatives)
        check_options("model.decoder", embed_dim=(d.embed_dim, 1, inf), hidden_dim=(d.hidden_dim, 1, inf),
                      attn_dim=(d.attn_dim, 1, inf), key_dims=(d.key_dims, 1, inf))  # fmt: skip
        if init_vocab not in INIT_VOCAB:
            raise ValueError(f"model.init_vocab must be one of {', '.join(INIT_VOCAB)}, got {init_vocab!r}")
        if init_member is not None and not init_from:
            raise ValueError("model.init_member picks a decoder of model.init_from's ensemble: give model.init_from")
        if lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"unknown lr_schedule {lr_schedule!r}; choose one of {LR_SCHEDULES}")
        self._budget: BudgetProgress | None = None  # the budget schedule's progress (configure_optimizers)
        self._budget_saved = 0.0  # its progress in the checkpoint a resumed fit starts from
        # A submodule: the hard-attention baseline is a buffer, so checkpoints keep it.
        self.objective = CaptionObjective(objective_config, self.decoder_config.attention == "hard", val_max_len)
        self.model: CaptionModel | None = None
        self.vocab = None
        self._start_info: dict = {}  # init_from's facts: a model trained from it keeps its data's terms
        self._loaded_data: dict | None = None  # load_from_checkpoint: the checkpoint's domain, check, casing, info
        # init_from's val scores, when the sanity check validated the whole split before training
        # (trainer.num_sanity_val_steps: -1, as configs/caption/your_photos.yaml): fit's end compares its best with
        # them, and exports the start where it scored better (text_attn.core.start_scores)
        self._start = StartScores()
        self._start_name: str | None = None  # init_from as read (an ensemble's decoder named: "flickr8k (decoder 1)")
        self._start_tuned: str | None = None  # init_from's fine-tuned encoder stages (they start this run)
        self._outputs: list[dict] = []
        self._said_meteor = False  # the note that non-English references get no METEOR, said once
        self._graphed: GraphedDecoder | None = None  # model.cuda_graphs on CUDA (on_train_start)

    # --- building from the data -------------------------------------------------------------------------------------
    def _read_start(self):
        """init_from's model (Captioner.read_start). Gone on a resume (a stage-1 file removed, a relative path from
        another folder): the resume's weights are the checkpoint's, and the line says how to go on without it."""
        from captioning.model.bundled import model_path

        name = self.hparams.init_from
        if getattr(self, "resuming", False) and not model_path(name).exists():  # set by lightning_cli's before_fit
            raise ValueError(
                f"model.init_from: {missing(str(name), 'no such file')}: a resume takes its weights from --ckpt_path; "
                "give --model.init_from null to resume without it"
            )
        return Captioner.read_start(name, self.hparams.init_member)

    @staticmethod
    def refuse_fit(options) -> str | None:
        """caption-train's line refusing a fit of these parsed options (a jsonargparse Namespace, a resumed
        checkpoint's settings in), said before the data is read or the trainer made (text_attn.core.lightning_cli);
        None: the fit goes on."""
        return idle_encoder(options.get("model.encoder_lr"), options.get("model.encoder.fine_tune"))

    def setup(self, stage: str | None = None) -> None:
        if stage == "fit" and (idle := idle_encoder(self.hparams.encoder_lr, self.encoder_config.fine_tune)):
            raise ValueError(idle)  # a Trainer of the caller's own: caption-train said it before the data was read
        self.use_cpu_threads(self.hparams.cpu_threads)  # torch's own count again after the run (teardown)
        if self.model is None:
            vocab = getattr(self.trainer.datamodule, "vocab", None)
            if vocab is None:
                raise ValueError("CaptionModule needs a CaptionDataModule (its vocabulary sizes the decoder)")
            start = None
            if self.hparams.init_from:  # a resumed fit then restores its checkpoint over these weights
                start = self._read_start()
                dm = self.trainer.datamodule  # its Flickr8k split, against the one the start learned from
                split = getattr(dm, "flickr8k_split", None)
                clash = split and split_clash(start.name, start.info, split, dm.hparams.root)
                if clash:
                    raise ValueError(clash)
                self._start_info = started_from(start.name, start.info)
                self._start_name, self._start_tuned = start.name, start.tuned
                folded: list[str] = []
                if start.vocab is not None:  # the captions' apostrophes are read folded: so are its words
                    folded_vocab, folded = folded_vocabulary(start.vocab)
                    start = start._replace(vocab=folded_vocab)
                if start.vocab is not None and start.vocab != vocab:
                    vocab = self._start_vocabulary(self.trainer.datamodule, start, folded)
            self.vocab = vocab
            self.encoder_config = self._settle_jpeg_step(self.trainer.datamodule, stage)
            self.model = CaptionModel.build(len(vocab), self.encoder_config, self.decoder_config)
            if start is not None:
                Captioner.start_weights(start, self.model, vocab)
        dm = getattr(self.trainer, "datamodule", None)
        if dm is None:
            return
        data_vocab = getattr(dm, "vocab", None)  # a network built before: by an earlier stage, or load_from_checkpoint
        if data_vocab is not None and data_vocab != self.vocab:  # its ids would caption and score scrambled words
            raise ValueError(
                f"the network's vocabulary ({len(self.vocab)} words) differs from the one built from the data "
                f"({len(data_vocab)} words{first_difference(self.vocab, data_vocab, 'word')}): use the data settings "
                "it was trained with"
            )
        stored = (getattr(dm, "chunk_state", None) or {}).get("stores")
        if stored == "features" and self.model.encoder.fine_tune != "none":  # it trained nothing, and said "all"
            raise ValueError(
                f"model.encoder.fine_tune is {self.model.encoder.fine_tune!r}, but {dm.hparams.root} holds a frozen "
                "encoder's features: the encoder would never run, nor learn; set fine_tune: none, or optimize the "
                "photos (without --features true) to fine-tune it"
            )
        if self.objective.cfg.attn_sup_lambda > 0 and not getattr(dm.hparams, "attention_targets", False):
            raise ValueError(
                "model.objective.attn_sup_lambda > 0 needs the ground-truth attention: set data.attention_targets: "
                "true (source shapes, or karpathy with sentence boxes)"
            )
        if stage in (None, "fit") and self.objective.cfg.scst:
            self.objective.use_references(dm.train_references)  # SCST's CIDEr-D document frequencies
        if stage in (None, "fit") and self.objective.cfg.distil_from and self.objective._teacher is None:
            self._use_teacher(self.objective.cfg.distil_from)
        note = one_val_photo_line(self.trainer, dm) if stage in (None, "fit") else None
        self._one_val_said = note is not None
        if note and self.trainer.is_global_zero:
            print(f"caption-train: {note}", file=sys.stderr)
        if stage in (None, "fit") and (read := getattr(dm, "photos_read", None)) and self.trainer.is_global_zero:
            print(f"caption-train: {inert(dm.domain)}: {read}", file=sys.stderr)  # a fit said nothing of your photos

    def _use_teacher(self, name: str) -> None:
        """model.objective.distil_from's teacher, read once as fit starts (and again on resume: no checkpoint holds
        it), said in one line. It reads the student's features: a student whose encoder trains, or with hard
        attention (its loss is eq. 12's, not a word distribution's), is refused in one line."""
        opt = "model.objective.distil_from"
        if self.decoder_config.attention == "hard":
            raise ValueError(f"{opt}: word-level distillation teaches a soft-attention student; this one is hard")
        if self.model.encoder.fine_tune != "none":
            raise ValueError(f"{opt}: the teacher reads the student's features: set model.encoder.fine_tune: none "
                             f"(the encoder frozen), not {self.model.encoder.fine_tune}")  # fmt: skip

        def encode(images: torch.Tensor) -> torch.Tensor:
            with evaluating(self.model.encoder), torch.no_grad():
                return self.model.encoder(images)

        teacher, line = load_teacher(name, self.vocab, encode, self.model.encoder.preprocess.image_size)
        note = self.objective.use_teacher(teacher, self._targets_room())
        cfg = self.objective.cfg
        taught = f"its next-word probabilities at weight {cfg.distil_weight:g}"
        taught += f" and its attention at weight {cfg.distil_attention:g}" if cfg.distil_attention > 0 else ""
        self._start_info = {**self._start_info, "distilled_from": f"{file_name(name)}, {taught}"}
        if self.trainer.is_global_zero:
            print(f"caption-train: {line}", file=sys.stderr)
            if note:
                print(f"caption-train: note: {note}", file=sys.stderr)

    def _targets_room(self) -> int | None:
        """Bytes the teacher's kept targets may take room from (None: unknown): they stay on the fit's device, the
        GPU's free memory on CUDA, else what this process may use (a container's limit: text_attn.core.memory_room)
        shared by the machine's processes of a --trainer.devices N run (each keeps its own)."""
        device = self.trainer.strategy.root_device
        if device.type == "cuda":
            return torch.cuda.mem_get_info(device)[0]
        if device.type != "cpu":
            return None
        from text_attn.core.memory_room import memory_room

        room = memory_room()
        return None if room is None else room // max(1, self.trainer.num_devices)

    def check_fit_start(self, from_checkpoint: bool) -> None:
        check_scst_start(self.objective.cfg, self.hparams.init_from, from_checkpoint)  # SCST from random weights

    def _start_vocabulary(self, dm, start: StartWeights, folded: list[str]) -> Vocabulary:
        """init_from's vocabulary (``folded``: its words renamed as the captions read them), extended with the train
        captions' new words (``model.init_vocab: extend``) or not, given to the data module; said in one line: what
        was added, and what the train captions say that the model will read as <unk> (a data.min_freq lower than the
        data's counts lets more in)."""
        extend = self.hparams.init_vocab == "extend"
        vocab = start.vocab.extended(dm.vocab) if extend else start.vocab
        dm.use_vocabulary(vocab)
        if self.trainer.is_global_zero:
            print(f"caption-train: {vocabulary_line(start, vocab, dm, extend, folded)}", file=sys.stderr)
        return vocab

    def _settle_jpeg_step(self, dm, stage: str | None) -> EncoderConfig:
        """model.encoder's JPEG step: what the training photos show when left auto (said in one line), or a value
        given by hand checked against them in fit (captioning.photos.jpeg_step: refused in one line when they contradict
        it). Here, before the network is built and the model summary printed; the hyper-parameters record it, so
        checkpoints and the model file keep it."""
        cfg = self.encoder_config
        auto = AUTO in (cfg.jpeg_quality, cfg.jpeg_subsampling)
        if not auto and (cfg.source_side is None or stage not in (None, "fit")):
            return cfg  # nothing squashed, or not training: a given value is the checkpoint's or the user's
        cfg, line = settled(cfg, dm.train_photo_format() if cfg.source_side is not None else PhotoFormat(None, None))
        if line and self.trainer.is_global_zero:
            print(f"caption-train: {line}", file=sys.stderr)
        self.hparams["encoder"] = asdict(cfg)
        return cfg

    def configure_callbacks(self) -> list:
        # the data module encodes each image once with this model's frozen encoder; RunState's: the process given
        # back after a run that raised
        return [*super().configure_callbacks(), FeatureCacheCallback()]

    def captioner(self, for_export: bool = False) -> Captioner:
        """The inference object over this module's model. for_export: it also records what the data was
        (``dm.domain``) and, when the training features are cached, where they lie (``dm.domain_check``), so
        ``caption`` can tell images far from them."""
        if not for_export:
            return Captioner(self.model, self.vocab)
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if dm is None and self._loaded_data is not None:  # load_from_checkpoint: the checkpoint's record of its data
            loaded = self._loaded_data
            exported = Captioner(self.model, self.vocab, loaded["domain"], loaded["domain_check"],
                                 dict(loaded["info"] or {}) or None)  # fmt: skip
            exported.casing = loaded["casing"]
            exported.encoder_tuned = loaded["encoder_fine_tuned"]
            return exported
        domain, check = getattr(dm, "domain", None), getattr(dm, "domain_check", None)
        facts = {**self._start_info, **getattr(dm, "facts", {})}  # this data's terms where both say
        if read := getattr(dm, "photos_read", None):  # your photos: how many it learned from (--model-info)
            facts["photos"] = f"{dm.domain}: {read}"
        exported = Captioner(self.model, self.vocab, domain, check, facts or None)
        exported.casing = getattr(dm, "casing", None)  # German captions' capitals (data.language)
        if self.model.encoder.fine_tune == "none":  # frozen here; its weights may be a fine-tuned start's
            exported.encoder_tuned = self._start_tuned
        return exported

    # --- training ---------------------------------------------------------------------------------------------------
    def on_train_start(self) -> None:
        super().on_train_start()
        if not getattr(self, "_one_val_said", True):  # the feature cache has left out val photos that cannot be read
            note = one_val_photo_line(self.trainer, self.trainer.datamodule)  # (after setup: the note there saw 2)
            self._one_val_said = note is not None
            if note and self.trainer.is_global_zero:
                print(f"caption-train: {note} (the val photos that cannot be read were left out)", file=sys.stderr)
        if not self.hparams.cuda_graphs or self._graphed is not None:
            return
        if self.device.type == "cuda":
            self._graphed = GraphedDecoder(self.model.decoder)
        elif self.trainer.is_global_zero:
            print(
                f"caption-train: model.cuda_graphs is ignored on {self.device.type}: CUDA graphs need a CUDA device "
                "(the decoder runs its usual loop)",
                file=sys.stderr,
            )

    def on_train_end(self) -> None:
        super().on_train_end()  # last.ckpt at the step the fit ended (RunState)
        if self._graphed is not None:  # the graphs' memory back to the allocator, the gradient hooks off
            self._graphed.close()
            self._graphed = None
        cache = self.objective.teacher_cache
        if cache is not None and self.trainer.is_global_zero and cache.computed:
            print(f"caption-train: the teacher's targets: {cache.served:,} pairs read from its cache, "
                  f"{cache.computed:,} made ({len(cache.rows):,} pairs kept, {cache.used / 1e9:.2f} GB)",
                  file=sys.stderr)  # fmt: skip
        self.objective.forget_teacher_targets()  # the memory back: validation and export need none of it

    def _features(self, batch: dict) -> torch.Tensor:
        """The batch's region features (B, L, D), one row per caption: cached; or through the encoder's trainable
        stages from stored frozen maps, or through the whole encoder from images, once per photo (``photo_of``: which
        photo each caption is of; the rows are repeated after the encoder, so its gradient sums over the captions)."""
        if "features" in batch:
            return batch["features"]
        if "frozen_maps" in batch:
            features = self.model.encoder.from_frozen_map(batch["frozen_maps"])  # (P, L, D)
        else:
            features = self.model.encode(batch["images"])  # (P, L, D)
        photo_of = batch.get("photo_of")
        return features if photo_of is None else features[photo_of]  # (B, L, D)

    def training_logs(self) -> frozenset[str]:
        """What :meth:`training_step` may log (the objective's names): lightning_parts.MonitorCheck reads it."""
        return self.objective.training_logs()

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor | None:
        if UNREADABLE_BATCH in batch:  # none of its photos could be read (the data module said which): no step
            return self._no_step()
        features = self._features(batch)
        forward = self._graphed
        if forward is not None:  # a few fixed shapes: captions padded to their length bucket (the same loss)
            batch = pad_to_bucket(batch, self.vocab.pad_id)
        loss, logs, warning = self.objective.training_loss(
            self.model, self.vocab, features, batch, self.global_step, forward
        )
        progress = {"train_loss", "train_reward"} if self.objective.cfg.scst else {"train_loss"}
        for name, value in logs.items():
            self.log(name, value, prog_bar=name in progress, batch_size=features.size(0))
        if warning:  # a caption-train line (a Python warning named this file and its line)
            say(f"caption-train: warning: {warning}")
        return loss

    def _no_step(self) -> torch.Tensor | None:
        """What a training step over no photo returns: None, which Lightning's automatic optimisation takes as "skip
        the step" (no backward, no optimizer update). Under DDP Lightning refuses None (every rank must join the
        gradients' all-reduce): a loss of 0 over every trainable weight, whose zero gradients add nothing to the
        other ranks' (Adam's moments still move once, as for any step)."""
        if self.trainer.world_size <= 1:
            return None
        return torch.stack([p.sum() for p in self.parameters() if p.requires_grad]).sum() * 0.0

    def configure_optimizers(self):
        groups = [{"params": list(self.model.decoder.parameters()), "lr": self.hparams.lr}]
        enc = [p for p in self.model.encoder.parameters() if p.requires_grad]
        if enc:
            groups.append({"params": enc, "lr": self.hparams.encoder_lr})
        # fused: one kernel per parameter group instead of a dozen passes per tensor (the same update; about 5% of a
        # paper-size CPU step), wherever Lightning allows it (fused_adam_allowed).
        optimizer = torch.optim.Adam(groups, fused=fused_adam_allowed(self._trainer))
        if self.hparams.lr_schedule == "budget":
            self._budget = BudgetProgress(self.trainer, saved=self._budget_saved)
            return {"optimizer": optimizer, "lr_scheduler": budget_scheduler(optimizer, self._budget)}
        if self.hparams.lr_patience is None:
            return optimizer
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode="max", factor=self.hparams.lr_factor, patience=self.hparams.lr_patience
        )
        # Lightning steps it after each validation, with the logged val_Bleu_4.
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": plateau, "monitor": "val_Bleu_4"}}

    # --- free-running evaluation ------------------------------------------------------------------------------------
    def _eval_step(self, batch: dict, stage: str) -> None:
        features = self._features(batch)
        # the loss's sums per photo, pooled over the split at the epoch's end (a mean of batch means moved with
        # data.batch_size); kept in each photo's output, so DDP's repeated photos count once
        sums = row_sums(self.objective.evaluation_sums(self.model, features, batch, self.vocab.pad_id))
        captions = self.captioner().caption_features(features, self.hparams.val_beam_size, self.hparams.val_max_len)
        for i, refs, (words, alphas, *_), row in zip(
            batch["image_index"].tolist(), batch["references"], captions, sums, strict=True
        ):
            self._outputs.append({"index": i, "refs": refs, "words": words, "alphas": alphas.cpu(), "sums": row})

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        if UNREADABLE_BATCH not in batch:  # a batch of unreadable photos only: the split is scored on the others
            self._eval_step(batch, "val")

    def test_step(self, batch: dict, batch_idx: int) -> None:
        if UNREADABLE_BATCH not in batch:
            self._eval_step(batch, "test")

    def _eval_epoch_end(self, stage: str) -> None:
        outs, self._outputs = gather_outputs(self._outputs), []  # the whole split, on every rank
        if not outs:
            return
        loss = self.objective.evaluation_loss(pooled_means(outs))
        self.log(f"{stage}_loss", loss, prog_bar=True)
        refs = {o["index"]: [" ".join(r) for r in o["refs"]] for o in outs}
        hyps = {o["index"]: " ".join(o["words"]) for o in outs}
        scores = coco_metrics(refs, hyps, meteor=self._meteor(refs))
        if stage == "val":  # the sanity check's, before the first step: the start's (a checkpoint's metric)
            start = {"val_loss": loss, **{f"val_{k}": v for k, v in scores.items()}}
            self._start.record(self.trainer, self.hparams.init_from, start, lambda: weights_digest(self))
        for name, value in scores.items():
            self.log(f"{stage}_{name}", value, prog_bar=name in ("Bleu_4", "CIDEr"))
        if stage == "test" and self.trainer.is_global_zero:  # the table below logs fractions; the docs give 0-100
            beam = self.hparams.val_beam_size
            print(f"caption-train: test, {len(outs)} photos, beam {beam}: {reported(scores)} (0-100, as "
                  "docs/results.md and caption --references give them)", file=sys.stderr)  # fmt: skip
        scenes = self.trainer.datamodule.scenes.get(stage)
        if scenes:
            g = self.model.encoder.grid
            result = grounding(
                [scenes[o["index"]] for o in outs], [o["words"] for o in outs], [o["alphas"] for o in outs], (g, g)
            )
            # No scored word (e.g. an untrained model naming no object) counts as 0, not nan, so "max" monitors work.
            self.log(f"{stage}_grounding", 0.0 if math.isnan(result.accuracy) else result.accuracy, prog_bar=True)
            self.log(f"{stage}_grounding_mass", 0.0 if math.isnan(result.mass) else result.mass)
            self.log(f"{stage}_grounding_words", float(result.words))

    def _meteor(self, refs: dict) -> bool | None:
        """coco_metrics' ``meteor``: model.val_meteor, but never on references that are not English (METEOR scores
        English: it gave German captions 0.01), said once a run, as ``caption --references`` leaves it out."""
        if self.hparams.val_meteor is False:
            return False
        if reads_as_english(r for rs in refs.values() for r in rs):
            return self.hparams.val_meteor
        if not self._said_meteor and self.trainer.is_global_zero:
            print("caption-train: note: no METEOR: the references are not English, and METEOR scores English",
                  file=sys.stderr)  # fmt: skip
        self._said_meteor = True
        return False

    def on_validation_epoch_end(self) -> None:
        self._eval_epoch_end("val")

    def on_test_epoch_end(self) -> None:
        self._eval_epoch_end("test")

    def predict_step(self, batch: dict, batch_idx: int) -> list[dict]:
        """``trainer.predict``: each test photo's caption, decoded as validation decodes (model.val_beam_size); none
        for a photo that cannot be read."""
        if UNREADABLE_BATCH in batch:
            return []
        captions = self.captioner().caption_features(
            self._features(batch), self.hparams.val_beam_size, self.hparams.val_max_len
        )
        index = batch["image_index"].tolist()
        return [{"index": i, "caption": " ".join(w)} for i, (w, *_) in zip(index, captions, strict=True)]

    # --- checkpoints -----------------------------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["vocab"] = self.vocab.to_dict()  # a checkpoint can be turned into a model file without the data
        exported = self.captioner(for_export=True)  # and caption-export keeps what the data was
        checkpoint["domain"], checkpoint["domain_check"] = exported.domain, exported.domain_check
        checkpoint["casing"] = exported.casing
        checkpoint["encoder_fine_tuned"] = exported.fine_tuned  # this run's, or its fine-tuned start's: exported too
        checkpoint["info"] = exported.info  # where it started and its data's terms: caption-export keeps them
        if self._budget is not None:
            checkpoint["lr_budget_progress"] = self._budget.last  # a resumed fit's max_time decays what is left
        checkpoint["collapse_monitor"] = self.objective.collapse_monitor.state_dict()  # hard attention's watch
        self.save_run_state(checkpoint)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        if any(k.startswith("baseline.") for k in checkpoint.get("state_dict", {})):
            raise ValueError(
                "this hard-attention checkpoint predates model.objective (its baseline is not where this version keeps "
                "it): it cannot be resumed; start from its model file with model.init_from"
            )
        trained = (checkpoint.get("hyper_parameters") or {}).get("encoder") or {}
        tuned, here = trained.get("fine_tune", "none"), self.encoder_config.fine_tune
        fitting = self._trainer is not None and self.trainer.state.fn == "fit"  # its optimiser's state restored next
        if fitting and tuned != here:  # other trainable stages: torch's "different number of parameter groups"
            raise ValueError(
                f"the checkpoint trained with model.encoder.fine_tune {tuned}, not {here}: resume with it, or start a "
                "new run from it with --model.init_from"
            )
        saved = Vocabulary.from_dict(checkpoint["vocab"]) if checkpoint.get("vocab") is not None else None
        if self.model is None:  # CaptionModule.load_from_checkpoint: no setup built the network (no data sized it)
            if saved is None:
                raise ValueError(
                    "this checkpoint keeps no vocabulary (written by an older caption-train) to build its network "
                    "from: load a model file with Captioner.load"
                )
            # the checkpoint's vocabulary and settings build it, undrawn, for its weights loaded next
            self.vocab = saved
            self.model = CaptionModel.build(len(saved), self.encoder_config, self.decoder_config, init=False)
            # and what its data was (no data module to ask): a model file saved from it keeps them, as caption-export
            keys = ("domain", "domain_check", "casing", "info", "encoder_fine_tuned")
            self._loaded_data = {k: checkpoint.get(k) for k in keys}
        if saved is not None and self.vocab is not None and saved != self.vocab:
            raise ValueError(
                f"the checkpoint's vocabulary ({len(saved)} words) differs from the one built from "
                f"the data ({len(self.vocab)} words): use the data settings the checkpoint was trained with"
            )
        self.load_run_state(checkpoint, network_built=self.model is not None)
        self._budget_saved = float(checkpoint.get("lr_budget_progress", 0.0))
        # resumed, it neither warns again nor restarts its average (an older checkpoint has none: left as it is)
        self.objective.collapse_monitor.load_state_dict(checkpoint.get("collapse_monitor"))

    # --- export -----------------------------------------------------------------------------------------------------
    def on_fit_end(self) -> None:
        SCRATCH.clear()  # the training steps' pooled buffers (a few hundred MB at the paper's size): not needed now
        where = "val photos (the start may caption them as well)"
        self.export_against_start(self._export, self._start, self._start_name or self.hparams.init_from, where,
                                  "caption-train", self.objective.cfg.scst, self._put_start)  # fmt: skip

    def _put_start(self) -> None:
        """init_from's weights in the model again, as setup gave them (read from its file; the new words' rows the
        mean rows)."""
        start = Captioner.read_start(self.hparams.init_from, self.hparams.init_member)
        Captioner.start_weights(start, self.model, self.vocab)

    def _export(self, path) -> None:
        """Write fit's model file (export_best calls it with the weights to export in the module). A fine-tuned
        encoder's domain check is made here, from those weights (:meth:`_tuned_check`); so is that of an encoder
        whose features no cache holds, from a sample of the photos (:meth:`_sampled_check`)."""
        exported = self.captioner(for_export=True)
        check = exported.domain_check
        if self.model.encoder.fine_tune != "none":
            check = self._tuned_check(check)
        stored = "train" in getattr(self.trainer.datamodule, "features", {})  # features or frozen maps of train
        if not stored and "prototypes" not in (check or {}):  # nothing stored to make a feature check from
            check = self._sampled_check(check)
        exported.domain_check = check
        exported.save(path)

    def _encoding(self, encode):
        """``encode`` (a tensor on the CPU -> the encoder's output) run in eval mode without gradients, on this
        module's device and weights' dtype (its mode put back after)."""
        enc = self.model.encoder

        def run(x: torch.Tensor) -> torch.Tensor:
            was_training = self.model.training
            self.model.eval()
            try:
                with torch.no_grad():
                    return encode(x.to(self.device, parameter_dtype(enc)))
            finally:
                self.model.train(was_training)

        return run

    def _tuned_check(self, check: dict | None) -> dict | None:
        """The domain check of this run's fine-tuned encoder: the stored frozen maps of the train and val photos
        through its trained stages (dm.domain_check_through), once, at export (each checkpoint's would cost a pass
        over every photo: checkpoints keep ``check``, the data module's, which for photos is their pixel rules alone).
        Where the maps are not stored, ``check``: :meth:`_sampled_check` makes one from the photos."""
        through = getattr(self.trainer.datamodule, "domain_check_through", None)
        if through is None:  # another data module: what it said
            return check
        return through(self._encoding(self.model.encoder.from_frozen_map)) or check

    def _sampled_check(self, check: dict | None) -> dict | None:
        """The domain check of an encoder that read the photos whole (fine_tune all, or no feature cache): up to 500
        train and 500 val photos encoded by the weights exported (captioning.training.domain_sample), said in a line
        (tens of seconds for a Flickr8k-sized run on 2 cores; a chunk folder of photos: its train samples read by
        index). ``check`` where the photos are not at hand (a folder of feature chunks holds its own check), with a
        line that the model file has no feature check."""
        dm = self.trainer.datamodule
        splits = getattr(dm, "splits", {})
        train, val = splits.get("train"), splits.get("val")
        train_images = train.images if train is not None else []
        if len(train_images) < 2 and (getattr(dm, "chunk_state", None) or {}).get("stores") == "jpeg":
            from captioning.training.streaming import ChunkImages

            # a chunk folder of photos streams train (no list of files): its samples read by index, as val's are
            # (one a caption, written shuffled: a photo of 5 captions may come twice in the sample, weighing twice)
            train_images = ChunkImages(dm.hparams.root, "train")
        if len(train_images) < 2:
            print("caption-train: note: the model file holds no check of the training photos' features: its encoder "
                  "read photos that no feature cache or list of files holds, so caption cannot tell photos unlike "
                  "them", file=sys.stderr)  # fmt: skip
            return check
        from captioning.training.domain_sample import SAMPLE, sampled_check

        started, enc = time.monotonic(), self.model.encoder
        # as caption will run the exported encoder (frozen): an EfficientNet-Lite folded (and in ONNX Runtime), the
        # same features to float rounding at about 4x the photos a second of the body that trained
        folds, enc.fold_for_inference = enc.fold_for_inference, enc.backbone in LITE
        held = val.images if val is not None else []
        if isinstance(train_images, list):  # a list of files: the photos mixed in, the last, set the threshold too
            from captioning.training.mixing import with_mixed_held_out

            train_images, held = with_mixed_held_out(train_images, list(held), getattr(dm, "mixed", 0))
        try:
            encode = self._encoding(self.model.encode)
            photos = getattr(dm, "photo_rules", dm.hparams.source != "shapes")  # another data module: by its source
            made = sampled_check(train_images, held, encode, dm.preprocess, photos=photos)
        finally:
            enc.fold_for_inference = folds
        count = min(len(train_images), SAMPLE) + min(len(held), SAMPLE)
        print(f"caption-train: the domain check (caption's note on photos unlike the training ones): {count} train and "
              f"val photos encoded in {time.monotonic() - started:.0f} s", file=sys.stderr)  # fmt: skip
        return made or check
