"""What the training CLIs' parser refuses is one line naming the option or file, exit code 2, no usage (that is for
--help): a config that is missing, not UTF-8, not YAML (its line and column) or not a mapping; a value of the wrong
type on the command line or in a config; an unknown option."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from captioning.commands.train import train_main as caption_train
from text_attn.core.lightning_cli import SUBCOMMAND_HELP
from text_attn.core.version import toolkit_version
from text_attn.translation.train_cli import train_main as text_train

CKPT = "pytorch_lightning.callbacks.ModelCheckpoint"


def test_malformed_yaml_is_one_line_with_line_and_column(tmp_path, capsys):
    """(Both commands' console scripts meet bad input in the bad-input corpus's subprocess: tests/cli/
    test_bad_inputs.py; a second interpreter start of Lightning here would cost ~8 s.)"""
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  lr: 0.1\na: [\n")
    with pytest.raises(SystemExit) as exc:
        caption_train(["fit", "--config", str(bad)])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and out == ""
    assert err.splitlines() == [
        f"caption-train: error: --config {bad}: not valid YAML: line 4, column 1: expected the node content, but found "
        "'<stream end>' while parsing a flow node"
    ]


@pytest.mark.parametrize(
    ("args", "config", "message"),
    [
        (["--model.lr", "abc"], None, "--model.lr: expected a float, got abc"),
        (["--trainer.max_epochs", "x"], None, "--trainer.max_epochs: expected int or null, got x"),
        (["--data.batch_size", "1.5"], None, "--data.batch_size: expected an int, got 1.5"),
        ([], "model:\n  lr: abc\n", "--model.lr: expected a float, got abc"),
        ([], "- a\n- b\n", "expected a YAML mapping of options (key: value), got a list"),
        ([], b"\xff\xfemodel: 1\n", "not UTF-8 text (byte 0)"),
        (["--model.bogus", "3"], None, "unrecognized arguments: --model.bogus 3"),
        # never completed from its first letters (jsonargparse did: --trainer.max_step ran max_steps); the likely one
        (
            ["--trainer.max_step", "1"],
            None,
            "unrecognized arguments: --trainer.max_step (did you mean --trainer.max_steps?) 1",
        ),
        (["--model.lrr", "0.1"], None, "unrecognized arguments: --model.lrr (did you mean --model.lr?) 0.1"),
        ([], "model:\n  bogus: 3\n", "does not accept option 'model.bogus'"),
        # a block left empty (its lines commented out: null), or given a value: a traceback from jsonargparse or the
        # unread-options check
        ([], "model:\n  objective:\n", "model.objective is a block of options (key: value lines under it), got null"),
        ([], "model:\n  objective: 5\n", "model.objective is a block of options (key: value lines under it), got 5"),
        ([], "data: []\n", "data is a block of options (key: value lines under it), got []"),
        # inside a callback given by class_path: its own option named, not the whole list "expected null"
        (
            [],
            f"trainer:\n  callbacks:\n  - class_path: {CKPT}\n    init_args:\n      every_n_train_step: 5\n",
            "--trainer.callbacks: ModelCheckpoint: option 'every_n_train_step' is not accepted (a typo?)",
        ),
        (
            [],
            f"trainer:\n  callbacks:\n  - class_path: {CKPT}\n    init_args:\n      every_n_train_steps: five\n",
            "--trainer.callbacks: ModelCheckpoint: every_n_train_steps: expected int or null, got five",
        ),
        # a callback's option of the wrong type on the command line ("expected int or null, got NestedArg(...)"),
        # and one its class refuses when made (one line of the whole list: "[<...ModelCheckpoint object at 0x7f...")
        (
            [
                "--trainer.callbacks+=EarlyStopping",
                "--trainer.callbacks.monitor=val_loss",
                "--trainer.callbacks.patience=abc",
            ],
            None,
            "--trainer.callbacks: EarlyStopping: patience: expected an int, got abc",
        ),
        (
            [],
            f"trainer:\n  callbacks:\n  - class_path: {CKPT}\n  - class_path: pytorch_lightning.callbacks."
            "StochasticWeightAveraging\n    init_args: {swa_lrs: 0.01, swa_epoch_start: 0}\n",
            "--trainer.callbacks: StochasticWeightAveraging: swa_epoch_start should be a >0 integer or a float",
        ),
    ],
)
@pytest.mark.parametrize("main", [text_train, caption_train], ids=["text-train", "caption-train"])
def test_wrong_values_are_one_line_naming_the_option(main, args, config, message, tmp_path, capsys):
    if config is not None:
        path = tmp_path / "c.yaml"
        (path.write_bytes if isinstance(config, bytes) else path.write_text)(config)
        args = [*args, "--config", str(path)]
    with pytest.raises(SystemExit) as exc:
        main(["fit", *args])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and out == "" and err.count("\n") == 1 and message in err, err
    assert err.startswith(("text-train: error: ", "caption-train: error: ")) and "usage" not in err


def test_a_missing_config_and_a_folder_as_config(tmp_path, capsys):
    for name, what in ((tmp_path / "none.yaml", "no such file"), (tmp_path, "is a directory")):
        with pytest.raises(SystemExit) as exc:
            text_train(["fit", "--config", str(name)])
        assert exc.value.code == 2 and capsys.readouterr().err == f"text-train: error: --config {name}: {what}\n"


def test_help_still_prints_the_usage(capsys):
    from captioning.training.data import SOURCES

    with pytest.raises(SystemExit) as exc:
        caption_train(["fit", "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and "usage: caption-train" in out
    # jsonargparse's backspace over the space before "[=flags]" was shown as an escape, "--print_config \x08[=flags]"
    assert "--print_config[=flags]" in out and "x08" not in out and "\b" not in out
    source = " ".join(out.split("--data.source SOURCE")[-1].split("--data.karpathy_json")[0].split())
    assert all(f"``{name}``" in source for name in SOURCES), source  # flickr8k was left out


@pytest.mark.parametrize("sub", ["fit", "validate", "test"])
def test_ckpt_path_help_says_what_the_command_takes(sub, capsys):
    """Lightning's help named "hpc" and "registry" (read here as file names) and said that validate without a
    checkpoint scores the current weights (it is refused, naming best, last or a file)."""
    with pytest.raises(SystemExit):
        text_train([sub, "--help"])
    help_text = " ".join(capsys.readouterr().out.split("--ckpt_path CKPT_PATH")[-1].split("(type:")[0].split())
    assert "registry" not in help_text and "hpc" not in help_text
    assert help_text.startswith("resume a fit: last or best" if sub == "fit" else "the weights to score: best or last")


@pytest.mark.parametrize(
    ("main", "prog", "config"),
    [(caption_train, "caption-train", "shapes_soft"), (text_train, "text-train", "reorder_bahdanau")],
)
def test_help_lists_every_subcommand_with_a_whole_line(main, prog, config, capsys):
    """--help listed {fit,validate,test} (report and optimize, which the command handles before Lightning, were
    missing) with Lightning's docstrings as their lines, test's cut mid-sentence ("...make sure you never run on
    your"), and no --version."""
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and "{fit,validate,test,report,optimize}" in out and "--version" in out
    listed = " ".join(out.split("Available subcommands:")[1].split())  # argparse wraps the lines
    for name in ("fit", "validate", "test", "report", "optimize"):
        assert f" {name} {SUBCOMMAND_HELP[name]}" in listed, name
    assert "never run on your" not in out
    lightnings = {"fit": "Runs the full optimization routine", "validate": "Perform one evaluation epoch",
                  "test": "never run on your"}  # fmt: skip
    for name, theirs in lightnings.items():
        with pytest.raises(SystemExit) as exc:
            main([name, "--help"])  # the subcommand's own help opens with the same line, its options titled by it
        out = " ".join(capsys.readouterr().out.split())
        assert exc.value.code == 0 and SUBCOMMAND_HELP[name] in out and f"{name} options:" in out
        assert theirs not in out, name
    with pytest.raises(SystemExit) as exc:  # the parser's own --version, where options come before it
        main(["--config", config, "--version"])
    assert exc.value.code == 0 and capsys.readouterr().out == f"{prog} {toolkit_version()}\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--data.train_size", "-5"], "data.train_size must be at least 1, got -5"),
        (["--data.batch_size", "0"], "data.batch_size must be at least 1, got 0"),
        (["--data.min_freq", "0"], "data.min_freq must be at least 1, got 0"),
    ],
)
def test_caption_data_sizes_out_of_range_are_refused_by_name(args, message, capsys, cli_run_in_tmp):
    config = Path(__file__).parent.parent / "fixtures" / "captions" / "tiny_shapes.yaml"
    with pytest.raises(SystemExit) as exc:
        caption_train(["fit", "--config", str(config), *args])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.strip().splitlines()[-1] == f"caption-train: error: {message}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--data.train_size", "-1"], "data.train_size must be 0 or more, got -1"),
        (["--data.batch_size", "0"], "data.batch_size must be at least 1, got 0"),
        (["--data.tokenizer", "bpe"], "data.tokenizer 'bpe': choose word or subword"),
        (["--data.min_freq", "0"], "data.min_freq must be at least 1, got 0"),  # was read as 1, recorded as 0
        (
            ["--data.max_vocab", "4"],
            "data.max_vocab must be more than 4 (it counts <pad> <bos> <eos> <unk>; omit it for no cap), got 4",
        ),
    ],
)
def test_text_data_options_out_of_range_are_refused_by_name(args, message, capsys, cli_run_in_tmp):
    with pytest.raises(SystemExit) as exc:
        text_train(["fit", *args])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.strip().splitlines()[-1] == f"text-train: error: {message}"


