"""Command-line entry point ``caption``: caption images, folders and lists of paths, optionally with attention
overlays (``caption-export`` is in captioning/commands/export.py).

Input: IMAGE arguments are files, folders (their image files, recursively, in sorted order), webdataset tar shards
as img2dataset writes them (``KEY.jpg|png|webp`` with ``KEY.txt`` and ``KEY.json``, read in place:
captioning.photos.shards; a quoted ``'shards/{00000..00099}.tar'`` is expanded) or ``-`` (one path per line on stdin).
Images are decoded and preprocessed by DataLoader workers (``--workers``) while the model captions the previous batch
(``--batch-size``); memory stays bounded whatever the number of images. A progress bar is shown on stderr when there is
more than one batch.

``caption`` output. Plain: with one file named, just its caption; with several, a folder, a shard or ``-``,
``path<TAB>caption`` per image in input order (like grep with one vs several files). ``--json``: one JSON list, one
record per image. ``--jsonl FILE``: the same records, one per line, written as each batch is done (nothing on
stdout; ``--jsonl -``: on stdout instead of the plain lines); with ``--resume`` the images FILE already holds a
caption for are skipped and the rest appended. A record ("image": the path as given, its bytes read as UTF-8
whatever the locale: text_attn.core.os_text.utf8_name):
    {"image": path, "caption": "a red circle ..." | null, "words": [...],
     "attention": [[L floats] per word]   (row t: step t's weights over the grid*grid regions, row-major, sum 1),
     "score": log-probability of the caption / length**length_penalty (greedy, sampled and beam alike),
     "truncated": true when the caption hit --max-len before its end (it is cut off),
     "out_of_domain": true when the image looks unlike the model's training images (null: the model cannot tell),
     "note": what the model knows, when out_of_domain ("this photo looks unlike the Flickr8k photos ..."), else null,
     "grid": [g, g], "size": [W, H]        (the image as captioned: after its EXIF rotation),
     "crop_box": [x0, y0, x1, y1]          (the part of that image the network saw, pixels),
     "chosen": [region per word] | null (a hard-attention model's attended region, row-major; null for soft),
     "overlay": PNG path | null, "error": null | "one line"}
With ``--given CAPTION`` (repeatable; ``--given-file FILE``: each photo's own from a TSV) the captions given are read,
not written: the record's caption is the best fitting one, its "score" the mean log-probability of its words and the
end, and it also has "log_prob" (their sum), "word_probs" (each word's probability after the words before it),
"end_prob", and "given": every caption read, best first, each {"caption", "score", "log_prob", "word_probs",
"end_prob"}. Plain output: per caption read, ``score<TAB>caption<TAB>probabilities`` (``path<TAB>`` first with
several images).
With ``--references FILE`` (name<TAB>caption lines) each record also has "references" (FILE's captions of the photo,
[] for none; --html shows them under it), and the captions written are scored against them at the end, on stderr
(captioning/commands/caption_scores.py; ``--scores OUT``: each photo's, worst first, as JSON).
A shard member is named ``SHARD.tar/KEY.jpg`` and its record also has "key" (img2dataset's key) and "reference" (the
shard's KEY.txt, or null), after "image".
A failed image gets caption, score, truncated, grid, size, crop_box, chosen null and empty lists, and every key the
run's options add to the others (empty lists; log_prob, end_prob null). Overlays of a
hard-attention model outline each word's chosen region. Every failure is also one line on stderr
(``caption: error: PATH: what is wrong``); the other images are still captioned, and the exit code is 1. Bad
options or an unusable model file: one line, exit code 2. Each overlay written is reported on stderr (``wrote PATH``);
captions cut off by --max-len, and images unlike the model's training images, are counted in one note each there.

``--html FILE`` also writes one self-contained interactive page (captioning/views/caption_page.py): per image its
picture and caption; hovering a word (or stepping with the arrow keys) shows that word's attention. It is written as
images are done, with any output mode above; an unwritable FILE is one line and exit code 2 before any image is read.

``--devices N [--num-nodes M]`` (with ``--jsonl OUT``): the same per-batch work on N processes a machine, on
Lightning's predict loop (captioning/commands/caption_scale.py; docs/scale.md "Caption millions of photos").

``caption --demo`` captions the bundled CC0 and public-domain photographs (captioning/assets/photos) with the bundled
Flickr8k model and writes their overlays: three lines per photo, ``photo:``, ``caption:``, ``overlay:``.
``caption --demo shapes`` draws a synthetic scene for the shapes model and prints four lines, ``scene:``, ``caption:``,
``reference:`` (the scene's canonical caption) and ``overlay:``; with ``--json`` its one record also has "reference"
and "seed".
``caption --model-info`` prints what the model is, its training data and their terms, and its test scores.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from captioning.commands.caption_batch import _unique_stem, drawn_overlays, overlay_tail
from captioning.commands.caption_demo import _demo_photos, _demo_shapes
from captioning.commands.caption_given import check_given, given_notes, photo_key
from captioning.commands.caption_loop import _caption_paths
from captioning.commands.caption_parser import MAX_LEN, _parser, fill_machine_defaults
from captioning.commands.caption_scores import check_names, check_references
from captioning.commands.process_start import LAUNCHED, first_gone_quietly, hands_on_stdin, should_start, start_others
from captioning.model.bundled import (  # noqa: F401 - names others import
    ASSETS,
    BUNDLED_MODEL,
    DEMO_PHOTOS,
    MODEL_NAMES,
    SHAPES_MODEL,
    model_path,
    text_model_named,
)
from text_attn.core import startup_gc
from text_attn.core.drawn_seed import SEED_VARIABLE, say_seed, settle_seed
from text_attn.core.errors import and_more, check_dash_inputs, dash_refused, emit, fail, missing, one_line
from text_attn.core.fast_exit import leaving
from text_attn.core.os_text import utf8_text
from text_attn.core.ranks import first_process
from text_attn.core.safe_files import (
    OutputRefused,
    hold_outputs,
    inert,
    inert_output,
    protecting,
    refuse_overlap,
    refuse_same_outputs,
)
from text_attn.core.search_options import check_search_options, fill_decoding_defaults
from text_attn.core.unread_options import flags_given
from text_attn.core.unsure import CAPTION_UNSURE
from text_attn.core.unsure_options import resolve_unsure


def _load_captioner(args: argparse.Namespace):
    from captioning.model.captioner import Captioner
    from text_attn.core.modelfile import ModelFileError

    path = _model_file(args)  # there: _refuse_missing_files checked it
    try:
        captioner = Captioner.load(path)  # on the CPU: a device problem must not read as a broken file
    except ModelFileError as err:  # a caption-train checkpoint's message names the caption-export command
        fail("caption", str(err))
    try:
        captioner = captioner.to(args.device)
    except (RuntimeError, AssertionError, ValueError) as err:  # unknown device name, no CUDA build, ...
        fail("caption", f"cannot use device {args.device!r}: {one_line(err)}")
    startup_gc.release()  # the imports and the model are in: the collector as usual (text_attn.core.startup_gc)
    return captioner


# which stages training fine-tuned (Captioner.fine_tuned), in words
TUNED_STAGES = {"last": "its last stage", "last2": "its last two stages", "all": "all its stages"}
# what --model-info reads (which file, where and how it loads); demo: its own line (images or --demo)
INFO_OPTIONS = ("model", "model_info", "device", "threads", "demo")


def _encoder_weights(captioner) -> str:
    """Where the encoder's weights come from, and which of its stages were fine-tuned on captions, for --model-info
    (and attention-serve's /info)."""
    changed, tuned = captioner.encoder_changed, captioner.fine_tuned
    stages = TUNED_STAGES.get(tuned, tuned) if tuned else None
    if changed is None:
        return "weights in the file" + (f", {stages} fine-tuned on captions" if stages else "")
    if changed == 0:
        return "ImageNet weights from its package, frozen"
    where = f" ({stages})" if stages else ""
    return f"ImageNet weights from its package, {changed} tensors fine-tuned on captions{where} stored in the file"


def _hard_decoding(dec) -> str:
    """How a hard-attention decoder decodes, for --model-info's attention line: two files that differ only there
    give different captions (decoder.hard_inference); nothing for soft attention."""
    if dec.attention != "hard":
        return ""
    how = {"argmax": "one region a word", "expect": "each word from the expected context of all regions"}
    return f"; decodes with {dec.hard_inference}: {how.get(dec.hard_inference, dec.hard_inference)}"


def model_info(captioner, path: str | Path) -> list[str]:
    """``caption --model-info``: what the model is, what it was trained on (and under which terms), its scores."""
    model = captioner.model
    enc, dec = model.encoder, model.decoder.cfg
    pre = captioner.preprocess
    k = len(captioner.decoders)
    members = f"; an ensemble of {k} such decoders, their word probabilities averaged" if k > 1 else ""
    resize = "centre square crop" if pre.crop else "whole image squashed to a square (no crop)"
    if pre.source_side:  # the training photos' own size, which every photo passes through first
        resize = f"squashed to {pre.source_side} x {pre.source_side} ({pre.squash_filter}) first"
        if pre.jpeg_quality is not None:  # and recompressed, as the training copies were (captioning.photos.jpeg_step)
            resize += f", then JPEG quality {pre.jpeg_quality} ({pre.jpeg_subsampling})"
        resize += ", as its training photos were"
    lines = [
        f"model:          {path}",
        f"attention:      {dec.attention} (Show-Attend-Tell{_hard_decoding(dec)}), {enc.grid} x {enc.grid} regions",
        f"encoder:        {enc.backbone} ({_encoder_weights(captioner)}), {pre.image_size} px, {resize}",
        f"decoder:        LSTM {dec.hidden_dim}, embedding {dec.embed_dim}, attention {dec.attn_dim}{members}",
        f"vocabulary:     {len(captioner.vocab)} words",
        f"trained on:     {captioner.domain or 'not recorded'}",
    ]
    if captioner.split_marks:  # a vocabulary of before 2026-12-02: a given caption is read that way
        from text_attn.core.vocab import SPLIT_MARKS_INFO

        lines.insert(5, f"word tokens:    {SPLIT_MARKS_INFO}")
    if captioner.casing:  # German captions: "Ein Hund" for the words "ein hund"
        some = ", ".join(captioner.casing["words"].split()[:4])
        some = f"{some}, ..." if some else "a capital to start"  # captions whose words are all lowercase but the first
        lines.append(f"capitals:       as its training captions write them ({some})")
    from text_attn.core.modelfile import info_lines

    return lines + info_lines(captioner.info)


@inert_output
def caption_main(argv: list[str] | None = None) -> int:
    """``caption IMAGE [IMAGE ...]`` / ``caption --demo``; returns the exit code (0 ok, 1 an image failed)."""
    from text_attn.core import cpu_load

    cpu_load.start()  # the cores' load is read again once torch is imported (the default --threads)
    parser = _parser()
    args = parser.parse_args(argv)
    beside_info = flags_given(parser, args, INFO_OPTIONS) if args.model_info else []  # as typed, before any is filled
    if args.given:  # UTF-8 typed under another locale (LC_ALL=C): "café", not "caf" and two lone surrogates
        args.given = [utf8_text(text) for text in args.given]
    _dash_outputs(args)
    if args.beam_size is not None and args.beam_size < 1:  # before loading the model: fail fast
        fail("caption", f"--beam-size must be at least 1, got {args.beam_size}")
    if args.max_len is not None and args.max_len < 1:
        fail("caption", f"--max-len must be at least 1, got {args.max_len}")
    if args.demo not in (None, "photo", "shapes"):  # `--demo x.png`: an image after --demo, not a kind of demo
        if not Path(args.demo).exists():
            fail("caption", f"--demo takes photo (the default: the bundled photos) or shapes, got {args.demo!r}")
        args.images.insert(0, args.demo)
        args.demo = "photo"
    if args.demo and args.images:
        fail("caption", "--demo captions its own images; give either --demo or IMAGE files, not both")
    if args.demo and args.jsonl:  # the demo's records are printed, not streamed: --jsonl was silently not written
        fail("caption", "--jsonl streams the records of IMAGE inputs: give it without --demo (--json prints the "
                        "demo's records)")  # fmt: skip
    # options of a run over IMAGE inputs: the demo's few photos are one batch, read here and drawn (its overlays)
    unused = [flag for flag, given in (("--batch-size", args.batch_size is not None),
                                       ("--workers", args.workers is not None),
                                       ("--decode-on-device", args.decode_on_device)) if given]  # fmt: skip
    if args.demo and unused:  # taken and not used, silently
        fail("caption", f"{' and '.join(unused)}: for a run over IMAGE inputs; --demo captions a few pictures of its "
             "own in one batch, drawn here: give it without")  # fmt: skip
    if args.model_info and (args.images or args.demo):
        fail("caption", "--model-info describes the model and exits: give it without images or --demo")
    if beside_info:  # an output or a decoding it never made: said, not dropped
        fail("caption", f"--model-info describes the model and exits: give it without {', '.join(beside_info)}")
    if not args.demo and not args.images and not args.model_info:
        fail("caption", "no input: give IMAGE files, or --demo to caption the bundled photos")
    if args.per_word and not args.overlay and not args.demo:
        fail("caption", "--per-word needs --overlay DIR")
    if args.overlay_format and not args.overlay and not args.demo:
        fail("caption", "--overlay-format needs --overlay DIR")
    if args.evidence and not (args.overlay or args.html or args.json or args.jsonl or args.demo):
        fail("caption", "--evidence is drawn with --overlay DIR or --html FILE, or written with --json / --jsonl: "
             "add one of them")  # fmt: skip
    if args.evidence and args.sample:
        fail("caption", "--evidence explains the model's own choice of words; --sample draws them at random: drop one")
    if args.seed is not None and args.demo != "shapes":
        # --sample's seed is another option: said where the two were mixed up
        fail("caption", "--seed only applies to --demo shapes" + (" (the seed of --sample's draws is --sample-seed)"
                                                                   if args.sample else ""))  # fmt: skip
    if args.resume and not args.jsonl:
        fail("caption", "--resume needs --jsonl FILE (the file to continue)")
    if args.resume and args.html and Path(args.html).is_file() and Path(args.html).stat().st_size:
        fail("caption", f"--html {args.html} exists, and --resume would replace it with a page of this run's images "
             "only; give a new --html file (the old page stays as it is)")  # fmt: skip
    if args.jsonl and args.json:
        fail("caption", "give --json (one list on stdout) or --jsonl FILE (one record per line), not both")
    for flag, value in (("--jsonl", args.jsonl), ("--html", args.html)):  # now, not after the model loads
        if value and not Path(value).parent.is_dir():  # a mistyped folder is said, not made (--overlay DIR is made)
            fail("caption", f"cannot use {flag} {value}: the folder {Path(value).parent} does not exist")
    try:  # before the checks that read OUT.parts and before anything is loaded, written or removed; held to the end
        held = hold_outputs(_held_outputs(args))
    except OutputRefused as err:
        fail("caption", str(err))
    with held, first_gone_quietly():
        return _checked_options(args, argv)


def _held_outputs(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """The files no other run may write while this one does (safe_files.hold_outputs): two runs appending to one
    --jsonl interleaved their records, and a second --devices run removed the first one's OUT.parts. Held by the
    first process alone: the other processes of a --devices run write their own parts of its run."""
    if not first_process():
        return []
    # --overlay DIR too: two runs' overlays of photos named alike replaced each other, each run's records naming them
    # (the folder by its real path: a link to it is the same folder)
    overlay = os.path.realpath(args.overlay) if args.overlay else None
    return [("--jsonl", args.jsonl), ("--html", args.html), ("--scores", args.scores),
            ("--overlay", overlay)]  # fmt: skip  # --jsonl -: stdout, not held


MAX_BATCH = 65_536  # --batch-size's largest: 38 GiB of prepared photos at 224 x 224


def _checked_options(args: argparse.Namespace, argv: list[str] | None) -> int:
    """The rest of :func:`caption_main`, its outputs held: the checks that read files, then the run on this process
    or on several."""
    _check_processes(args)
    for flag, value in (("--batch-size", args.batch_size), ("--threads", args.threads)):
        if value is not None and value < 1:
            fail("caption", f"{flag} must be at least 1, got {value}")
    if args.batch_size is not None and args.batch_size > MAX_BATCH:  # above sys.maxsize: the loader's traceback
        fail("caption", f"--batch-size must be at most {MAX_BATCH:,} (a batch's photos are held in memory together, "
             f"~0.6 MB each at 224 x 224), got {args.batch_size:,}")  # fmt: skip
    if args.workers is not None and args.workers < 0:
        fail("caption", f"--workers must be 0 or more, got {args.workers}")
    # --device auto is resolved in _checked_run (it imports torch: --devices N starts the other processes first)
    if args.cuda_graphs and args.device != "auto" and not args.device.startswith("cuda"):
        fail("caption", f"--cuda-graphs captures the search on a GPU: give it with --device cuda (not {args.device})")
    if args.decode_on_device and (args.overlay or args.html):
        fail("caption", "--decode-on-device leaves the photos decoded on the device; --overlay and --html draw them "
             "here: drop one")  # fmt: skip
    if args.cuda_graphs and args.sample:
        fail("caption", "--cuda-graphs captures greedy and beam search; --sample draws its words eagerly: drop one")
    holds = "the images' names" if "-" in args.images else None
    check_dash_inputs("caption", args.given_file, args.references, holds)
    check_given(args)
    resolve_unsure(args, "caption", CAPTION_UNSURE)
    args.max_len = MAX_LEN if args.max_len is None else args.max_len  # checked: --given refuses one typed
    check_references(args)
    _refuse_missing_files(args)
    if "-" in args.images:  # an image's bytes on stdin: refused before the model loads (1-2 s), not after
        from captioning.photos.image_paths import NotAList, refuse_image_on_stdin

        try:
            refuse_image_on_stdin()
        except NotAList as err:
            fail("caption", str(err))
    if args.jsonl == "-":  # the records on stdout, one a line as batches are done (no FILE, no FILE.run.json)
        args.jsonl, args.jsonl_stdout = None, True
    # --sample without --sample-seed: one seed for the run (said once the options pass), which the processes this one
    # starts take from it; each process another launcher started would draw its own, so none is drawn there (one
    # process, without --devices, draws its own under any launcher: a SLURM job's sets SLURM_NTASKS)
    alone = args.devices is None or (args.num_nodes == 1 and not any(k in os.environ for k in LAUNCHED))
    unseeded = args.sample_seed is None
    args.seed_note = settle_seed(args, [args.jsonl] if args.resume and args.jsonl else [], alone)
    # for this run's other processes alone (those it starts, or Lightning's launcher, which copies os.environ): gone
    # after it, or a later --sample run in this process (a notebook's) took it silently
    passed = unseeded and args.sample_seed is not None and alone and (args.devices or 1) > 1
    if passed:
        os.environ[SEED_VARIABLE] = str(args.sample_seed)
    try:
        return _on_processes(args, argv)
    finally:
        if passed:
            os.environ.pop(SEED_VARIABLE, None)


def _on_processes(args: argparse.Namespace, argv: list[str] | None) -> int:
    """The run on this process, or with --devices N on this one and the N - 1 it starts now."""
    if not should_start(args.devices, args.num_nodes):
        return _checked_run(args)
    # --devices N: the other processes start now and import and load beside this one (captioning.commands.process_start)
    listed = None
    if "-" in args.images:  # paths on stdin: read here once, and each process is given the same list
        from captioning.photos.image_paths import NotAList, stdin_names

        try:
            listed = "".join(stdin_names())  # names decoded as the arguments are
        except NotAList as err:
            fail("caption", str(err))
        sys.stdin = io.StringIO(listed)
    elif _reads_stdin(args):  # --given-file - / --references -: each process reads the captions the first read
        from text_attn.core.os_text import stdin_bytes

        listed = os.fsdecode(stdin_bytes())
    others = start_others(args.devices, list(sys.argv[1:] if argv is None else argv), listed)
    code = 1
    try:
        code = _checked_run(args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        code = others.finish(code)
    if code:
        raise SystemExit(code)
    return 0


def _checked_run(args: argparse.Namespace) -> int:
    """The run once the options are checked: the model loaded, then the demo, its description or the inputs."""
    fill_machine_defaults(args)  # --device auto becomes cuda or cpu here
    if args.cuda_graphs and not args.device.startswith("cuda"):
        fail("caption", "--cuda-graphs captures the search on a GPU: --device auto found none here (torch sees no CUDA "
             "device)")  # fmt: skip
    if args.threads:
        import torch

        from text_attn.core.cpu_load import more_threads_note

        if (note := more_threads_note(args.threads)) and args.device == "cpu":
            print(f"caption: note: {note}", file=sys.stderr)
        torch.set_num_threads(args.threads)
    elif args.device == "cpu" and args.devices is None:  # --devices: Lightning shares the cores among the processes
        from text_attn.core.cpu_load import use_free_threads

        use_free_threads()  # one thread per core that other programs left free (text_attn/core/cpu_load.py)
    try:  # the files given and the model, before it loads (folders and stdin's list are checked once expanded)
        refuse_same_outputs([("--html", args.html), ("--jsonl", args.jsonl), ("--scores", args.scores)])
        refuse_overlap(_outputs(args), [*_model_files(args), *(i for i in args.images if i != "-")],
                       stdin=_reads_stdin(args))  # fmt: skip
    except OutputRefused as err:
        fail("caption", str(err))
    captioner = _load_captioner(args)
    fill_decoding_defaults(args, captioner.info)
    # --model-info searches nothing: a file whose recorded beam is wider than its vocabulary is still described
    words = None if args.model_info else len(captioner.vocab)
    note = check_search_options("caption", args, words=words, model=str(_model_file(args)))
    if note and not args.model_info and first_process():
        print(f"caption: note: {note}", file=sys.stderr)
    if not args.model_info and first_process() and not (args.resume and args.jsonl):  # a resume's: once it is checked
        say_seed("caption", args)
    if args.decode_on_device:
        from captioning.photos.device_prepare import supported

        why = supported(captioner.preprocess)
        if why is not None:
            fail("caption", f"--decode-on-device: {why}; caption without it")
    if args.model_info:
        emit("caption", "\n".join(model_info(captioner, _model_file(args))))  # the file, as translate says it
        return 0
    if args.jsonl:  # FILE.run.json: a --resume with another model or decoding is refused (caption_run)
        from captioning.commands.caption_run import run_settings

        try:
            args.run_settings = run_settings(args, _model_file(args))
        except OSError as err:
            fail("caption", f"cannot read {err.filename}: {err.strerror or one_line(err)}")
    if first_process() and (args.demo or not args.given_file):  # a --given-file's: once the photos are known
        given_notes(captioner, args)
    if args.demo:
        with protecting(_model_files(args)):  # no --html or --overlay file may replace the model or a demo photo
            return _demo_shapes(captioner, args) if args.demo == "shapes" else _demo_photos(captioner, args)
    return _caption_collection(captioner, args)


def _dash_outputs(args: argparse.Namespace) -> None:
    """``-`` as an output name means stdout, as it means stdin for IMAGE: ``--jsonl -`` writes the records there (in
    place of the plain lines); a page, a folder of PNGs and the scores are files only, and say so (a file named -
    is ./-: it was written silently, a second run overwrote it)."""
    for flag, value, what in (("--html", args.html, "a page"), ("--overlay", args.overlay, "a folder of PNGs"),
                              ("--scores", args.scores, "a JSON file")):  # fmt: skip
        if value == "-":
            fail("caption", dash_refused(flag, what))
    if args.jsonl == "-" and args.resume:
        fail("caption", "--resume continues a --jsonl FILE; --jsonl - writes the records to stdout: give a file")
    if args.jsonl == "-" and args.devices is not None:
        fail("caption", "--devices merges each process's part into --jsonl OUT, a file; --jsonl - is stdout: give a "
             "file")  # fmt: skip


def _check_processes(args: argparse.Namespace) -> None:
    """--devices / --num-nodes: what a run over several processes needs, checked before the model loads."""
    if args.devices is None:
        if args.num_nodes != 1:
            fail("caption", "--num-nodes needs --devices N (the processes on each machine)")
        parts = Path(f"{args.jsonl}.parts") if args.jsonl else None
        if args.resume and parts is not None and parts.is_dir():
            fail("caption", f"{parts} holds the parts of a run with --devices: resume it with --devices (any "
                 "number of processes)")  # fmt: skip
        return
    for flag, value in (("--devices", args.devices), ("--num-nodes", args.num_nodes)):
        if value < 1:
            fail("caption", f"{flag} must be at least 1, got {value}")
    from text_attn.core.cpu_load import cpu_ids

    # CPU processes caption starts itself: a typo's 1000 started ~8 a second, each loading the model (5 GB in 12 s
    # on 2 cores), until the machine ran out of memory. Not GPUs, nor processes another launcher starts (srun pins
    # each to its own cores: the documented --devices 8 --device cuda was refused, review)
    cores = len(cpu_ids())
    # --device auto is resolved later (torch is not imported yet): a machine with an NVIDIA driver may run on GPUs
    on_cpu = args.device == "cpu" or (args.device == "auto" and not os.path.exists("/dev/nvidiactl"))
    if on_cpu and should_start(args.devices, args.num_nodes) and args.devices > 2 * cores:
        fail("caption", f"--devices {args.devices}: more CPU processes than twice the cores this machine lets it "
             f"use ({cores}); each loads the model and they share the cores (no faster): give at most "
             f"{2 * cores}")  # fmt: skip
    if "-" in args.images and args.devices * args.num_nodes > 1 and not hands_on_stdin(args.devices, args.num_nodes):
        fail("caption", "- (paths on stdin) with several processes needs caption to start them itself (one machine, "
             "CAPTION_EARLY_START unset): each process started by another launcher has a stdin of its own; give the "
             "paths as arguments or a folder")  # fmt: skip
    if not args.jsonl:
        fail("caption", "--devices writes its records to --jsonl OUT (each process its part, merged into OUT): "
             "give --jsonl FILE")  # fmt: skip
    from text_attn.core.safe_files import check_output

    try:  # OUT is written at the end, after all the work: refuse a link or a folder now
        check_output(args.jsonl)
    except OutputRefused as err:
        fail("caption", f"cannot use --jsonl {args.jsonl}: {err}")
    if args.html:
        fail("caption", "--html draws one page as one process captions: give it to a run without --devices (the "
             "records in OUT hold what the page shows)")  # fmt: skip
    if args.demo or args.model_info:
        fail("caption", "--devices captions IMAGE inputs: give it without --demo or --model-info")


def _model_file(args: argparse.Namespace) -> Path:
    """The model file this run reads: --model (a path or a bundled name), else the bundled one --demo asks for."""
    return model_path(args.model if args.model is not None or args.demo != "shapes" else "shapes")


def no_images(images: list[str], unreadable: list[tuple[str, str]] = ()) -> str:
    """The line for a run whose inputs hold no image: the folders that could not be listed and why, the others named
    (three at most each), and stdin where '-' read it."""
    locked = [f"{inert(folder)}: cannot be read ({why})" for folder, why in unreadable]
    said_locked = {folder for folder, _ in unreadable}
    named = [inert(a) for a in images if a != "-" and a not in said_locked]
    shown = and_more(named[:3], len(named))
    said = [and_more(locked[:3], len(locked)), f"{shown}: no image files" if named else "",
            "stdin gave no paths" if "-" in images else ""]  # fmt: skip
    return "no images: " + "; ".join(x for x in said if x)


def _refuse_missing_files(args: argparse.Namespace) -> None:
    """A model file that is not there, IMAGE arguments none of which is there, and folders none of which holds an
    image file are said before torch is imported (a mistyped path is answered at once, not after the seconds the
    imports take), in the words and with the exit code the run would give them later. The model file's content is
    read later, with torch: so photos that are all missing are said before a model file that is there but broken. A
    run that writes records or pages for its failed images (--json, --jsonl, --html, --overlay, --devices) keeps to
    the run: it writes them."""
    from text_attn.core.modelfile import path_problem

    path = _model_file(args)
    if problem := path_problem(path, args.model):  # as Captioner.load says it, before torch is imported
        if not Path(path).exists() and text_model_named(args.model):
            fail("caption", text_model_named(args.model))
        if not Path(path).exists() and Path(path) in MODEL_NAMES.values():
            fail("caption", f"the bundled model {path} is not installed; pass --model FILE (a model file written by "
                 "caption-train fit or caption-export)")  # fmt: skip
        fail("caption", problem)
    writes = args.json or args.jsonl or args.html or args.overlay or args.devices is not None
    if args.demo or args.model_info or writes or not args.images:
        return
    from captioning.photos.shards import is_shard  # no torch there

    # '-' (paths on stdin), a brace pattern and a shard are read as the run goes: not judged here
    if all(a != "-" and "{" not in a and not is_shard(a) and not os.path.exists(a) for a in args.images):
        for a in args.images:
            print(f"caption: error: {inert(missing(a))}", file=sys.stderr)  # preprocess's words, on one line
        raise SystemExit(1)
    if all(os.path.isdir(a) for a in args.images):
        from captioning.photos.image_paths import image_paths

        unreadable: list[tuple[str, str]] = []
        if next(image_paths(args.images, unreadable=unreadable), None) is None:  # the walk ends at the first image
            fail("caption", no_images(args.images, unreadable))


def _reads_stdin(args: argparse.Namespace) -> bool:
    """Whether stdin is an input: the images' names (``-``), or the captions of --given-file / --references ``-``."""
    return "-" in args.images or "-" in (args.given_file, args.references)


def _model_files(args: argparse.Namespace) -> list[str]:
    """The model file this run reads (an input too: no output may replace it), the caption files it reads
    (--given-file, --references) and, for --demo, its photos."""
    files = [str(_model_file(args))]
    files += [f for f in (args.given_file, args.references) if f and f != "-"]  # "-": stdin (_reads_stdin)
    if args.demo == "photo":
        files += [str(p) for p in DEMO_PHOTOS]
    return files


def _outputs(args: argparse.Namespace, paths: Sequence[str] = ()) -> dict[str, str | None]:
    """The files this run writes, by label: --jsonl, --html, and each image's overlay (named as caption_items will
    name them; the per-word PNGs, named by the caption's words, are checked as written: safe_files.protecting)."""
    out = {f"--{flag} {value}": value for flag, value in (("jsonl", args.jsonl), ("html", args.html),
                                                           ("scores", args.scores))}  # fmt: skip
    used = {n.casefold() for n in drawn_overlays(args)}  # as _unique_stem keeps them
    tail = overlay_tail(args)
    for name in paths if args.overlay else ():
        picture = str(Path(args.overlay) / f"{_unique_stem(Path(name).stem or 'image', used, tail)}{tail}")
        out[f"the overlay {picture}"] = picture
    return out


def _caption_collection(captioner, args: argparse.Namespace, stdin: IO[str] | None = None) -> int:
    from captioning.photos.image_paths import NotAList, image_paths
    from captioning.photos.shards import expand_braces, is_shard

    empty: list[str] = []  # folders without image files: each is a failed input, named in a note
    unreadable: list[tuple[str, str]] = []  # folders that could not be listed, and why: failed inputs too
    outputs = [args.overlay] if args.overlay else []  # an --overlay folder inside an input folder: not an input
    given = [p for arg in args.images for p in (expand_braces(arg) if "{" in arg and not Path(arg).exists() else [arg])]
    # strings: images and shards are read batch by batch
    try:
        paths = list(image_paths(given, stdin, empty, skip=outputs, unreadable=unreadable))
    except NotAList as err:  # an image's bytes on stdin, given as "-"
        fail("caption", str(err))
    if not paths:
        fail("caption", no_images(args.images, unreadable))
    for folder in empty if first_process() else ():  # --devices: each process finds them; the first names them
        print(f"caption: note: {folder}: no image files", file=sys.stderr)
    for folder, why in unreadable if first_process() else ():
        print(f"caption: note: {inert(folder)}: cannot be read ({why}): its photos are not captioned", file=sys.stderr)
    empty += [folder for folder, _ in unreadable]  # each a failed input: exit code 1
    paths = _once_each(paths)
    check_names(args, paths)
    if args.given_file and first_process():  # the notes on the captions of these photos only (shards: all)
        names = None if any(is_shard(p) for p in paths) else {photo_key(p) for p in paths}
        given_notes(captioner, args, names)
    try:  # every input, found in folders and read from stdin too, against every output: before anything is written
        files = [p for p in paths if not is_shard(p)]  # a shard's members are named as drawn (protecting)
        refuse_overlap(_outputs(args, files), [*_model_files(args), *paths], stdin=_reads_stdin(args))
    except OutputRefused as err:
        fail("caption", str(err))
    with protecting(
        [*_model_files(args), *paths], stdin=_reads_stdin(args)
    ):  # and each file written as the run goes (per-word PNGs)
        if args.devices is not None:
            from captioning.commands.caption_scale import caption_on_processes

            return caption_on_processes(captioner, args, paths, empty)
        return _caption_paths(captioner, args, paths, empty)


def _once_each(paths: list[str]) -> list[str]:
    """The inputs with a photo named again (``caption photos photos/2024``, a file named two ways, a symbolic link to
    a photo named too) dropped, said in one note: it was captioned twice, and ``--resume``, which knows a photo by its
    path, then counted it done twice and wrote a file unlike the run it continued. (A link to a file is resolved here
    alone: one lstat a photo; a link to a folder is resolved by image_key.)"""
    from captioning.photos.collection import image_key
    from captioning.photos.shards import is_shard

    seen: dict[str, str] = {}  # a photo's key -> the input it is captioned under (the first naming it)
    kept, again = [], []
    for path in paths:
        # a shard's members are its own; a link to a file is the file it names
        key = None if is_shard(path) else image_key(os.path.realpath(path) if os.path.islink(path) else path)
        if key is not None and key in seen:
            again.append((path, seen[key]))
            continue
        seen[key] = path
        kept.append(path)
    if again and first_process():  # which name it is captioned under: a link sorted first took the photo's records
        dropped, under = again[0]
        print(f"caption: note: {len(again)} input(s) name a photo named before (first: {inert(dropped)}, captioned "
              f"as {inert(under)}): each photo is captioned once, under the name given first",
              file=sys.stderr)  # fmt: skip
    return kept


# the console script; the teardown it skips is about 0.5 s of every run
main = leaving(caption_main)
