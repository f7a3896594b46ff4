"""Caption data: CaptionDataModule (sources, splits, vocabulary, batches; the feature cache and attention targets).

Sources:
  ``shapes``   synthetic scenes (captioning.training.shapes), train / val / test drawn with seeds seed, seed+1, seed+2;
               the Scene objects are kept (``dm.scenes[split]``) so validation can score attention grounding.
  ``karpathy`` the Karpathy-split JSON (captioning.training.readers.read_karpathy; "restval" counts as train),
               optionally with sentence boxes for attention supervision (Flickr30k-Entities style; the format, with an
               example, is in captioning.training.readers' docstring, "Boxes").
  ``flickr8k`` Flickr8k in its original layout or Kaggle's (captioning.training.readers.read_flickr8k).
  ``folder``   a folder of images + a TSV of ``filename<TAB>caption`` lines (captioning.training.readers.read_folder);
               the photos are ordered by a hash of the seed and each photo's name, and the first val_size are val, the
               next test_size test, the rest train: a photo's place follows from its name alone, not from the TSV's
               order or length, so re-sorting the file moves none and adding photos moves no train photo into val or
               test while the sizes stay (a second stage, or a run on a grown folder, is not scored on photos the
               first trained on).
Any source but the shapes may have photos mixed into its train split (``mix_root``: Flickr8k's train photos;
``mix_image_dir``: another folder), trained on and never held out (captioning.training.mixing); they are the last
``mixed`` of train, and the JPEG step recorded is the data's own photos' alone.
The file formats and their checks are captioning.training.readers'. Folder and Karpathy captions written with
capitals teach the model their casing (``casing``, as data.language de does for Flickr8k's photos).

With ``attention_targets: true`` (sources ``shapes`` and ``karpathy`` with boxes) every batch also carries
``attn_targets`` (B, T, L): for each output step t (aligned with ``targets``: step t predicts token t) that names a
region, the uniform distribution over the encoder grid cells inside its box(es) (captioning.training.attention_targets:
the cells whose centre lies in the box, on the grid that tiles the preprocessing's crop, as the grounding metric counts
them), else zeros; and ``attn_targets_mask`` (B, T) bool, True exactly on those steps. On shapes the words that name
an object are the shape nouns (``attention_words: nouns``), also their size and colour words (``all``), or every
word, those that name no object ("a", "left of", "there is") taking the object named next (``every``). The grid is
the encoder's: ``set_grid`` (the FeatureCacheCallback calls it with the model's encoder, next to the preprocessing).
Evaluation batches carry the targets of the first reference (the one their teacher-forced loss uses).

Training batches hold every (image, caption) pair, in batches of similar caption length (or, with
``photo_batches``, whole photos with all their captions: ``photo_of`` then maps each caption to its photo's row, so
the encoder runs once a photo); evaluation batches hold
one entry per image with all its references. Captions longer than ``max_caption_len`` words are TRUNCATED for
training (an image keeps all its captions); evaluation always uses the full references. The vocabulary comes from
the train captions only.

Preprocessing and the feature cache belong to the data module; it is given the model's encoder by the
FeatureCacheCallback (captioning.training.feature_cache), never called by the LightningModule, and imports no model.
With a frozen encoder and ``cache_features: true``, ``fill_feature_cache(encode_fn, preprocess, ...)`` preprocesses and
encodes every image of the requested splits once (or reads them from the disk cache of an earlier run), and batches
carry "features" (B, L, D) instead of "images" (B, 3, H, W). With a partly trainable encoder (``fine_tune: last``)
the cache holds each photo's frozen map instead, the output of the stages that stay frozen (N, C, h, w), and batches
carry "frozen_maps" (P, C, h, w), one per distinct photo. Cached features are stored in float16. Memory: N images
x L x D x 2 bytes -- fine for shapes and Flickr8k at 7 x 7, too much for COCO at 14 x 14 x 2048 (about 100 GB): leave
caching off there.

A photo that cannot be read (a truncated JPEG, an empty file) is left out, counted in one line, unless ``strict``:
cached, its split loses it once encoded (captioning.training.feature_cache); decoded as batches are drawn, its batch
goes without it (one line names it, once a run; it is not decoded again), and a batch left with no photo is the
marker ``{UNREADABLE_BATCH: entries}``, which CaptionModule's steps skip.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset

from captioning.photos.domain import FLAGGED, PIXELS_ONLY, domain_check
from captioning.photos.jpeg_step import ANY, JpegStep, PhotoFormat, photo_format
from captioning.photos.photo_check import count_unlike
from captioning.photos.preprocess import Preprocess
from captioning.training.attention_targets import TARGET_WORDS, caption_cells, scene_token_boxes
from captioning.training.domain_sample import spread
from captioning.training.feature_cache import (
    UNREADABLE_BATCH,
    cache_folder,
    fill_features,
    readable_photos,
    unreadable_rows,
)
from captioning.training.mixing import mixed_in, with_mixed_held_out
from captioning.training.multi30k import LANGUAGES, in_language
from captioning.training.readers import (
    APOSTROPHES,
    LAYOUTS,
    SPLITS,
    CaptionDataError,
    has_standard_split,
    read_flickr8k,
    read_folder,
    read_karpathy,
)
from captioning.training.shapes import Scene, make_scenes
from captioning.training.splits import CaptionSplit
from captioning.training.unread import unread_path
from text_attn.core.attention_supervision import dense_targets
from text_attn.core.batching import POOL_BATCHES, LengthBatchSampler, ResumableBatches, overfits, train_order
from text_attn.core.casing import learn_casing
from text_attn.core.data_note import note_facts
from text_attn.core.ranks import say
from text_attn.core.shm_workers import loader_workers
from text_attn.core.streaming import ChunkError, is_chunk_folder, streaming_loader, world_size_of
from text_attn.core.vocab import Vocabulary

SOURCES = ("shapes", "karpathy", "flickr8k", "folder")
# Default split sizes when a size is None: shapes scenes per split; folder val / test fraction.
_SHAPES_SIZES = {"train": 4000, "val": 500, "test": 500}
_FOLDER_FRACTION = 0.05
# train images judged against the pixel rules for photographs (photo_rules): 0.3 s for 200 of Flickr8k's copies;
# the shapes folder broke them in 106 of 200, far above the 4 allowed
PHOTO_RULES_SAMPLE = 200


# --- datasets and batches --------------------------------------------------------------------------------------------
class _Indices(Dataset):
    """Index-only dataset: the collate function gathers images / features / captions by index."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


def _pad(seqs: list[list[int]], pad_id: int) -> torch.Tensor:
    return torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first=True, padding_value=pad_id)


FLICKR8K_TERMS = (  # what a model trained on Flickr8k says of it (its file's info; benchmarks/flickr8k.py's too)
    "Flickr8k (Hodosh, Young and Hockenmaier 2013) is for non-commercial research and educational use only; the "
    "photographs are under the Flickr Terms of Use. This model was trained on it: the same terms apply to it."
)