@pytest.mark.long
def test_a_bad_data_option_is_one_line_from_the_command_itself(tmp_path):
    """Run as a user runs it: Lightning's "Seed set to 0" came on stderr before the one-line error (its logging
    handler writes to the real stderr, which capsys does not see in-process)."""
    import subprocess
    import sys

    cmd = [str(Path(sys.executable).parent / "text-train"), "fit", "--data.train_size", "-1"]
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and run.stderr == "text-train: error: data.train_size must be 0 or more, got -1\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model.network.dropout", "abc"], "model.network.dropout must be a number, got abc"),
        (["--model.network.dropout", "nan"], "model.network.dropout must be a number, got nan"),
        (["--model.network.embed_dim", "64.5"], "model.network.embed_dim must be an integer, got 64.5"),
        (["--model.network.bidirectional", "maybe"], "model.network.bidirectional must be true or false, got maybe"),
    ],
)
def test_a_network_option_of_the_wrong_type_is_one_line(args, message, capsys, cli_run_in_tmp):
    """The network block is free-form: "abc" as a width was a traceback from inside torch, "maybe" trained as true.
    (A few pairs: the network is built after the data, and the default 21,500 made cost ~1 s a case.)"""
    tiny = ["--data.train_size", "16", "--data.val_size", "2", "--data.test_size", "2"]
    with pytest.raises(SystemExit) as exc:
        text_train(["fit", "--trainer.fast_dev_run", "true", *tiny, *args])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.strip().splitlines()[-1] == f"text-train: error: {message}", err


