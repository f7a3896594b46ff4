"""What the training commands print: --help starts with what the tool does and where its configs are; a run shows
no promotional tips or tensorboardX notices, and its default logger writes TensorBoard event files and a metrics.csv
that `text-train report` reads; an old config's `data.image_size` gets one line saying what to use; a shipped config
is given by name (an installed toolkit has no configs/ folder)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from helpers.toml_reader import toml_reader

from captioning.commands.train import caption_train_cli, train_main
from text_attn.core.run_report import read_metrics
from text_attn.translation.train_cli import text_train_cli
from text_attn.translation.train_cli import train_main as text_train_main

FIX = Path(__file__).parent.parent / "fixtures"


@pytest.mark.parametrize(
    "main, start", [(train_main, "caption-train: train and evaluate"), (text_train_main, "text-train: train and")]
)
def test_help_says_what_the_tool_does_and_where_the_configs_are(main, start, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    description = " ".join(out.split("\n\n")[1].split())  # the paragraph right after the usage line
    assert description.startswith(start) and "configs/" in description
    assert "Shipped configs, given by name" in description and ("shapes_soft, " in description) != (
        main is text_train_main
    )
    assert "reorder_bahdanau, " in description or main is train_main


@pytest.mark.parametrize("main, prog", [(train_main, "caption-train"), (text_train_main, "text-train")])
def test_predict_is_not_a_subcommand(main, prog, capsys):
    """Neither module has a predict step (the captioning and translating commands predict): Lightning's predict loop
    ended in a traceback; now the subcommand is refused in one line, and --help does not offer it."""
    with pytest.raises(SystemExit) as exc:
        main(["predict", "--config", str(FIX / "text/tiny_reorder.yaml")])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"{prog}: error: unknown subcommand 'predict': fit, validate, test, report RUN_DIR or optimize"
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "predict" not in out and "Subcommands: fit, validate, test, report, optimize" in " ".join(out.split())


@pytest.mark.parametrize("main, prog", [(train_main, "caption-train"), (text_train_main, "text-train")])
def test_no_subcommand_names_all_five(main, prog, capsys):
    """LightningCLI's own line listed fit, validate and test only: report and optimize, handled before it, were
    missing from it."""
    with pytest.raises(SystemExit) as exc:
        main(["--config", str(FIX / "text/tiny_reorder.yaml")])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2
    assert (
        line
        == f"{prog}: error: a subcommand is needed: fit, validate, test, report RUN_DIR or optimize (--help says more)"
    )


def test_a_run_prints_no_tips_or_tensorboardx_notice(tmp_path, monkeypatch, capsys, caplog, recwarn):
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.INFO)
    text_train_cli(["fit", "--config", str(FIX / "text/tiny_reorder.yaml"), "--trainer.logger", "true"])
    text = capsys.readouterr()
    shown = text.out + text.err + caplog.text + " ".join(str(w.message) for w in recwarn)
    assert "Tip:" not in shown and "tensorboardX" not in shown
    assert "GPU available" in caplog.text  # Lightning's own information still shows
    assert "exists and is not empty" not in shown  # the two default loggers share one folder without a warning
    # the default logger: TensorBoard event files and a metrics.csv in the one version folder, next to the model
    run = tmp_path / "lightning_logs" / "version_0"
    assert len(list(run.glob("events.out.tfevents.*"))) == 1 and (run / "model.pt").is_file()
    from_csv = read_metrics(run)
    assert [s for s, _ in from_csv["val_bleu"]] == [6]  # the one validation, after the 6 steps (as the
    # checkpoints and progress lines number it: metrics.csv says 5)
    (run / "metrics.csv").rename(tmp_path / "metrics.csv")
    from_events = read_metrics(run)  # without metrics.csv, the TensorBoard files are read
    assert set(from_events) == set(from_csv) == {"val_loss", "val_bleu", "val_align_acc"}
    for key, points in from_csv.items():
        assert [s for s, _ in from_events[key]] == [s for s, _ in points]
        assert [v for _, v in from_events[key]] == pytest.approx([v for _, v in points], rel=1e-6)
    with pytest.raises(SystemExit) as exc:  # and the run's report
        text_train_main(["report", str(tmp_path)])
    assert exc.value.code == 0 and (tmp_path / "report.png").is_file()


def test_an_old_config_with_data_image_size_gets_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        caption_train_cli(["fit", "--config", str(FIX / "captions/tiny_shapes.yaml"), "--data.image_size", "64"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1
    assert err[0].startswith("caption-train: error: option data.image_size was renamed: use data.scene_size")
    old = tmp_path / "old.yaml"
    old.write_text((FIX / "captions/tiny_shapes.yaml").read_text().replace("scene_size", "image_size"))
    with pytest.raises(SystemExit):
        caption_train_cli(["fit", "--config", str(old)])
    assert "option data.image_size was renamed" in capsys.readouterr().err


def test_a_config_is_found_by_name_in_the_shipped_folder_and_a_path_is_left_alone(tmp_path, monkeypatch, capsys):
    from text_attn.core.lightning_cli import named_configs, shipped_configs

    shipped = tmp_path / "site-packages" / "configs"
    shipped.mkdir(parents=True)
    for name in ("small.yaml", "big.yaml"):
        (shipped / name).write_text("trainer: {max_steps: 1}\n")
    assert shipped_configs(tmp_path / "none", shipped, tmp_path) == shipped  # the first folder that is there
    assert shipped_configs(tmp_path / "none") is None
    monkeypatch.chdir(tmp_path)
    named = named_configs(
        "t", ["fit", "--config", "small", "-c", "big.yaml", "--config=small", "--x", "small"], shipped
    )
    assert named == ["fit", "--config", str(shipped / "small.yaml"), "-c", str(shipped / "big.yaml"),
                     f"--config={shipped / 'small.yaml'}", "--x", "small"]  # fmt: skip
    (tmp_path / "big").mkdir()  # a folder of that name (an optimize --out) is no config: the shipped one is read
    assert named_configs("t", ["--config", "big"], shipped) == ["--config", str(shipped / "big.yaml")]
    (tmp_path / "small.yaml").write_text("a: 1\n")  # a file of that name here is the user's: it wins
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "big.yaml").write_text("a: 2\n")
    assert named_configs("t", ["--config", "small.yaml", "--config", "sub/big.yaml"], shipped) == [
        "--config", "small.yaml", "--config", "sub/big.yaml"]  # fmt: skip
    # a path that is not there, named as a shipped config is (the docs' configs/text/NAME.yaml outside a checkout)
    with pytest.raises(SystemExit):
        named_configs("text-train", ["fit", "--config", "configs/text/big.yaml"], shipped)
    said = "text-train: error: --config configs/text/big.yaml: no such file; the shipped config of that name is "
    said += "--config big"
    assert capsys.readouterr().err.strip() == said
    with pytest.raises(SystemExit) as exc:
        named_configs("text-train", ["fit", "--config", "smal"], shipped)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2
    assert line == "text-train: error: --config smal: no such file, nor a shipped config (those: big, small)"


@pytest.mark.parametrize("prog", ["caption-train", "text-train"])
def test_every_shipped_config_is_found_by_its_name(prog, monkeypatch, tmp_path):
    """What `--config NAME` reads is the checkout's configs/FAMILY/NAME.yaml (an installed wheel's PACKAGE/configs:
    pyproject maps them there), whatever the working directory."""
    from captioning.commands import train as caption_train
    from text_attn.core.lightning_cli import named_configs
    from text_attn.translation import train_cli as text_train

    module, family = (caption_train, "caption") if prog == "caption-train" else (text_train, "text")
    root = Path(__file__).resolve().parents[2] / "configs" / family
    monkeypatch.chdir(tmp_path)
    names = sorted(p.stem for p in root.glob("*.yaml"))
    assert len(names) >= 10 and module.CONFIGS == root
    for name in names:
        assert named_configs(prog, ["fit", "--config", name], module.CONFIGS) == [
            "fit",
            "--config",
            str(root / f"{name}.yaml"),
        ]


def test_the_wheel_ships_the_configs_where_the_commands_look_for_them():
    """pyproject maps configs/caption and configs/text into the packages (installed: PACKAGE/configs/*.yaml), the
    first folder each command's CONFIGS tries."""
    tomllib = toml_reader()
    root = Path(__file__).resolve().parents[2]
    with open(root / "pyproject.toml", "rb") as f:
        tool = tomllib.load(f)["tool"]["setuptools"]
    for package, folder in (
        ("captioning.configs", "configs/caption"),
        ("text_attn.translation.configs", "configs/text"),
    ):
        assert package in tool["packages"] and tool["package-dir"][package] == folder
        assert tool["package-data"][package] == ["*.yaml"] and list((root / folder).glob("*.yaml"))
        installed = root / package.replace(".", "/")  # where the wheel puts it: what CONFIGS tries first
        from captioning.commands import train as caption_train
        from text_attn.translation import train_cli as text_train

        module = caption_train if package.startswith("captioning") else text_train
        assert installed == Path(module.__file__).resolve().parents[0 if module is text_train else 1] / "configs"


def test_the_wheel_ships_every_data_file_of_the_packages_as_a_package_of_its_own():
    """The bundled models, demo photos and C sources were shipped by their parent package's globs (``assets/*.pt``):
    setuptools warned "Package 'captioning.assets' is absent from the 'packages' configuration ... would be ignored"
    for each such folder. Every folder of data files inside a package is a package of its own now, and its globs
    cover each of its tracked files."""
    import fnmatch
    import subprocess

    tomllib = toml_reader()
    root = Path(__file__).resolve().parents[2]
    with open(root / "pyproject.toml", "rb") as f:
        tool = tomllib.load(f)["tool"]["setuptools"]
    listed = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True)
    tracked = listed.stdout.split() if listed.returncode == 0 else []  # not a checkout: git says "not a git repository"
    if not tracked:  # a copy without its git folder (the GPU machine's, a "Download ZIP", the sdist)
        pytest.skip("not a git checkout: the tracked files are unknown")
    for package in tool["packages"]:
        folder = tool["package-dir"].get(package, package.replace(".", "/"))
        files = [Path(p) for p in tracked if Path(p).parent == Path(folder) and not p.endswith(".py")]
        globs = tool["package-data"].get(package, [])
        assert all("/" not in g for g in globs), (package, globs)  # a subfolder's files: a package of its own
        for file in files:
            assert any(fnmatch.fnmatch(file.name, g) for g in globs), (package, file)  # shipped
        for sub in {Path(p).parent for p in tracked if Path(p).parent.parent == Path(folder)}:
            if not (root / sub / "__init__.py").exists() and (root / sub).is_dir():  # data, not code: listed
                assert ".".join((package, sub.name)) in tool["packages"], sub


@pytest.mark.parametrize("main, prog, weights, other", [
    (text_train_main, "text-train", "model.decoder.embed.weight", "caption-train"),
    (train_main, "caption-train", "net.encoder.embed.weight", "text-train"),
])  # fmt: skip
def test_the_other_familys_checkpoint_given_to_ckpt_path_is_one_line(main, prog, weights, other, tmp_path, capsys):
    """Its saved settings (ds_lambda, attn_sup_layer, ...) were merged into this command's model options and ended
    the parse in a TypeError traceback; a checkpoint's family is told by its weights' names."""
    import torch

    config = FIX / ("text/tiny_reorder.yaml" if prog == "text-train" else "captions/tiny_shapes.yaml")
    ckpt = tmp_path / "other.ckpt"
    torch.save({"pytorch-lightning_version": "2.6.6", "state_dict": {weights: torch.zeros(2)},
                "hyper_parameters": {"ds_lambda": 1.0, "attn_sup_layer": -1}}, ckpt)  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--config", str(config), "--ckpt_path", str(ckpt)])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2
    assert line == (f"{prog}: error: --ckpt_path {ckpt}: a {other} checkpoint, not one of {prog}'s (continue it "
                    f"with `{other} fit --ckpt_path ...`)")  # fmt: skip
    torch.save({"pytorch-lightning_version": "2.6.6", "state_dict": {}, "hyper_parameters": [1]}, ckpt)
    with pytest.raises(SystemExit):
        main(["fit", "--config", str(config), "--ckpt_path", str(ckpt)])
    assert "a damaged checkpoint (its hyper_parameters are not a mapping)" in capsys.readouterr().err
    torch.save({"pytorch-lightning_version": "2.6.6", "hyper_parameters": {}}, ckpt)  # no weights at all
    with pytest.raises(SystemExit):
        main(["validate", "--config", str(config), "--ckpt_path", str(ckpt)])
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"{prog}: error: --ckpt_path {ckpt}: a training checkpoint without its weights (no state_dict): damaged, or "
        "not written by a fit")  # fmt: skip


@pytest.mark.long
def test_a_limit_of_one_batch_is_one_batch_not_all_of_them(tmp_path, monkeypatch):
    """The Trainer annotates limit_*_batches Union[float, int, None]; jsonargparse took the first type that fits, so
    `limit_val_batches: 1` (Lightning's "one batch") reached it as 1.0, "100% of the batches", and the run's
    config.yaml said 1.0. A float given as such stays a fraction."""
    from text_attn.core.lightning_cli import _one_batch

    monkeypatch.chdir(tmp_path)
    base = ["validate", "--config", str(FIX / "text/tiny_reorder.yaml"), "--data.val_size", "200"]  # 13 batches
    base += ["--ckpt_path", "null"]  # the untrained weights: the batches are counted, not scored
    cli = text_train_cli(base)  # the fixture's limit_val_batches: 1
    assert cli.trainer.limit_val_batches == 1 and type(cli.trainer.limit_val_batches) is int
    assert cli.trainer.num_val_batches == [1]
    cli = text_train_cli([*base, "--trainer.limit_val_batches", "1.0"])
    assert cli.trainer.limit_val_batches == 1.0 and cli.trainer.num_val_batches == [13]
    cli = text_train_cli([*base, "--trainer.limit_val_batches=1", "--trainer.logger", "true",
                          "--trainer.default_root_dir", str(tmp_path / "r")])  # fmt: skip
    assert cli.trainer.num_val_batches == [1]
    (saved,) = (tmp_path / "r").rglob("config.yaml")
    assert "  limit_val_batches: 1\n" in saved.read_text() and "  limit_test_batches: 1\n" in saved.read_text()
    nodes = [
        {"trainer": {"limit_val_batches": 1, "limit_test_batches": 1.0}},
        {"fit": {"trainer": {"limit_train_batches": 1}}},
    ]
    two = ["--config", "a.yaml", "--config", "b.yaml"]
    assert _one_batch(["fit", *two], nodes) == {"limit_val_batches", "limit_train_batches"}
    assert _one_batch(["validate", *two], nodes) == {"limit_val_batches"}  # fit's section is not validate's
    # read left to right, as jsonargparse reads them: what comes last wins, a config after the flag too
    assert _one_batch(["fit", "--config", "a.yaml", "--trainer.limit_val_batches", "0.5", "--config", "b.yaml"],
                      nodes) == {"limit_train_batches"}  # fmt: skip
    assert _one_batch(["fit", "--trainer.limit_val_batches", "1", "--config", "all.yaml"],
                      [{"trainer": {"limit_val_batches": 1.0}}]) == set()  # fmt: skip


def test_a_run_folder_given_on_the_command_line_takes_the_configs_model_file_with_it(tmp_path, monkeypatch):
    """A config writes its model file in its own run folder (``model.export_path: runs/a/model.pt``, as every shipped
    config does); ``--trainer.default_root_dir b`` wrote the checkpoints to b and the model file over runs/a's."""
    from text_attn.core.lightning_cli import _export_follows_root

    monkeypatch.chdir(tmp_path)
    config = tmp_path / "c.yaml"
    tiny = (FIX / "text/tiny_reorder.yaml").read_text()
    tiny = tiny.replace("trainer:\n", "trainer:\n  default_root_dir: runs/a\n")
    config.write_text(tiny.replace("model:\n", "model:\n  export_path: runs/a/model.pt\n"))
    text_train_cli(["fit", "--config", str(config), "--trainer.default_root_dir", "b"])
    assert (tmp_path / "b" / "model.pt").is_file() and not (tmp_path / "runs").exists()
    text_train_cli(["fit", "--config", str(config)])  # the config's own folder
    assert (tmp_path / "runs" / "a" / "model.pt").is_file()
    text_train_cli(["fit", "--config", str(config), "--trainer.default_root_dir", "b", "--model.export_path", "m.pt"])
    assert (tmp_path / "m.pt").is_file()  # a model file given is where it goes
    root, export = "trainer.default_root_dir", "model.export_path"
    nodes = [{"trainer": {"default_root_dir": "r"}, "model": {"export_path": "r/model.pt"}}]
    assert _export_follows_root(nodes, frozenset({root}))
    assert not _export_follows_root(nodes, frozenset({root, export})) and not _export_follows_root(nodes, frozenset())
    elsewhere = [{"trainer": {"default_root_dir": "r"}, "model": {"export_path": "models/r.pt"}}]
    assert not _export_follows_root(elsewhere, frozenset({root}))  # a model file the config keeps apart stays there
    assert _export_follows_root([*elsewhere, {"model": {"export_path": "./r/model.pt"}}], frozenset({root}))