def _held_out_order(seed: int, key: str) -> bytes:
    """Where a photo of a folder stands in the order val and test are taken from: a hash of the seed and its name (as
    read_folder keys it), so no other photo, and no line order, moves it."""
    return hashlib.sha256(f"{seed}\t{key}".encode()).digest()


def _mix_refusal(source: str, root, mix_root, mix_image_dir, mix_captions_tsv, mix_size) -> str | None:
    """Why the data.mix_* options cannot be read as given (captioning.training.mixing), or None."""
    if not (mix_root or mix_image_dir or mix_captions_tsv):
        if mix_size is None:
            return None
        return "data.mix_size is read with data.mix_root or data.mix_image_dir: name the photos to mix in"
    if source == "shapes":
        return "data.source shapes draws its scenes: photos are mixed into a folder, karpathy or flickr8k source"
    if mix_root and (mix_image_dir or mix_captions_tsv):
        return "data.mix_root (a Flickr8k folder) or data.mix_image_dir with data.mix_captions_tsv: one of the two"
    if not mix_root and not (mix_image_dir and mix_captions_tsv):
        return "data.mix_image_dir and data.mix_captions_tsv are read together (a folder of photos, its captions file)"
    if root and is_chunk_folder(root):
        return (f"data.root {root} is a chunk folder: its train photos are the ones it was written with (mix photos in "
                "when writing it: caption-train optimize ... --data.mix_root)")  # fmt: skip
    return None


def written_casing(items) -> dict | None:
    """The casing of captions as their writers wrote them (text_attn.core.casing.learn_casing of the items' raw
    text), so a model trained on them writes "Ein Hund" where its words are "ein hund"; None where they are all
    lowercase (nothing to learn) or no reader kept their text."""
    text = [raw.translate(APOSTROPHES) for it in items for raw in it.raw or []]  # its words as the vocabulary's
    return learn_casing(text) if any(t != t.lower() for t in text) else None