@pytest.mark.parametrize("main", ["caption", "translate"])
def test_zero_threads_is_refused(main, capsys):
    from captioning.commands.caption import caption_main
    from text_attn.translation.translate_cli import translate_main

    with pytest.raises(SystemExit) as exc:
        (caption_main if main == "caption" else translate_main)(["x", "--threads", "0"])
    assert exc.value.code == 2 and capsys.readouterr().err == f"{main}: error: --threads must be at least 1, got 0\n"


def test_an_infinite_rate_or_weight_in_a_config_file_is_refused_by_name(capsys, cli_run_in_tmp, tmp_path):
    """The command line refuses inf ("expected a float"), YAML's .inf passed: entropy_lambda .inf made the loss -inf
    at step 0 and the line blamed the learning rate; an infinite lr passed too."""
    for main, base, text, says in (
            (caption_train, ["--config", "shapes_hard"], "model:\n  objective:\n    entropy_lambda: .inf\n",
             "caption-train: error: model.objective.entropy_lambda must be a finite number, got inf"),
            (text_train, [], "model:\n  lr: .inf\n",
             "text-train: error: model.lr must be a positive finite number, got inf")):  # fmt: skip
        config = tmp_path / "inf.yaml"
        config.write_text(text)
        with pytest.raises(SystemExit) as exc:
            main(["fit", *base, "--config", str(config)])
        assert exc.value.code == 2 and capsys.readouterr().err.strip().splitlines()[-1] == says


