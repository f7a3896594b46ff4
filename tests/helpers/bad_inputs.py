"""The bad-input corpus: bad inputs for the six commands, each run through the command's own entry point in one
process (the driver below; tests/cli/test_bad_inputs.py starts it as a subprocess). Per case the driver records the exit
code, stdout, stderr, and any uncaught exception's traceback (what a user must never see).

    python tests/helpers/bad_inputs.py WORKDIR OUT.json
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import sys
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
PHOTO = TESTS / "fixtures" / "images" / "coffee.png"
TINY_SHAPES = TESTS / "fixtures" / "captions" / "tiny_shapes.yaml"


@dataclass
class Case:
    name: str  # what is wrong, in words
    command: str  # caption, caption-train, caption-export, translate, text-train, text-export
    args: list[str]
    code: int  # the exit code it must end with
    says: str  # a piece of the one error line (it names the input and what is wrong)
    stdin: str | bytes | None = None
    result: dict = field(default_factory=dict)


def _entry(command: str):
    if command == "caption":
        from captioning.commands.caption import caption_main as main
    elif command == "caption-train":
        from captioning.commands.train import train_main as main
    elif command == "caption-export":
        from captioning.commands.export import export_main as main
    elif command == "translate":
        from text_attn.translation.translate_cli import translate_main as main
    elif command == "text-train":
        from text_attn.translation.train_cli import train_main as main
    else:
        from text_attn.translation.export import export_main as main
    return main


def fixtures(work: Path) -> dict[str, Path]:
    """Model files, checkpoints and data files the cases need, written into ``work``."""
    import torch

    sys.path.insert(0, str(TESTS))
    from helpers.multi30k import write_corpus

    from captioning.model.captioner import Captioner
    from captioning.model.decoder import DecoderConfig
    from captioning.model.encoder import EncoderConfig
    from captioning.training.shapes import VOCAB
    from text_attn.core.vocab import Vocabulary
    from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
    from text_attn.translation.translator import Translator

    work.mkdir(parents=True, exist_ok=True)
    f = {"work": work}
    torch.manual_seed(0)
    enc = EncoderConfig(backbone="resnet18", stride=16, weights=None, grid=4, image_size=64)
    cap = Captioner.build(Vocabulary.build([list(VOCAB)]), enc, DecoderConfig(embed_dim=16, hidden_dim=32, attn_dim=16))
    cap.save(work / "caption.pt")
    f["caption_model"] = work / "caption.pt"
    vocab = Vocabulary.build([["ein", "mann", "a", "man"]])
    cfg = Seq2SeqConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), embed_dim=8, enc_hidden=8, dec_hidden=8,
                        attn_dim=8)  # fmt: skip
    Translator(Seq2Seq(cfg), vocab, vocab, "word", True).save(work / "text.pt")
    f["text_model"] = work / "text.pt"
    raw = f["caption_model"].read_bytes()
    (work / "model.ckpt").write_bytes(raw)  # a model file under a checkpoint's name
    (work / "truncated.pt").write_bytes(raw[: len(raw) // 3])
    (work / "notes.pt").write_text("not a model\n")
    # a training checkpoint by content (what Lightning writes), whatever its name
    ckpt = {"state_dict": {}, "pytorch-lightning_version": "2.6.0", "hyper_parameters": {}, "epoch": 0}
    torch.save(ckpt, work / "run.ckpt")
    torch.save(ckpt, work / "looks_like_a_model.pt")
    torch.save({"format": "attention-toolkit/caption-model"}, work / "model_named.ckpt")
    (work / "notanimage.png").write_text("text, not a PNG\n")
    (work / "copy.png").write_bytes(PHOTO.read_bytes())
    (work / "truncated.png").write_bytes(PHOTO.read_bytes()[:300])
    (work / "empty").mkdir(exist_ok=True)
    (work / "bad.yaml").write_text("model:\n  lr: [\n")
    (work / "list.yaml").write_text("- 1\n- 2\n")
    (work / "unknown_key.yaml").write_text("model:\n  learning_rate: 0.1\n")
    (work / "latin1.yaml").write_bytes(b"# caf\xe9\nmodel: {}\n")
    (work / "info.json").write_text("{not json")
    corpus = write_corpus(work / "m30k")
    f["corpus"] = corpus
    (work / "a.de").write_text("Ein Mann.\nZwei Hunde.\n")
    (work / "a.en").write_text("A man.\nTwo dogs.\nThree cats.\n")
    (work / "pairs.tsv").write_text("Ein Mann.\tA man.\nZwei Hunde.\tTwo dogs.\nDrei Katzen.\tThree cats.\n")
    (work / "done.txt").write_text("A man.\n")  # a translate --output an interrupted run wrote
    (work / "one_side_empty.en").write_text("A man.\n\n")
    (work / "latin1.de").write_bytes("Ein Mann.\nZwei Hünde.\n".encode("latin-1"))
    (work / "empty.de").write_text("")
    (work / "empty.en").write_text("")
    (work / "crlf.de").write_bytes(b"Ein Mann.\r\nZwei Hunde.\r\n" * 8)
    (work / "crlf.en").write_bytes(b"A man.\r\nTwo dogs.\r\n" * 8)
    (work / "broken.gz").write_bytes(gzip.compress(b"Ein Mann.\n" * 50)[:-10])
    (work / "jsonl_in").mkdir(exist_ok=True)
    # what the security cases plant (SECURITY.md): a FIFO and a link as outputs, inputs named as outputs, a checkpoint
    # that runs code when unpickled, a model file whose info holds terminal escape sequences
    from helpers.attacks import code_checkpoint

    from text_attn.core.modelfile import update_info

    if not (work / "fifo").exists():
        os.mkfifo(work / "fifo")
    (work / "victim.txt").write_text("precious\n")
    if not (work / "link").is_symlink():
        (work / "link").symlink_to(work / "victim.txt")
    (work / "photos").mkdir(exist_ok=True)
    (work / "photos" / "b.png").write_bytes(PHOTO.read_bytes())
    if not (work / "hard.png").exists():
        os.link(work / "photos" / "b.png", work / "hard.png")
    code_checkpoint(work / "evil.ckpt", work / "code_ran")
    (work / "comments.yaml").write_text("# settings to come\n")  # jsonargparse: "Unexpected config: # settings ..."
    (work / "cut.ckpt").write_bytes((work / "evil.ckpt").read_bytes()[:40])  # a checkpoint cut off by a copy
    (work / "escapes.pt").write_bytes(f["caption_model"].read_bytes())
    update_info(work / "escapes.pt", {"data": "photos\x1b]52;c;ZWNobw==\x07\x1b[2J"})
    return f


def cases(f: dict[str, Path]) -> list[Case]:
    w = f["work"]
    cm, tm = str(f["caption_model"]), str(f["text_model"])
    photo = str(PHOTO)
    small = ["--max-len", "4"]
    c = [
        # --- caption ----------------------------------------------------------------------------------------------
        Case("missing image among good ones", "caption", [photo, str(w / "nope.png"), "--model", cm, *small], 1,
             "nope.png"),
        Case("text file named .png", "caption", [str(w / "notanimage.png"), "--model", cm, *small], 1,
             "notanimage.png"),
        Case("truncated PNG", "caption", [str(w / "truncated.png"), "--model", cm, *small], 1, "truncated.png"),
        Case("empty folder alone", "caption", [str(w / "empty"), "--model", cm], 2, "no images"),
        Case("empty folder among images", "caption", [photo, str(w / "empty"), "--model", cm, *small], 1,
             "empty: no image files"),
        Case("model file missing", "caption", [photo, "--model", str(w / "gone.pt")], 2, "gone.pt"),
        Case("model file is text", "caption", [photo, "--model", str(w / "notes.pt")], 2, "notes.pt"),
        Case("model file truncated", "caption", [photo, "--model", str(w / "truncated.pt")], 2, "truncated.pt"),
        Case("text model given to caption", "caption", [photo, "--model", tm], 2, "text.pt"),
        Case("training checkpoint given as model", "caption", [photo, "--model", str(w / "run.ckpt")], 2,
             "caption-export"),
        Case("checkpoint named .pt", "caption", [photo, "--model", str(w / "looks_like_a_model.pt")], 2,
             "looks_like_a_model.pt"),
        Case("beam size 0", "caption", [photo, "--model", cm, "--beam-size", "0"], 2, "--beam-size"),
        Case("beam size above the vocabulary", "caption", [photo, "--model", cm, "--beam-size", "100000"], 2,
             "more than the model's"),
        Case("unknown option", "caption", [photo, "--model", cm, "--colour", "red"], 2, "--colour"),
        Case("--demo of an unknown kind", "caption", ["--demo", "fish"], 2, "fish"),
        Case("--scores in a folder that cannot be written", "caption", [photo, "--model", cm, "--references",
             str(w / "bad.yaml"), "--scores", "/proc/s.json"], 2, "its folder /proc cannot be written into"),
        Case("--overlay names a file", "caption", [photo, "--model", cm, "--overlay", str(w / "bad.yaml")], 2,
             "is a file: --overlay names the folder"),
        Case("--given-file is a folder", "caption", [photo, "--model", cm, "--given-file", str(w / "empty")], 2,
             "a folder; give the file of captions"),
        Case("--demo with --jsonl (not written)", "caption", ["--demo", "--jsonl", str(w / "d.jsonl")], 2,
             "without --demo"),
        Case("--model-info with images", "caption", [photo, "--model", cm, "--model-info"], 2, "--model-info"),
        Case("zero threads", "caption", [photo, "--model", cm, "--threads", "0"], 2, "--threads"),
        Case("batch size 0", "caption", [photo, "--model", cm, "--batch-size", "0"], 2, "--batch-size"),
        Case("batch size past sys.maxsize (the loader's traceback)", "caption", [photo, "--model", cm, "--batch-size",
             "99999999999999999999"], 2, "--batch-size must be at most 65,536"),
        Case("negative workers", "caption", [photo, "--model", cm, "--workers", "-1"], 2, "--workers"),
        Case("--jsonl in a missing folder", "caption", [photo, "--model", cm, "--jsonl", str(w / "no_c" / "o.jsonl")],
             2, "o.jsonl"),
        Case("--html in a missing folder (said, not made)", "caption", [photo, "--model", cm, "--html",
             str(w / "no_h" / "p.html")], 2, "no_h does not exist"),
        Case("--jsonl equals an input image", "caption", [photo, str(w / "copy.png"), "--model", cm, "--jsonl",
             str(w / "copy.png")], 2, "is also an input"),
        Case("--html equals an input image", "caption", [str(w / "copy.png"), "--model", cm, "--html",
             str(w / "copy.png")], 2, "is also an input"),
        Case("--html equals --jsonl", "caption", [photo, "--model", cm, "--jsonl", str(w / "x"), "--html",
             str(w / "x")], 2, "same file"),
        Case("--html is a folder", "caption", [photo, "--model", cm, "--html", str(w / "empty")], 2, "--html"),
        Case("--jsonl is a FIFO", "caption", [photo, "--model", cm, *small, "--jsonl", str(w / "fifo")], 2,
             "is a FIFO, not a regular file"),
        Case("--jsonl is a symbolic link", "caption", [photo, "--model", cm, *small, "--jsonl", str(w / "link")], 2,
             "is a symbolic link"),
        Case("--html is an image found in an input folder", "caption", [str(w / "photos"), "--model", cm, *small,
             "--html", str(w / "photos" / "b.png")], 2, "is also an input"),
        Case("stdin's list names the --jsonl file", "caption", ["-", "--model", cm, *small, "--jsonl",
             str(w / "photos" / "b.png")], 2, "is also an input", stdin=f"{w / 'photos' / 'b.png'}\n"),
        Case("--jsonl is a hard link to an input", "caption", [str(w / "photos" / "b.png"), "--model", cm, *small,
             "--jsonl", str(w / "hard.png")], 2, "is also an input"),
        Case("a model file whose info holds terminal escapes (printed inert)", "caption", ["--model",
             str(w / "escapes.pt"), "--model-info"], 0, ""),
        Case("stdin list with a missing path", "caption", ["-", "--model", cm, *small], 1, "missing.jpg",
             stdin=f"{photo}\n\n{w / 'missing.jpg'}\n"),
        Case("stdin list with CRLF line ends (captioned)", "caption", ["-", "--model", cm, *small], 0, "",
             stdin=f"{photo}\r\n{photo}\r\n"),
        Case("a model file named .ckpt (read by content)", "caption", [photo, "--model", str(w / "model.ckpt"),
             *small], 0, ""),
        # --- caption-export -------------------------------------------------------------------------------------------
        Case("export: input missing", "caption-export", [str(w / "gone.ckpt"), str(w / "o.pt")], 2, "gone.ckpt"),
        Case("export: input is text", "caption-export", [str(w / "notes.pt"), str(w / "o.pt")], 2, "notes.pt"),
        Case("export: output equals input (re-export in place: supported)", "caption-export", [cm, cm], 0, ""),
        Case("export: text model as input", "caption-export", [tm, str(w / "o.pt")], 2, "text.pt"),
        Case("export: --info not JSON", "caption-export", [cm, str(w / "o.pt"), "--info", str(w / "info.json")], 2,
             "info.json"),
        # --- caption-train --------------------------------------------------------------------------------------------
        Case("train: malformed YAML", "caption-train", ["fit", "--config", str(w / "bad.yaml")], 2, "line 3"),
        Case("train: model.export_path a folder (said before training)", "caption-train", ["fit", "--config",
             str(TINY_SHAPES), "--model.export_path", str(w / "empty")], 2, "said before training"),
        Case("train: data.feature_cache_dir a file (said before encoding)", "caption-train", ["fit", "--config",
             str(TINY_SHAPES), "--data.cache_features", "true", "--data.feature_cache_dir", str(w / "bad.yaml")], 2,
             "data.feature_cache_dir"),
        Case("train: a decoder width of 0", "caption-train", ["fit", "--config", str(TINY_SHAPES),
             "--model.decoder.hidden_dim", "0"], 2, "model.decoder.hidden_dim must be at least 1"),
        Case("train: a Trainer value Lightning refuses", "caption-train", ["fit", "--config", str(TINY_SHAPES),
             "--trainer.max_steps", "-5"], 2, "max_steps"),
        Case("train: unknown config key", "caption-train", ["fit", "--config", str(w / "unknown_key.yaml")], 2,
             "model.learning_rate"),
        Case("train: config not UTF-8", "caption-train", ["fit", "--config", str(w / "latin1.yaml")], 2, "UTF-8"),
        Case("train: wrong type", "caption-train", ["fit", "--config", str(TINY_SHAPES), "--model.lr", "abc"], 2,
             "--model.lr"),
        Case("train: negative size", "caption-train", ["fit", "--config", str(TINY_SHAPES), "--data.train_size",
             "-5"], 2, "data.train_size"),
        Case("train: Flickr8k root missing", "caption-train", ["fit", "--config", str(TINY_SHAPES), "--data.source",
             "flickr8k", "--data.root", str(w / "nowhere")], 2, "nowhere"),
        Case("train: init_from a text model", "caption-train", ["fit", "--config", str(TINY_SHAPES),
             "--model.init_from", tm], 2, "text.pt"),
        # --- translate --------------------------------------------------------------------------------------------
        Case("translate: --output - beside --jsonl - (the lines were dropped)", "translate", ["Ein Mann.", "--model",
             tm, "--output", "-", "--jsonl", "-"], 2, "--output - and --jsonl - both name stdout"),
        Case("translate: --model a device", "translate", ["Ein Mann.", "--model", "/dev/null"], 2,
             "/dev/null: not a regular file (a device, FIFO or socket), not a model file"),
        Case("caption: --model a device", "caption", [photo, "--model", "/dev/null"], 2,
             "/dev/null: not a regular file (a device, FIFO or socket), not a model file"),
        Case("translate: caption model", "translate", ["Ein Mann.", "--model", cm], 2, "caption.pt"),
        Case("translate: truncated model", "translate", ["Ein Mann.", "--model", str(w / "truncated.pt")], 2,
             "truncated.pt"),
        Case("translate: checkpoint", "translate", ["Ein Mann.", "--model", str(w / "run.ckpt")], 2, "text-export"),
        Case("translate: an option shortened (--out for --output)", "translate", ["--out", "Ein Mann.", "--model", tm],
             2, "unrecognized arguments: --out (did you mean --output?)"),
        Case("translate: empty argument among arguments", "translate", ["--model", tm, *small, "ein mann", " ",
             "ein mann"], 1, "input 2: empty"),
        Case("translate: blank line among lines (a blank line out)", "translate", ["--model", tm, *small], 0, "",
             stdin="ein mann\n\nein mann\n"),
        Case("translate: bytes not UTF-8", "translate", ["--model", tm, *small], 1, "input 2: not valid UTF-8",
             stdin=b"ein mann\nzwei \xff hunde\n"),
        Case("translate: a 10,000-word line (translated)", "translate", ["--model", tm, "--max-len", "3"], 0, "",
             stdin=" ".join(["ein mann"] * 5000) + "\n"),
        Case("translate: CRLF lines (translated)", "translate", ["--model", tm, *small], 0, "",
             stdin="ein mann\r\nein mann\r\n"),
        Case("translate: beam size 0", "translate", ["x", "--model", tm, "--beam-size", "0"], 2, "--beam-size"),
        Case("translate: n-best above beam", "translate", ["x", "--model", tm, "--n-best", "3"], 2, "--n-best"),
        Case("translate: --output equals --html", "translate", ["x", "--model", tm, "--output", str(w / "t"),
             "--html", str(w / "t")], 2, "same file"),
        Case("translate: --output in a missing folder", "translate", ["x", "--model", tm, "--output",
             str(w / "no_t" / "t.txt")], 2, "t.txt"),
        Case("translate: --html in a missing folder (said, not made)", "translate", ["x", "--model", tm, "--html",
             str(w / "no_th" / "t.html")], 2, "no_th does not exist"),
        Case("translate: --jsonl in a missing folder (said, not made)", "translate", ["x", "--model", tm, "--jsonl",
             str(w / "no_tj" / "t.jsonl")], 2, "no_tj does not exist"),
        Case("translate: --resume, --jsonl missing beside --output's lines", "translate", ["x", "--model", tm,
             "--output", str(w / "done.txt"), "--resume", "--jsonl", str(w / "tr.jsonl")], 2, "does not exist"),
        Case("translate: --ensemble with a caption model", "translate", ["x", "--model", tm, "--ensemble", cm], 2,
             "caption.pt"),
        Case("translate: --ensemble with --evidence", "translate", ["x", "--model", tm, "--ensemble", tm,
             "--evidence", "--jsonl", "-"], 2, "not an ensemble's"),  # fmt: skip
        Case("translate: value of the wrong type", "translate", ["x", "--model", tm, "--beam-size", "x"], 2,
             "--beam-size"),
        Case("translate: --max-len 0", "translate", ["x", "--model", tm, "--max-len", "0"], 2, "--max-len"),
        Case("translate: --model-info with sentences", "translate", ["x", "--model", tm, "--model-info"], 2,
             "--model-info"),
        Case("translate: a sampler setting without --sample", "translate", ["x", "--model", tm, "--temperature", "2"],
             2, "only applies with --sample"),
        Case("translate: --output named as a numbered --plot file", "translate", ["x", "y", "--model", tm, "--plot",
             str(w / "q.png"), "--output", str(w / "q-2.png")], 2, "may write"),
        Case("translate: '-' among sentences", "translate", ["x", "-", "--model", tm], 2,
             "reads the sentences from stdin"),
        Case("translate: --length-penalty nan", "translate", ["x", "--model", tm, "--length-penalty", "nan"], 2,
             "expected a finite number"),
        Case("translate: a --sample-seed torch cannot take", "translate", ["x", "--model", tm, "--sample",
             "--sample-seed", str(2**64)], 2, "--sample-seed"),
        Case("translate: --plot is a folder", "translate", ["x", "--model", tm, "--plot", str(w / "empty")], 2,
             "--plot"),
        # --- text-train -----------------------------------------------------------------------------------------------
        Case("text: malformed YAML", "text-train", ["fit", "--config", str(w / "bad.yaml")], 2, "line 3"),
        Case("text: config is a list", "text-train", ["fit", "--config", str(w / "list.yaml")], 2, "mapping"),
        Case("text: wrong type", "text-train", ["fit", "--model.lr", "abc"], 2, "--model.lr"),
        Case("text: a width of 0", "text-train", ["fit", "--config", "reorder_bahdanau", "--model.network.embed_dim",
             "0"], 2, "model.network.embed_dim must be at least 1"),
        Case("text: no synthetic pairs", "text-train", ["fit", "--data.train_size", "0"], 2,
             "data.train_size must be at least 1 for the synthetic task"),
        Case("text: a Multi30k config's val_size 0 beside a TSV", "text-train", ["fit", "--config",
             "multi30k_de_en_bahdanau", "--data.task", "tsv", "--data.path", str(w / "pairs.tsv")], 2,
             "data.val_size 0: task tsv cuts its val pairs out of the corpus"),
        Case("text: a test of no test pairs", "text-train", ["test", "--data.task", "tsv", "--data.path",
             str(w / "pairs.tsv"), "--data.val_size", "1", "--data.test_size", "0", "--ckpt_path", "null"], 2,
             "no test pairs: data.test_size is 0"),
        Case("text: corpus file missing", "text-train", ["fit", "--data.task", "parallel", "--data.src_path",
             str(w / "gone.de"), "--data.tgt_path", str(w / "a.en")], 2, "gone.de"),
        Case("text: misaligned corpus", "text-train", ["fit", "--data.task", "parallel", "--data.src_path",
             str(w / "a.de"), "--data.tgt_path", str(w / "a.en")], 2, "a.de has 2 lines"),
        Case("text: one side empty", "text-train", ["fit", "--data.task", "parallel", "--data.src_path",
             str(w / "a.de"), "--data.tgt_path", str(w / "one_side_empty.en")], 2, "one_side_empty.en:2"),
        Case("text: corpus not UTF-8", "text-train", ["fit", "--data.task", "parallel", "--data.src_path",
             str(w / "latin1.de"), "--data.tgt_path", str(w / "a.en")], 2, "latin1.de:2"),
        Case("text: empty corpus", "text-train", ["fit", "--data.task", "parallel", "--data.src_path",
             str(w / "empty.de"), "--data.tgt_path", str(w / "empty.en")], 2, "no sentence pairs"),
        Case("text: damaged gzip", "text-train", ["fit", "--data.task", "parallel", "--data.src_path",
             str(w / "broken.gz"), "--data.tgt_path", str(w / "a.en")], 2, "broken.gz"),
        Case("text: pair root missing", "text-train", ["fit", "--data.task", "pair", "--data.root", str(w / "none"),
             "--data.src_lang", "de", "--data.tgt_lang", "en"], 2, "none"),
        Case("text: pair language missing", "text-train", ["fit", "--data.task", "pair", "--data.root",
             str(f["corpus"]), "--data.src_lang", "cs", "--data.tgt_lang", "en"], 2, "train.cs"),
        Case("text: subword vocabulary too small", "text-train", ["fit", "--data.task", "pair", "--data.root",
             str(f["corpus"]), "--data.src_lang", "de", "--data.tgt_lang", "en", "--data.tokenizer", "subword",
             "--data.subword_vocab", "10"], 2, "subword_vocab"),
        Case("text: --ckpt_path a model file", "text-train", ["test", "--ckpt_path", tm], 2, "--model.init_from"),
        Case("text: --ckpt_path missing", "text-train", ["test", "--ckpt_path", str(w / "gone.ckpt")], 2, "gone.ckpt"),
        Case("text: a config of comments only", "text-train", ["fit", "--config", str(w / "comments.yaml")], 2,
             "comments.yaml: no options in it (an empty file, or comments only)"),
        Case("text: --ckpt_path cut off", "text-train", ["test", "--ckpt_path", str(w / "cut.ckpt")], 2,
             "cut.ckpt: not a training checkpoint: 40 bytes that torch cannot read as one (cut off"),
        Case("text: --ckpt_path a folder", "text-train", ["test", "--ckpt_path", str(w / "photos")], 2,
             "photos: a folder, not a checkpoint file"),
        Case("text: --ckpt_path a URL", "text-train", ["test", "--ckpt_path", "http://127.0.0.1:9/evil.ckpt"], 2,
             "download it first"),
        Case("caption-train: --ckpt_path a checkpoint that runs code", "caption-train", ["test", "--config",
             str(TINY_SHAPES), "--ckpt_path", str(w / "evil.ckpt")], 2, "evil.ckpt"),
        Case("caption-train: --ckpt_path a model file", "caption-train", ["test", "--config", str(TINY_SHAPES),
             "--ckpt_path", cm], 2, "not a training checkpoint"),
        Case("text: init_from a caption model", "text-train", ["fit", "--config", "reorder_bahdanau",
             "--model.init_from", cm], 2, "caption.pt"),
        # --- text-export ----------------------------------------------------------------------------------------------
        Case("text-export: caption model", "text-export", [cm, str(w / "o.pt")], 2, "caption.pt"),
        Case("text-export: missing input", "text-export", [str(w / "gone.ckpt"), str(w / "o.pt")], 2, "gone.ckpt"),
        Case("text-export: output equals input (re-export in place: supported)", "text-export", [tm, tm], 0, ""),
        Case("text-export: output is a folder", "text-export", [tm, str(w / "empty")], 2, "empty"),
        Case("caption-export: output is a folder", "caption-export", [cm, str(w / "empty")], 2, "empty"),
        Case("text-export: not a model", "text-export", [str(w / "notes.pt"), str(w / "o.pt")], 2, "notes.pt"),
        Case("text-export: output is a FIFO", "text-export", [tm, str(w / "fifo")], 2, "is a FIFO"),
        Case("caption-export: output is a symbolic link", "caption-export", [cm, str(w / "link")], 2,
             "is a symbolic link"),
        Case("translate: --output is a FIFO", "translate", ["x", "--model", tm, "--output", str(w / "fifo")], 2,
             "is a FIFO"),
    ]  # fmt: skip
    return c


def run_case(case: Case) -> dict:
    main = _entry(case.command)
    out, err = io.StringIO(), io.StringIO()
    stdin = case.stdin
    if isinstance(stdin, bytes):  # what Python makes of bytes that are not UTF-8 on stdin
        stdin = stdin.decode("utf-8", errors="surrogateescape")
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin or "")
    code, trace = None, None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(case.args)
            code = 0 if code is None else code
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - the point: anything else is a defect to report
        trace = traceback.format_exc()
        code = "traceback"
    finally:
        sys.stdin = old_stdin
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue(), "traceback": trace}


def main(argv: list[str]) -> int:
    work, out = Path(argv[0]), Path(argv[1])
    work.mkdir(parents=True, exist_ok=True)
    os.chdir(work)  # runs write their logs and config.yaml here, not in the repository
    all_cases = cases(fixtures(work))
    for case in all_cases:
        case.result = run_case(case)
    out.write_text(json.dumps([asdict(c) for c in all_cases], default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