class CaptionDataModule(ResumableBatches, pl.LightningDataModule):
    def __init__(
        self,
        source: str = "shapes",
        karpathy_json: str | None = None,
        image_root: str | None = None,
        image_dir: str | None = None,
        captions_tsv: str | None = None,
        root: str | None = None,
        layout: str = "auto",
        language: str = "en",
        multi30k: str | None = None,
        mix_root: str | None = None,
        mix_image_dir: str | None = None,
        mix_captions_tsv: str | None = None,
        mix_size: int | None = None,
        strict: bool = False,
        train_size: int | None = None,
        val_size: int | None = None,
        test_size: int | None = None,
        scene_size: int = 128,
        max_objects: int = 3,
        seed: int = 0,
        min_freq: int = 1,
        max_caption_len: int = 50,
        captions_per_image: int | None = None,
        batch_size: int = 64,
        sort_by_length: bool = True,
        photo_batches: bool = False,
        num_workers: int = 0,
        cache_features: bool = False,
        feature_cache_dir: str | None = "auto",
        attention_targets: bool = False,
        attention_words: str = "nouns",
    ):
        """
        Args:
            source: ``shapes`` (synthetic), ``karpathy`` (needs karpathy_json, image_root), ``flickr8k`` (needs
                root: the dataset's folder) or ``folder`` (needs image_dir, captions_tsv); a path another source
                reads is refused (it would go unread).
            karpathy_json: the Karpathy-split JSON (dataset_coco.json, dataset_flickr8k.json, ...).
            image_root: folder that the JSON's filepath/filename are relative to.
            image_dir: the photo folder for ``folder`` (its subfolders too).
            captions_tsv: its captions file: ``filename<TAB>caption`` lines, or a ``.csv`` (``filename,caption``),
                gzipped or not; one line a caption, a photo's several on lines of their own.
            root: ``flickr8k``: the dataset's folder, in its original layout or Kaggle's (captioning.training.readers);
                or, for any source, a folder ``caption-train optimize`` wrote: its chunks are streamed
                (captioning.training.streaming; the vocabulary is the one it stored).
            layout: ``flickr8k``: ``auto`` (found from what root holds), ``original`` or ``kaggle``.
            language: ``flickr8k``: the captions' language: ``en`` (Flickr8k's own five a photo), or ``de``, ``fr``,
                ``cs``: the one sentence a photo that Multi30k translated from them, read from ``multi30k``
                (captioning.training.multi30k); the casing of its train sentences is learned for the captions.
            multi30k: the Multi30k folder (train.de.gz, ...), for a ``language`` other than ``en``.
            mix_root: a Flickr8k folder whose train photos are trained on beside the data's own, never validated or
                tested on (captioning.training.mixing): what a model taught a new kind of photo keeps of the everyday
                ones. mix_image_dir, mix_captions_tsv: any folder of photos and its captions file, mixed in instead.
            mix_size: how many of the photos to mix in (a seeded sample; None = all).
            strict: a missing image file, or one that cannot be read, is an error (default: skipped, with one line
                on stderr).
            train_size: shapes: scenes (default 4000); karpathy, flickr8k, folder: cap on train images (None = all).
            val_size: shapes: scenes (default 500); karpathy, flickr8k: cap (None = all); folder: images held out
                (default 5%, at least 2 where 2 are left to train on). test_size: likewise for test (0: ``test``
                is refused, having nothing to score; val_size 0: refused, as there is nothing to validate on).
            scene_size: shapes canvas side in pixels (the network's input side is model.encoder.image_size).
                max_objects: shapes objects per scene (1..4).
            seed: shapes uses seed, seed+1, seed+2 for train / val / test; also orders folder photos (module doc),
                draws a Flickr8k copy's split where it has no split files, and shuffles batches.
            min_freq: words seen fewer times in the train captions become <unk>.
            max_caption_len: training captions longer than this are truncated to it (eos follows).
            captions_per_image: train on only the first k captions of each image (None = all of them).
            batch_size: (image, caption) pairs per training batch; images per evaluation batch.
            sort_by_length: train batches of captions of similar length (each pool of 50 batches sorted by length:
                little padding); false: each batch holds pairs drawn at random, as a chunk folder's always do.
                Similar lengths are similar captions in a corpus whose length follows its content (the rehearsal's
                scenes): there false trains faster (benchmarks/streaming_scores.py).
            photo_batches: a training batch holds whole photos with all their captions (about batch_size captions:
                batch_size / captions per photo photos), drawn at random each epoch; the encoder runs once per photo
                for all its captions. For a fine-tuned encoder, whose every pass costs a CNN forward and backward.
                sort_by_length is then unused.
            num_workers: DataLoader worker processes (0 = load in the main process).
            cache_features: encode every image once when the encoder is frozen (see the module doc).
            feature_cache_dir: where cached features persist between runs (captioning.training.feature_cache): ``auto``
                = ``<trainer.default_root_dir>/feature_cache``; null = in memory only, re-encoded by every run.
            attention_targets: batches also carry ``attn_targets`` (B, T, L) and ``attn_targets_mask`` (B, T), the
                ground-truth attention of the words that name a region (module doc; shapes, or karpathy with boxes).
            attention_words: shapes: which words get a target: ``nouns`` (shape words), ``all`` (also size and
                colour words) or ``every`` (all words; a word naming no object: the object named next).
        """
        super().__init__()
        if source not in SOURCES:
            raise CaptionDataError(f"unknown caption source {source!r}; choose one of {', '.join(SOURCES)}")
        paths = {"karpathy_json": karpathy_json, "image_root": image_root, "image_dir": image_dir,
                 "captions_tsv": captions_tsv}  # fmt: skip
        if refusal := unread_path(source, paths):  # your photos beside the default source: a model of the shapes
            raise CaptionDataError(refusal)
        if layout not in LAYOUTS:  # read only by source flickr8k, so said at its read: a typo went through elsewhere
            raise CaptionDataError(f"unknown data.layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
        if attention_words not in TARGET_WORDS:
            raise CaptionDataError(f"unknown attention_words {attention_words!r}; choose one of {sorted(TARGET_WORDS)}")
        if language not in LANGUAGES:
            raise CaptionDataError(f"unknown data.language {language!r}; choose one of {', '.join(LANGUAGES)}")
        if language != "en" and (source != "flickr8k" or not multi30k):
            raise CaptionDataError(
                f"data.language {language} reads Multi30k's {LANGUAGES[language]} sentences for Flickr8k's photos: "
                "set data.source flickr8k and data.multi30k (the Multi30k folder: train.de.gz, ...)"
            )
        if multi30k and language == "en":
            raise CaptionDataError("data.multi30k is read for a data.language other than en (de, fr or cs)")
        if refusal := _mix_refusal(source, root, mix_root, mix_image_dir, mix_captions_tsv, mix_size):
            raise CaptionDataError(refusal)
        if attention_targets and source == "folder":
            raise CaptionDataError("attention_targets needs boxes: use source shapes, or karpathy with sentence boxes")
        # counts and sizes out of range: refused here in the option's name, not later as a tensor error
        at_least = {"train_size": (train_size, 1), "val_size": (val_size, 0), "test_size": (test_size, 0),
                    "batch_size": (batch_size, 1), "num_workers": (num_workers, 0), "min_freq": (min_freq, 1),
                    "max_caption_len": (max_caption_len, 1), "captions_per_image": (captions_per_image, 1),
                    "mix_size": (mix_size, 1), "scene_size": (scene_size, 64),
                    "max_objects": (max_objects, 1)}  # fmt: skip
        for name, (value, low) in at_least.items():
            if value is not None and value < low:
                raise CaptionDataError(f"data.{name} must be at least {low}, got {value}")
        # the scene maker's own bounds (captioning.training.shapes.make_scene), said in the option's name
        for name, value, high in (("scene_size", scene_size, 512), ("max_objects", max_objects, 4)):
            if value is not None and value > high:
                raise CaptionDataError(f"data.{name} must be at most {high}, got {value}")
        if root and source != "flickr8k" and not is_chunk_folder(root):  # said before the Trainer is made, not after
            raise CaptionDataError(f"data.root {root}: not a chunk folder (caption-train optimize writes one); source "
                                   f"{source} reads no data.root")  # fmt: skip
        self.save_hyperparameters()
        self.vocab: Vocabulary | None = None
        self.splits: dict[str, CaptionSplit] = {}
        self._held_names: list[str] | None = None  # held_out's, as the splits were read
        self.scenes: dict[str, list[Scene]] = {}
        self.features: dict[str, torch.Tensor] = {}  # split -> (N, L, D) float16, once cached
        # split -> the fingerprint of the encoder its features came from (fill_feature_cache; None: not given)
        self.feature_keys: dict[str, str | None] = {}
        self.preprocess: Callable = Preprocess()
        self._train_pairs: list[tuple[int, list[int]]] = []  # (image index, caption ids without bos/eos)
        self._train_caption: list[int] = []  # per train pair: which caption of its image it is
        self._photo_pairs: list[list[int]] = []  # per train image: its pairs (photo_batches)
        self.grid: tuple[int, int] | None = None  # the encoder's (gh, gw), for attention targets (set_grid)
        self._cells: dict[tuple[str, int, int], list[tuple[int, list[int]]]] = {}  # attention targets, sparse
        self._unreadable: dict[str, torch.Tensor] = {}  # split -> (N,) uint8: its photos found unreadable (_known_bad)
        self._domain_check: dict | None = None
        self.mixed, self.mixed_said = 0, ""  # the train photos mixed in (the last of train), and what they are
        self._said_cut = False  # the note on captions cut to max_caption_len, said once
        self.chunk_state: dict | None = None  # a chunk folder's data_state.pt (captioning.training.streaming)
        self._photo_format: PhotoFormat | None = None  # the train photos' JPEG step and side, once read
        self._photo_rules: bool | None = None  # whether the pixel rules for photographs suit them, once judged
        # the captions' casing (text_attn.core.casing.learn_casing of the raw train sentences; None: write them
        # lowercase): a model trained on German captions writes "Ein Hund" where the words are "ein hund"
        self.casing: dict | None = None

    @property
    def streams(self) -> bool:
        """Whether data.root is a chunk folder (``caption-train optimize``'s): the train split is streamed from it."""
        return is_chunk_folder(self.hparams.root)

    @property
    def domain(self) -> str:
        """What the images are, in words: model files record it (``caption`` names it in its notes)."""
        hp = self.hparams
        if self.chunk_state is not None:
            return str(self.chunk_state["domain"])
        if hp.source == "shapes":
            return "synthetic shapes"
        if hp.source == "flickr8k":
            return "Flickr8k"
        # a folder: its name alone ("my_photos"), never the path it was given (no machine's path in a model file);
        # the notes read 'the photos in "my_photos" the model learned from' (Captioner.known)
        return Path(hp.karpathy_json).stem if hp.source == "karpathy" else Path(hp.image_dir).resolve().name

    @property
    def facts(self) -> dict[str, str]:
        """What model files trained on this data record of it (``caption --model-info`` prints them): for Flickr8k,
        what it is and its terms (the data's README: a model trained on it must say so), in English or with another
        language's captions; for other data, only what was mixed in (:attr:`mixed_facts`; a folder's own terms are the
        user's to state: caption-export --info)."""
        hp = self.hparams
        mixed = self.chunk_state.get("mixed", {}) if self.chunk_state is not None else self.mixed_facts
        if hp.source != "flickr8k":
            return mixed
        split = self.flickr8k_split
        # a random split is said (captioning.training.readers.split_clash reads it): a run from this model on
        # another split of Flickr8k would be scored on photos it trained on
        drawn = f", in {split}, not the standard one" if split not in (None, "the standard split") else ""
        if hp.language == "en":
            # a folder whose train captions are not the annotators' (a teacher's: data-note.txt) says so beside
            return {
                "training_data": "Flickr8k (Hodosh, Young and Hockenmaier 2013): its photographs and English captions"
                + drawn,
                "terms": FLICKR8K_TERMS,
                **note_facts(hp.root),
                **mixed,
            }
        return {
            "training_data": f"Flickr8k's photos with Multi30k's {LANGUAGES[hp.language]} sentences (one a photo)"
            + drawn,
            "terms": "Flickr8k and Multi30k are for non-commercial research and education; the photographs are under "
            "the Flickr Terms of Use",
            **note_facts(hp.root),
            **{k: v for k, v in mixed.items() if k != "terms"},
        }

    @property
    def photos_read(self) -> str | None:
        """For your photos (a folder, a Karpathy JSON; read, not streamed from chunks), each split's photos and
        captions in words ("10 train photos (50 captions), 1 val, 1 test"; the photos mixed into train, data.mix_*,
        counted apart): fit says it as it starts and the model file records it (``photos:``). Flickr8k's too where a
        data.train_size / val_size / test_size cut its split (a model fine-tuned on 64 of its photos said "trained on:
        Flickr8k" alone). None for other data."""
        hp = self.hparams
        cut = hp.source == "flickr8k" and any(n is not None for n in (hp.train_size, hp.val_size, hp.test_size))
        if (hp.source not in ("folder", "karpathy") and not cut) or self.streams or "train" not in self.splits:
            return None
        train = self.splits["train"]
        own = len(train.images) - self.mixed
        captions = sum(len(refs) for refs in train.references[:own])
        held = ", ".join(f"{len(self.splits[s].images):,} {s}" for s in ("val", "test") if s in self.splits)
        mixed = f" and {self.mixed:,} mixed in" if self.mixed else ""
        return f"{own:,} train photo{'s' * (own != 1)} ({captions:,} caption{'s' * (captions != 1)}){mixed}, {held}"

    @property
    def mixed_facts(self) -> dict[str, str]:
        """What model files record of the photos mixed in (data.mix_*): what they are, and Flickr8k's terms where they
        are its photos ({} where none are); a chunk folder written with them keeps them
        (captioning.training.streaming)."""
        mixed = {"mixed_in": self.mixed_said} if self.mixed_said else {}
        if self.hparams.mix_root:  # Flickr8k's photos trained on: its terms, whatever the data's own
            mixed["terms"] = FLICKR8K_TERMS
        return mixed

    @property
    def flickr8k_split(self) -> str | None:
        """Which split of Flickr8k this data reads: "the standard split" (its split files), "a random split (seed
        N)" (a copy without them: captioning.training.readers.read_flickr8k); None for other data, or a chunk folder."""
        hp = self.hparams
        if hp.source != "flickr8k" or not hp.root or self.streams:
            return None
        return "the standard split" if has_standard_split(hp.root, hp.layout) else f"a random split (seed {hp.seed})"

    @property
    def domain_check(self) -> dict | None:
        """Prototypes of the cached train features and a threshold set on the cached val features (or, when val is
        not cached, on a tenth of train held out) (captioning.photos.domain.domain_check), computed once when first
        asked. While the train split's features are not cached (frozen maps: :meth:`domain_check_through`), photos'
        pixel rules alone (captioning.photos.domain.PIXELS_ONLY; None for the shapes). Cached splits never change,
        so neither does this."""
        if self._domain_check is not None:
            return self._domain_check or None  # or a feature chunk folder's, made when it was written; {}: none
        train = self.features.get("train")
        if train is None or len(train) < 2 or train.dim() != 3:  # frozen maps: not the model's features, no check
            return dict(PIXELS_ONLY) if self.photo_rules else None
        self._domain_check = self.check_of(train, self.features.get("val")) or {}  # {}: too few
        return self._domain_check or None

    def check_of(self, train: torch.Tensor, val: torch.Tensor | None) -> dict | None:
        """The domain check (captioning.photos.domain.domain_check) of this data's train and val features ((N, L, D);
        their mean features will do), as every path that makes one sets it: every tenth photo mixed in held out beside
        val, so the threshold is set on both kinds (captioning.training.mixing.with_mixed_held_out), and the pixel
        rules where they suit the data's own images (:attr:`photo_rules`). None: too few photos for a check."""
        train, val = with_mixed_held_out(train, val, self.mixed)
        return domain_check(train, val, photos=self.photo_rules)

    @property
    def photo_rules(self) -> bool:
        """Whether the model's domain check also applies the pixel rules for photographs (captioning.photos.
        photo_check): not for the shapes, nor for data whose own train images break them more often than the check
        may flag (FLAGGED, 2%; and more than one of them): drawings, diagrams, scans (a shapes folder's model noted
        half of its own scenes). Judged once on up to PHOTO_RULES_SAMPLE of them, spread evenly, the photos mixed in
        left out; said when it turns them off. A chunk folder recorded it when it was written (older ones: on)."""
        if self._photo_rules is None:
            if self.hparams.source == "shapes":
                return False
            if self.chunk_state is not None:
                return bool(self.chunk_state.get("photo_rules", True))
            if "train" not in self.splits:  # nothing to judge yet (not set up): as a photo model, unkept
                return True
            self._photo_rules = self._judge_photo_rules()
        return self._photo_rules

    def _judge_photo_rules(self) -> bool:
        own = self.splits["train"].images
        broken, read = count_unlike(spread(own[: len(own) - self.mixed], PHOTO_RULES_SAMPLE))
        # one image alone never turns them off: in a folder of 35 photos one 1 x 1 file (2.9%) did, and the model then
        # captioned a flat grey image and a 1 x 1 one without the note its rules give them
        if broken <= max(FLAGGED * read, 1):
            return True
        say(f"caption data: {broken} of {read} train images looked at break the rules for photographs (one colour "
            "over most of the image, no colour, or noise): the model will tell images unlike its own by their "
            "features alone")  # fmt: skip
        return False

    def domain_check_through(self, encode_maps: Callable[[torch.Tensor], torch.Tensor], batch: int = 64) -> dict | None:
        """The domain check (:attr:`domain_check`) of a partly trainable encoder, whose cache holds each photo's frozen
        map (P, C, h, w), not its features: the stored train and val maps through ``encode_maps`` (its trained stages,
        -> (P, L, D)), ``batch`` photos at a time, each photo's mean feature kept (all the check reads:
        captioning.photos.domain.summaries), so memory holds (N, D). None while train's maps are not stored; {}: too
        few photos for a check (captioning.photos.domain.domain_check's None). Made anew at each call: the stages it
        runs train."""
        train, val = self.features.get("train"), self.features.get("val")
        if train is None or len(train) < 2 or train.dim() != 4:
            return None

        def means(maps: torch.Tensor) -> torch.Tensor:  # (N, C, h, w) -> (N, 1, D)
            out = [encode_maps(maps[i : i + batch].float()).float().mean(dim=1) for i in range(0, len(maps), batch)]
            return torch.cat(out).cpu()[:, None]

        held_out = means(val) if val is not None and val.dim() == 4 and len(val) else None
        return self.check_of(means(train), held_out) or {}

    def train_photo_format(self) -> PhotoFormat:
        """The train photos' one JPEG step and one side (captioning.photos.jpeg_step), read once: as a chunk folder
        recorded them when it was written (its photos are not files to read), else from the files' headers."""
        if self._photo_format is None:
            state = self.chunk_state
            if state is not None and "jpeg_step" in state:
                step = JpegStep(*state["jpeg_step"]) if state["jpeg_step"] else None
                self._photo_format = PhotoFormat(step, state.get("photo_side", ANY), state.get("photo_why", ""))
            else:
                own = self.splits["train"].images  # the photos mixed in are not the ones the model will caption
                self._photo_format = photo_format(own[: len(own) - self.mixed])
        return self._photo_format

    # --- loading ------------------------------------------------------------------------------------------------------
    def _load(self) -> dict[str, CaptionSplit]:
        hp = self.hparams
        if hp.val_size == 0:  # every source, the shapes too, before any is read: not "no val images" of one with some
            raise CaptionDataError("data.val_size is 0: nothing to validate on")
        if hp.source == "shapes":
            out = {}
            for k, split in enumerate(SPLITS):
                n = getattr(hp, f"{split}_size")
                scenes = make_scenes(
                    _SHAPES_SIZES[split] if n is None else n, hp.seed + k, hp.scene_size, hp.max_objects
                )
                out[split] = CaptionSplit([s.image for s in scenes], [s.captions for s in scenes], scenes)
            return out
        if hp.source == "flickr8k":
            if not hp.root:
                raise CaptionDataError("source 'flickr8k' needs data.root (the Flickr8k folder)")
            items = read_flickr8k(hp.root, hp.layout, hp.seed)
            if hp.language != "en":
                translated = in_language(items, hp.multi30k, hp.language)
                say(f"caption data: {translated.line}")
                folded = [text.translate(APOSTROPHES) for text in translated.train_text]  # as the words are read
                items, self.casing = translated.items, learn_casing(folded)
            for split in SPLITS:
                cap = getattr(hp, f"{split}_size")  # 0 is none (refused below, or by test), not all
                items[split] = items[split][:cap] if cap is not None else items[split]
        elif hp.source == "karpathy":
            if not hp.karpathy_json or not hp.image_root:
                raise CaptionDataError("source 'karpathy' needs data.karpathy_json and data.image_root")
            items = read_karpathy(hp.karpathy_json, hp.image_root, hp.strict)
            for split in SPLITS:
                cap = getattr(hp, f"{split}_size")
                items[split] = items[split][:cap] if cap is not None else items[split]
        else:
            if not hp.image_dir or not hp.captions_tsv:
                raise CaptionDataError("source 'folder' needs data.image_dir and data.captions_tsv")
            pool = read_folder(hp.image_dir, hp.captions_tsv, hp.strict)
            # by name, not by line (module doc): a shuffle of the file's order moved every held-out photo when one
            # photo was added, and a second stage was validated and tested on photos the first trained on
            pool.sort(key=lambda it: _held_out_order(hp.seed, it.key))
            # at least two photos each where that leaves two to train on: CIDEr over one photo is 0 whatever the
            # caption (every n-gram's IDF is log(1/1)), and val_CIDEr then keeps epoch 0
            least = 2 if len(pool) >= 6 else 1
            default = max(least, round(_FOLDER_FRACTION * len(pool)))
            n_val = default if hp.val_size is None else hp.val_size
            n_test = default if hp.test_size is None else hp.test_size
            if len(pool) <= n_val + n_test:
                raise CaptionDataError(
                    f"{hp.captions_tsv}: {len(pool)} images are too few for val_size={n_val} and test_size={n_test}"
                )
            items = {"val": pool[:n_val], "test": pool[n_val : n_val + n_test], "train": pool[n_val + n_test :]}
            items["train"] = items["train"][: hp.train_size] if hp.train_size else items["train"]
        if hp.source in ("folder", "karpathy"):  # your own captions, as written: German nouns keep their capitals
            self.casing = written_casing(items["train"])
        for split in ("train", "val"):
            if not items[split]:
                raise CaptionDataError(f"{hp.root or hp.karpathy_json or hp.captions_tsv}: no {split} images")
        if hp.mix_root or hp.mix_image_dir:  # train photos never held out, after the data's own (self.mixed)
            mix, self.mixed_said = mixed_in(items, hp.mix_root, hp.layout, hp.mix_image_dir, hp.mix_captions_tsv,
                                            hp.mix_size, hp.seed, hp.strict)  # fmt: skip
            items["train"], self.mixed = items["train"] + mix, len(mix)
        out = {}
        for s, v in items.items():
            boxed = any(it.boxes is not None for it in v)
            boxes = [it.boxes or [[] for _ in it.captions] for it in v] if boxed else None
            out[s] = CaptionSplit([it.path for it in v], [it.captions for it in v], None, boxes, [it.size for it in v])
        if hp.attention_targets and out["train"].boxes is None:
            raise CaptionDataError(
                f"{hp.karpathy_json}: attention_targets needs sentence 'boxes', and no train sentence has any"
            )
        return out

    def drawn_split(self) -> bool:
        """A folder of photos: val and test drawn from it by data.val_size, test_size, seed."""
        return self.hparams.source == "folder"

    def folders_made(self, root: str | Path | None) -> list[str]:
        """The folders a fit with this data makes of its own before it trains (text_attn.core.unused_runs.run_folders):
        its feature cache (data.feature_cache_dir; "auto" under the run's ``root``)."""
        folder = cache_folder(self.hparams.feature_cache_dir, root)
        return [folder] if folder else []

    def held_out(self) -> list[str] | None:
        """The val and test photos' file names (ResumableBatches: a resume tells whether they are the checkpoint's
        run's), as the splits were read: photos that cannot be read leave them later, at the fit's start (a resume
        compares before that, a save comes after); None for a split of photos made in memory (shapes) or streamed."""
        if self._held_names is None:
            self._held_names = self._split_names()
        return self._held_names or None

    def _split_names(self) -> list[str]:
        names = []
        for split in ("val", "test"):
            for image in self.splits[split].images if split in self.splits else ():
                if not isinstance(image, (str, Path)):
                    return []
                names.append(f"{split}:{Path(image).name}")
        return names

    def setup(self, stage: str | None = None) -> None:
        self._load_splits()
        test = self.splits.get("test")
        if stage in ("test", "predict") and (test is None or not test.images):
            hp = self.hparams  # Lightning would score nothing and only say its loader is empty
            why = "data.test_size is 0" if hp.test_size == 0 else f"{hp.karpathy_json or hp.root} has none"
            raise CaptionDataError(f"no test photos: {why}")

    def _load_splits(self) -> None:
        if self.splits:
            return
        if self.streams:
            from captioning.training.streaming import load_chunks

            load_chunks(self)  # vocabulary, val and test; train streams
            return
        self.splits = self._load()
        self._held_names = self._split_names()  # before any photo leaves them (held_out)
        self.scenes = {s: sp.scenes for s, sp in self.splits.items() if sp.scenes is not None}
        hp = self.hparams
        train = self.splits["train"].references
        self.vocab = Vocabulary.build((c for caps in train for c in caps[: hp.captions_per_image]), hp.min_freq)
        self._encode_train()

    def _encode_train(self) -> None:
        """The (image, caption ids) training pairs, in the vocabulary's ids; which caption of its photo each is, and
        each photo's pairs."""
        hp, train = self.hparams, self.splits["train"].references
        self._train_pairs = [
            (i, self.vocab.encode(c[: hp.max_caption_len], eos=False))
            for i, caps in enumerate(train)
            for c in caps[: hp.captions_per_image]
        ]
        self._train_caption = [k for caps in train for k in range(len(caps[: hp.captions_per_image]))]
        self._photo_pairs = [[] for _ in train]  # per train photo, the indices of its (image, caption) pairs
        for i, (image, _) in enumerate(self._train_pairs):
            self._photo_pairs[image].append(i)
        self.say_cut(train)

    def say_cut(self, train: list[list[list[str]]]) -> None:
        """One note counting the training captions longer than data.max_caption_len, which training cuts to it
        (here and as chunks stream: captioning.training.streaming); said once (a run started from a model encodes
        them again)."""
        hp = self.hparams
        cut = [c for caps in train for c in caps[: hp.captions_per_image] if len(c) > hp.max_caption_len]
        if cut and not self._said_cut:
            self._said_cut = True
            longest = max(map(len, cut))
            say(f"caption data: {len(cut)} training caption(s) longer than data.max_caption_len="
                f"{hp.max_caption_len} words are cut to it (the longest: {longest} words): raise it to learn them "
                "whole")  # fmt: skip

    def use_vocabulary(self, vocab: Vocabulary) -> None:
        """Train with ``vocab`` instead of the one built from the train captions: a run that starts from a model
        (``model.init_from``) keeps that model's words at their ids, and CaptionModule gives it here, extended with
        this data's new words or not (``model.init_vocab``). The train captions are encoded with it again (a chunk
        folder's are encoded as they stream, with ``self.vocab``)."""
        self.vocab = vocab
        if not self.streams and "train" in self.splits:
            self._encode_train()

    @property
    def train_references(self) -> list[list[list[str]]]:
        """Per training image, its captions as token lists (SCST's CIDEr-D takes its document frequencies here)."""
        return self.splits["train"].references

    # --- features -----------------------------------------------------------------------------------------------------
    def set_preprocess(self, preprocess: Callable) -> None:
        """How images become network input (the encoder's Preprocess); image batches use it."""
        if preprocess != self.preprocess:
            self._cells.clear()  # its crop box decides which cells a box covers
        self.preprocess = preprocess

    def set_grid(self, grid: int | tuple[int, int]) -> None:
        """The encoder's region grid (side, or (rows, cols)): attention targets are distributions over its cells."""
        grid = (int(grid), int(grid)) if isinstance(grid, int) else (int(grid[0]), int(grid[1]))
        if grid != self.grid:
            self._cells.clear()
        self.grid = grid

    def drop_features(self, unless: str | None = None) -> list[str]:
        """Drop the cached splits whose features an encoder of another fingerprint than ``unless`` made (None: every
        split cached with a fingerprint), so that their photos are encoded again: a second fit of this data module
        with another backbone, image size or grid, or one whose batches carry photos (a trainable encoder,
        ``fast_dev_run``). Features put here without a fingerprint, and a chunk folder's, are kept: nothing says
        whose they are. Returns the splits dropped."""
        stale = [s for s, key in self.feature_keys.items() if key and key != unless]
        for split in stale:
            del self.features[split], self.feature_keys[split]
        if stale:
            self._domain_check = None  # made from the dropped features
        return stale

    def fill_feature_cache(
        self,
        encode_fn: Callable[[torch.Tensor], torch.Tensor],
        preprocess: Callable | None = None,
        splits: Sequence[str] | None = None,
        batch_size: int = 16,
        progress: bool | Callable[[str], None] = True,
        cache_dir: str | Path | None = None,
        fingerprint: str | None = None,
    ) -> list[str]:
        """Encode every image of ``splits`` (default: all) once: (B, 3, H, W) -> encode_fn -> (B, L, D) float16
        (captioning.training.feature_cache.fill_features).

        Splits already cached are skipped (so fit, then test, encode each image once), unless their features came
        from an encoder with another ``fingerprint`` (captioning.training.feature_cache: a second fit of this data
        module with another backbone, image size or grid): those are encoded again. With ``cache_dir`` and the
        fingerprint, a split found on disk is loaded instead, and a split encoded here is written there. The features
        must come from a frozen encoder: caching assumes they never change during training. Returns the splits that
        were encoded (not loaded). Batches of 16: the channels-last EfficientNet runs about twice as fast an image on a
        CPU as in batches of 64 (its activations stay in cache).
        """
        if preprocess is not None:
            self.preprocess = preprocess
        if fingerprint:  # in memory a split is known by its name alone: another encoder's features are not trained on
            self.drop_features(unless=fingerprint)
        if self.streams:  # the train split streams; chunks of features bring their own
            state = self.chunk_state or {}
            if state.get("fingerprint") and fingerprint and fingerprint != state["fingerprint"]:
                raise ChunkError(
                    f"{self.hparams.root} holds the features of another encoder (or other preprocessing) than "
                    "model.encoder: optimize again with this config"
                )
            splits = [s for s in (splits or self.splits) if s != "train" and s not in self.features]
            cache_dir = None  # the images are chunk samples, not files a cache key can name
            if not splits:
                return []
        images = {s: self.splits[s].images for s in (splits or self.splits) if s in self.splits}
        had = set(self.features)
        done = fill_features(
            self.features,
            images,
            encode_fn,
            self.preprocess,
            batch_size,
            self.hparams.num_workers,
            progress,
            cache_dir,
            fingerprint,
            self.hparams.strict,
        )
        for split in set(self.features) - had:
            self._leave_out(split, unreadable_rows(self.features[split]))
        self.feature_keys.update({split: fingerprint for split in self.features if split not in had})
        return done

    def _leave_out(self, split: str, rows: list[int]) -> None:
        """Photos ``rows`` of ``split`` could not be read when they were encoded (fill_features counted them): the
        split goes on without them, their features and their captions. The vocabulary stays (the model was built with
        it)."""
        if not rows:
            return
        gone = set(rows)
        keep = [i for i in range(len(self.splits[split].images)) if i not in gone]
        if split == "train" and self.mixed:  # the mixed-in photos are train's last: count those left out of them
            first_mixed = len(self.splits[split].images) - self.mixed
            lost = sum(1 for i in gone if i >= first_mixed)
            if lost:  # the model file said "6 mixed in" of 5, and its own photos one fewer than it trained on
                self.mixed -= lost
                self.mixed_said += f" ({lost:,} of them unreadable, left out)"
        sp = self.splits[split]
        fields = (sp.images, sp.references, sp.scenes, sp.boxes, sp.sizes)
        self.splits[split] = CaptionSplit(*(None if v is None else [v[i] for i in keep] for v in fields))
        self.features[split] = self.features[split][keep]
        self._unreadable.pop(split, None)  # its rows are renumbered
        if self.splits[split].scenes is not None:
            self.scenes[split] = self.splits[split].scenes
        self._cells.clear()
        self._domain_check = None
        if split == "train":
            self._encode_train()

    def _readable(self, split: str, index: list[int], photo: Callable[[int], int]) -> tuple[list[int], dict]:
        """The entries of ``index`` whose photo (``photo(entry)``) can be read, and those photos prepared, when the
        batch decodes its photos (no cached features): one that cannot is left out (or refused by data.strict); none
        may be left (the collate then makes an UNREADABLE_BATCH)."""
        if split in self.features:
            return index, {}
        hp, images, known = self.hparams, self.splits[split].images, self._known_bad(split)
        decoded = readable_photos(images, [photo(i) for i in index], self.preprocess, hp.strict, split, known)
        return [i for i in index if photo(i) in decoded], decoded

    def _known_bad(self, split: str, shared: bool = False) -> torch.Tensor:
        """(N,) uint8 flags of the ``split`` photos found unreadable so far in this run (readable_photos of
        captioning.training.feature_cache sets them): such a photo is named once and not decoded again. ``shared``
        (a loader with workers is made): in shared memory, so that what one worker finds, the others, the main
        process and the next epoch's workers know."""
        n = len(self.splits[split].images)
        flags = self._unreadable.get(split)
        if flags is None or len(flags) != n:
            flags = self._unreadable[split] = torch.zeros(n, dtype=torch.uint8)
        if shared and not flags.is_shared():
            flags.share_memory_()  # in place, its flags kept
        return flags

    def _visual(self, split: str, index: list[int], decoded: dict[int, torch.Tensor]) -> dict[str, torch.Tensor]:
        """What the encoder needs for the photos ``index`` (one per caption of the batch): cached region features
        (B, L, D); or, once per distinct photo, stored frozen maps (P, C, h, w) or images (P, 3, H, W) (``decoded``:
        photo -> its tensor, from _readable) with ``photo_of`` (B,) naming each caption's row, so a photo's captions
        share one pass of the trainable stages."""
        feats = self.features.get(split)
        if feats is not None and feats.dim() == 3:
            return {"features": feats[index].float()}  # (B, L, D)
        if feats is None and not self.hparams.photo_batches:
            return {"images": torch.stack([decoded[i] for i in index])}  # (B, 3, H, W)
        photos, photo_of = torch.tensor(index).unique(return_inverse=True)  # (P,), (B,)
        if feats is not None:
            visual = {"frozen_maps": feats[photos].float()}  # (P, C, h, w)
        else:
            visual = {"images": torch.stack([decoded[i] for i in photos.tolist()])}
        if len(photos) < len(index):
            visual["photo_of"] = photo_of
        return visual

    # --- attention targets --------------------------------------------------------------------------------------------
    def _token_cells(self, split: str, i: int, caption: int) -> list[tuple[int, list[int]]]:
        """Caption ``caption`` of image i: (token index, grid cells) of each token that names a region, sparse."""
        key = (split, i, caption)
        found = self._cells.get(key)
        if found is not None:
            return found
        sp, hp = self.splits[split], self.hparams
        if sp.scenes is not None:
            boxes = scene_token_boxes(sp.scenes[i], caption, hp.attention_words)
        else:
            boxes = sp.boxes[i][caption] if sp.boxes is not None else []
        n_tokens = min(len(sp.references[i][caption]), hp.max_caption_len)  # training truncates captions
        size = sp.sizes[i] if sp.sizes is not None else None
        cells = caption_cells(boxes, n_tokens, sp.images[i], size, self.grid, self.preprocess)
        self._cells[key] = cells
        return cells

    def _attention_targets(self, split: str, pairs: list[tuple[int, int]], steps: int) -> dict[str, torch.Tensor]:
        """``attn_targets`` (B, steps, L) and ``attn_targets_mask`` (B, steps) of (image, caption) pairs."""
        if self.grid is None:
            raise CaptionDataError(
                "attention_targets needs the encoder's grid: call set_grid(model.encoder.grid) (caption-train's "
                "FeatureCacheCallback does)"
            )
        items = [self._token_cells(split, i, c) for i, c in pairs]
        target, mask = dense_targets(items, steps, self.grid[0] * self.grid[1])
        return {"attn_targets": target, "attn_targets_mask": mask}

    def _caption_tensors(self, captions: list[list[int]]) -> dict[str, torch.Tensor]:
        v = self.vocab
        return {
            "captions_in": _pad([[v.bos_id, *c] for c in captions], v.pad_id),  # (B, T) bos + words
            "targets": _pad([[*c, v.eos_id] for c in captions], v.pad_id),  # (B, T) words + eos
        }

    # --- batches ------------------------------------------------------------------------------------------------------
    def _collate_train(self, index: list[int]) -> dict:
        drawn = len(index)
        index, decoded = self._readable("train", index, lambda i: self._train_pairs[i][0])
        if not index:  # only the captions of photos that cannot be read: a batch the step skips
            return {UNREADABLE_BATCH: drawn}
        pairs = [self._train_pairs[i] for i in index]
        images = [img for img, _ in pairs]
        batch = {**self._visual("train", images, decoded), **self._caption_tensors([c for _, c in pairs])}
        batch["image_index"] = torch.tensor(images)  # (B,)
        references = self.train_references
        batch["references"] = [references[i] for i in images]  # SCST's reward scores these
        batch["pair_index"] = torch.tensor(index)  # (B,) which (image, caption) pairs: DDP ranks draw disjoint ones
        if self.hparams.attention_targets:
            which = [(img, self._train_caption[i]) for img, i in zip(images, index, strict=True)]
            batch.update(self._attention_targets("train", which, batch["targets"].size(1)))
        return batch

    @property
    def photos_per_batch(self) -> int:
        """photo_batches: photos a training batch holds, so that it holds about batch_size captions."""
        mean = len(self._train_pairs) / max(1, sum(1 for p in self._photo_pairs if p))
        return max(1, round(self.hparams.batch_size / mean))

    def _collate_photos(self, photos: list[int]) -> dict:
        return self._collate_train([i for p in photos for i in self._photo_pairs[p]])

    def _collate_eval(self, split: str, index: list[int]) -> dict:
        drawn = len(index)
        index, decoded = self._readable(split, index, int)
        if not index:  # only photos that cannot be read: the step skips it, the split's scores are the others'
            return {UNREADABLE_BATCH: drawn}
        refs = [self.splits[split].references[i] for i in index]
        # The first reference gives a teacher-forced loss; the metrics use all of them.
        first = [self.vocab.encode(r[0][: self.hparams.max_caption_len], eos=False) for r in refs]
        batch = {**self._visual(split, index, decoded), **self._caption_tensors(first)}
        batch["image_index"] = torch.tensor(index)  # (B,)
        batch["references"] = refs  # per image, its reference token lists
        if self.hparams.attention_targets:
            batch.update(self._attention_targets(split, [(i, 0) for i in index], batch["targets"].size(1)))
        return batch

    def train_dataloader(self) -> DataLoader:
        hp, trainer = self.hparams, getattr(self, "trainer", None)
        if self.streams and hp.photo_batches:
            raise CaptionDataError(
                f"data.photo_batches: {hp.root} is a chunk folder, whose stream draws its own batches; leave it false"
            )
        if self.streams:
            from captioning.training.streaming import StreamCollate

            if hp.attention_targets and self.grid is None:
                raise CaptionDataError("attention_targets needs the encoder's grid: call set_grid(model.encoder.grid)")
            grid = self.grid if hp.attention_targets else None
            collate = StreamCollate(self.vocab, self.preprocess, hp.max_caption_len, grid)
            workers = self._workers("train")
            return streaming_loader(hp.root, hp.batch_size, collate, hp.seed, workers, world_size_of(trainer),
                                    self.take_resume_skip(), shuffle=not overfits(trainer))  # fmt: skip
        if hp.photo_batches:  # whole photos with all their captions: a batch sampler over photos, not pairs
            photos = _Indices(len(self._photo_pairs))
            sampler = LengthBatchSampler(
                train_order(photos, hp.seed, trainer),
                [1] * len(photos),
                self.photos_per_batch,
                seed=hp.seed,
                skip=self.take_resume_skip(),
                pool_batches=1,
            )
            collate = _Collate(self, "_collate_photos")
            return DataLoader(photos, batch_sampler=sampler, collate_fn=collate, num_workers=self._workers("train"))
        lengths = [len(c) for _, c in self._train_pairs]
        pairs = _Indices(len(lengths))
        sampler = LengthBatchSampler(
            train_order(pairs, hp.seed, trainer),
            lengths,
            hp.batch_size,
            seed=hp.seed,
            skip=self.take_resume_skip(),
            pool_batches=POOL_BATCHES if hp.sort_by_length else 1,
        )
        return DataLoader(
            pairs,
            batch_sampler=sampler,
            collate_fn=_Collate(self, "_collate_train"),
            num_workers=self._workers("train"),
        )

    def _eval_loader(self, split: str) -> DataLoader:
        return DataLoader(
            _Indices(len(self.splits[split].images)),
            batch_size=self.hparams.batch_size,
            shuffle=False,
            collate_fn=_Collate(self, "_collate_eval", split),
            num_workers=self._workers(split),
        )

    def _workers(self, split: str) -> int:
        """data.num_workers, or 0 where /dev/shm cannot hold the batches they keep ready (text_attn.core.shm_workers);
        a batch's size estimated from its visual part, one photo's features or float32 image per caption. With
        workers, the split's unreadable-photo flags go to shared memory first (:meth:`_known_bad`): the workers of
        every epoch inherit them."""
        feats = self.features.get(split)
        if feats is not None:
            per_item = feats[0].numel() * 4  # sent as float32
        else:
            side = getattr(self.preprocess, "image_size", 224)
            per_item = 3 * side * side * 4  # (3, H, W) float32
        processes = getattr(self.trainer, "num_devices", 1)  # DDP: one a device; no trainer (None): 1
        workers = loader_workers(self.hparams.num_workers, self.hparams.batch_size * per_item, "caption data",
                                 processes=processes)  # fmt: skip
        if workers and feats is None and split in self.splits:
            self._known_bad(split, shared=True)
        return workers

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader("test")

    def predict_dataloader(self) -> DataLoader:
        return self._eval_loader("test")


# --- what the loaders' workers are sent ------------------------------------------------------------------------------
class _BatchMaker:
    """The data module's batch state (vocabulary, splits, features, preprocessing, train pairs, the grid and its cells)
    with its batch methods, without the module: what a loader worker started by spawn or forkserver (macOS's default
    start method, Python 3.14's on Linux) is sent, as pickling the module would take its trainer along (local classes,
    lambdas: not picklable)."""

    STATE = ("hparams", "vocab", "splits", "features", "preprocess", "grid", "_train_pairs", "_train_caption",
             "_photo_pairs", "_cells", "_unreadable")  # fmt: skip

    def __init__(self, source: CaptionDataModule | _BatchMaker):
        for name in self.STATE:
            setattr(self, name, getattr(source, name))

    train_references = CaptionDataModule.train_references
    _readable = CaptionDataModule._readable
    _known_bad = CaptionDataModule._known_bad
    _visual = CaptionDataModule._visual
    _token_cells = CaptionDataModule._token_cells
    _attention_targets = CaptionDataModule._attention_targets
    _caption_tensors = CaptionDataModule._caption_tensors
    _collate_train = CaptionDataModule._collate_train
    _collate_photos = CaptionDataModule._collate_photos
    _collate_eval = CaptionDataModule._collate_eval


class _Collate:
    """A loader's collate function: ``maker.<method>(*args, index)``. Here and in forked workers ``maker`` is the data
    module itself (as the bound method was: the state it has when the batch is made); pickled (spawn, forkserver),
    it goes as a :class:`_BatchMaker` of the module's state at that moment (the loader's workers start)."""

    def __init__(self, maker: CaptionDataModule | _BatchMaker, method: str, *args):
        self.maker, self.method, self.args = maker, method, args

    def __call__(self, index: list[int]) -> dict:
        return getattr(self.maker, self.method)(*self.args, index)

    def __reduce__(self) -> tuple:
        return _Collate, (_BatchMaker(self.maker), self.method, *self.args)