@pytest.mark.parametrize(
    ("main", "args", "message"),
    [
        (text_train, ["--model.lr", "-1"], "text-train: error: model.lr must be a positive finite number, got -1"),
        (
            text_train,
            ["--model.objective.label_smoothing", "1.5"],
            "model.objective.label_smoothing must be between 0 and 0.99, got 1.5",
        ),
        (
            text_train,
            ["--model.val_beam_size", "0"],
            "text-train: error: model.val_beam_size must be at least 1, got 0",
        ),
        (caption_train, ["--model.lr", "0"], "caption-train: error: model.lr must be a positive finite number, got 0"),
        (caption_train, ["--model.objective.ds_lambda", "-2"], "model.objective.ds_lambda must be at least 0, got -2"),
    ],
)
def test_rates_and_widths_out_of_range_are_refused_by_name(main, args, message, capsys, cli_run_in_tmp):
    with pytest.raises(SystemExit) as exc:
        main(["fit", *args])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err.strip().splitlines()[-1]


@pytest.mark.long  # a fit and a validate: ~5 s
def test_an_encoder_fine_tuned_at_rate_0_is_refused_for_fit_alone(capsys, caplog, cli_run_in_tmp, tmp_path):
    """The stage ran its backward every step and learned nothing, and the model file said "fine-tuned on captions";
    validate and test of such a run's checkpoint train nothing and go on. Refused before the trainer is made or the
    data read (it came after the Trainer's lines and the data's notes, and under DDP from every process)."""
    config = str(Path(__file__).parent.parent / "fixtures" / "captions" / "tiny_shapes.yaml")
    args = ["--config", config, "--model.encoder.fine_tune", "last", "--model.encoder_lr", "0"]
    with caplog.at_level(logging.INFO), pytest.raises(SystemExit) as exc:
        caption_train(["fit", *args])
    from captioning.commands.train import caption_train_cli

    said = capsys.readouterr().err
    assert exc.value.code == 2, said
    assert said.startswith("caption-train: error: model.encoder_lr 0 with model.encoder.fine_tune last: the encoder")
    assert said.count("\n") == 1 and not [r for r in caplog.records if "available" in r.getMessage()]
    fit = caption_train_cli(["fit", "--config", config, "--model.encoder.fine_tune", "last"])
    path = tmp_path / "last.ckpt"
    fit.trainer.save_checkpoint(path)
    cli = caption_train_cli(["validate", *args, "--ckpt_path", str(path)])
    assert "val_loss" in cli.trainer.callback_metrics


@pytest.mark.parametrize(
    ("main", "prog", "config", "what"),
    [(caption_train, "caption-train", "shapes_soft", "source shapes"),
     (text_train, "text-train", "reorder_bahdanau", "task reorder")],
)  # fmt: skip
def test_a_data_root_the_data_does_not_read_is_said_before_the_trainer_is_made(main, prog, config, what, tmp_path,
                                                                              capsys, caplog):  # fmt: skip
    # before, the Trainer's lines ("GPU available: False, used: False", ...) came first: made, then the data set up
    with caplog.at_level(logging.INFO), pytest.raises(SystemExit) as exc:
        main(["fit", "--config", config, "--data.root", str(tmp_path)])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and out == "" and not [r for r in caplog.records if "available" in r.getMessage()]
    assert err == (f"{prog}: error: data.root {tmp_path}: not a chunk folder ({prog} optimize writes one); {what} "
                   "reads no data.root\n")  # fmt: skip


@pytest.mark.parametrize(
    "arch, name", [("rnn", "dropout"), ("transformer", "dropout"), ("transformer", "attn_dropout")]
)
def test_a_dropout_of_zero_as_yaml_reads_it_is_taken_and_a_width_of_zero_is_not(arch, name):
    """YAML reads ``--model.network.dropout 0`` as the integer 0, which the widths' check refused ("must be at least
    1"): docs/text.md's own test command with it failed so."""
    from text_attn.translation.networks import make_config

    assert getattr(make_config(arch, {name: 0}, src_vocab_size=9, tgt_vocab_size=9), name) == 0
    with pytest.raises(ValueError, match=f"model.network.{name} must be in \\[0, 1\\), got 1"):
        make_config(arch, {name: 1}, src_vocab_size=9, tgt_vocab_size=9)
    width = "embed_dim" if arch == "rnn" else "d_model"
    with pytest.raises(ValueError, match=f"model.network.{width} must be at least 1, got 0"):
        make_config(arch, {width: 0, name: 0}, src_vocab_size=9, tgt_vocab_size=9)


@pytest.mark.parametrize("sub, limit", [("validate", "limit_val_batches"), ("test", "limit_test_batches")])
def test_scoring_no_batch_is_refused(sub, limit, capsys):
    """validate with --trainer.limit_val_batches 0 ran nothing, printed nothing and exited 0."""
    config = str(Path(__file__).parents[1] / "fixtures" / "text" / "tiny_reorder.yaml")
    with pytest.raises(SystemExit) as exc:
        text_train([sub, "--config", config, "--ckpt_path", "null", f"--trainer.{limit}", "0"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"text-train: error: {sub} with trainer.{limit} 0 scores no batch: give a count or a fraction above 0 "
        "(default: 1.0, every batch)")  # fmt: skip


@pytest.mark.parametrize(("subcommand", "logger"), [("fit", True), ("validate", True), ("fit", False)])
def test_a_run_refused_at_its_data_leaves_no_run_folder(subcommand, logger, cli_run_in_tmp, capsys):
    """Lightning makes version_N (TensorBoard's file in it) before the data module's setup: each refused run left an
    empty one (and the config's root folder), and the next run's folder was numbered past it. A folder an earlier run
    filled is kept. With no logger, the model file's folder (made before training) was left empty."""
    Path("empty_root").mkdir()
    args = [subcommand, "--config", "multi30k_de_en_bahdanau", "--data.root", "empty_root"]
    args += ["--trainer.default_root_dir", "logs/a", *(["--ckpt_path", "null"] if subcommand == "validate" else [])]
    args += [] if logger else ["--trainer.logger", "false", "--model.export_path", "logs/a/model.pt"]
    for earlier in (False, True):
        if earlier:  # an earlier run's folder: its files are its own
            Path("logs/a/lightning_logs/version_0/checkpoints").mkdir(parents=True)
            Path("logs/a/lightning_logs/version_0/checkpoints/last.ckpt").write_bytes(b"weights")
        with pytest.raises(SystemExit) as exc:
            text_train(args)
        assert exc.value.code == 2
        assert "found neither" in capsys.readouterr().err
        left = sorted(p.as_posix() for p in Path().rglob("*") if p.is_file() or not any(p.iterdir()))
        assert left == ["empty_root", *(["logs/a/lightning_logs/version_0/checkpoints/last.ckpt"] if earlier else [])]


def test_a_full_disk_is_one_line_and_a_log_writers_thread_one_note(tmp_path, capsys, cli_run_in_tmp, monkeypatch):
    """A run started on a full disk ended in two or three tracebacks (the loggers' hparams.yaml, TensorBoard's event
    writer thread): one line now, exit code 2, and the thread's error one note."""
    import errno
    import threading

    from text_attn.core import lightning_cli

    def full(path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(lightning_cli, "refuse_export_path", full)
    with pytest.raises(SystemExit) as exc:
        text_train(["fit", "--config", "reorder_bahdanau", "--model.export_path", str(tmp_path / "m.pt")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and err[-1] == (f"text-train: error: cannot write {tmp_path / 'm.pt'}: No space left on "
                                               "device (free some space, or give --trainer.default_root_dir on "
                                               "another disk)"), err  # fmt: skip
    before = threading.excepthook
    said = []
    args = type("Args", (), {"exc_value": OSError(errno.ENOSPC, "No space left on device", "ev.tfevents")})()
    lightning_cli._full_disk_in_thread("text-train", said.append, args)
    assert capsys.readouterr().err == ("text-train: note: a log writer stopped: it could not write ev.tfevents: No "
                                       "space left on device\n") and said == []  # fmt: skip
    other = type("Args", (), {"exc_value": ValueError("x")})()
    lightning_cli._full_disk_in_thread("text-train", said.append, other)
    assert said == [other] and threading.excepthook is before  # another error: Python's own hook


@pytest.mark.parametrize("train, prog", [(text_train, "text-train"), (caption_train, "caption-train")])
def test_torchrun_starting_other_processes_than_the_trainers_is_refused(train, prog, cli_run_in_tmp, capsys,
                                                                         monkeypatch):  # fmt: skip
    """torchrun --nproc-per-node 2 with --trainer.devices 1: each process ran a whole fit of its own, side by side
    (two version folders, two model files, every line twice), exit 0."""
    for name, value in (("TORCHELASTIC_RUN_ID", "t"), ("WORLD_SIZE", "2"), ("LOCAL_WORLD_SIZE", "2"), ("RANK", "0"),
                        ("LOCAL_RANK", "0"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29731")):  # fmt: skip
        monkeypatch.setenv(name, value)
    config = "reorder_bahdanau" if prog == "text-train" else "shapes_soft"
    with pytest.raises(SystemExit) as exc:
        train(["fit", "--config", config, "--trainer.devices", "1", "--trainer.accelerator", "cpu",
               "--trainer.max_steps", "1", "--trainer.default_root_dir", "runs/x"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and err[-1] == (
        f"{prog}: error: trainer.devices x trainer.num_nodes is 1 process(es), and torchrun started 2 (WORLD_SIZE): "
        "each would run a training of its own: give --trainer.devices 2 --trainer.num_nodes 1"
    )
    assert not Path("runs").exists()


@pytest.mark.long  # a corpus config read up to its data: ~2-4 s each
@pytest.mark.parametrize(("local_rank", "said"), [("0", True), ("1", False)])
def test_an_error_every_process_meets_alike_is_said_by_a_machines_first(local_rank, said, tmp_path, capsys,
                                                                         monkeypatch, cli_run_in_tmp):  # fmt: skip
    """Under DDP each process reads the same options and data: a data folder that is not there was said once a
    process (the line twice on 2 CPU processes), after Lightning's banner. The others exit with the same code."""
    monkeypatch.setenv("LOCAL_RANK", local_rank)  # as Lightning's launcher sets it in the processes it starts
    with pytest.raises(SystemExit) as exc:
        text_train(["fit", "--config", "multi30k_de_en_bahdanau", "--data.root", str(tmp_path / "gone")])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err == (f"text-train: error: {tmp_path / 'gone'}: no such folder (data.root: the corpus folder with "
                   "<split>.<lang>[.gz] files)\n" if said else ""), err  # fmt: skip


@pytest.mark.long  # a tiny fit to its first step: ~3 s
def test_an_error_of_a_process_own_work_is_said_by_it(tmp_path, capsys, monkeypatch, cli_run_in_tmp):
    """Once its own work began (here its first training step: a damaged chunk only it streams), an error is this
    process's own: said by it, whatever its rank (review: it was silenced, the first process saying only "another
    process of this run was lost")."""
    from text_attn.translation.module import TranslationModule

    def damaged(self, batch, batch_idx):
        raise ValueError("a damaged chunk only this process reads")

    monkeypatch.setattr(TranslationModule, "training_step", damaged)
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(SystemExit) as exc:
        text_train(["fit", "--config", "reorder_bahdanau", "--trainer.max_steps", "1"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "text-train: error: a damaged chunk only this process reads" in err, err


@pytest.mark.long  # a fit to its start: ~3 s
def test_a_fit_start_check_every_process_meets_is_said_by_the_first_alone(capsys, monkeypatch, cli_run_in_tmp):
    """SCST without a start is refused as the fit starts (on_fit_start), where every process meets it alike: under
    DDP the line came once a process again once a process's own work was marked from on_fit_start (review)."""
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(SystemExit) as exc:
        text_train(["fit", "--config", "reorder_bahdanau_scst", "--model.init_from", "null"])
    assert exc.value.code == 2 and capsys.readouterr().err == ""
