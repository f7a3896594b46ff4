"""Where a run's config.yaml is written (lightning_parts.SafeSaveConfig): in its run folder; nowhere where no logger
and no ``trainer.default_root_dir`` name one (every ``validate`` of a config that logs nowhere dropped one into the
working folder); never over the ``--config`` file the run read (``--config config.yaml`` beside it was replaced by the
resolved dump, the user's comments gone)."""

from __future__ import annotations

import shutil
from pathlib import Path

from text_attn.translation.train_cli import train_main

TINY = Path(__file__).parent.parent / "fixtures" / "text" / "tiny_reorder.yaml"  # logs nowhere, no root folder


def test_the_config_file_read_is_never_replaced_and_no_folder_means_no_config(tmp_path, cli_run_in_tmp, capsys):
    shutil.copy(TINY, "config.yaml")
    mine = Path("config.yaml").read_bytes()
    train_main(["fit", "--config", "config.yaml", "--trainer.max_steps", "1"])
    assert Path("config.yaml").read_bytes() == mine  # no run folder: nothing written here
    assert "not written" not in capsys.readouterr().err
    train_main(["fit", "--config", "config.yaml", "--trainer.max_steps", "1", "--trainer.default_root_dir", "."])
    assert Path("config.yaml").read_bytes() == mine  # the run folder is here: the file read is kept, and said
    said = "note: the run's config.yaml is not written: config.yaml is the --config file read"
    assert said in capsys.readouterr().err
    train_main(["fit", "--config", "config.yaml", "--trainer.max_steps", "1", "--trainer.default_root_dir", "run"])
    saved = Path("run/config.yaml").read_text()
    assert saved.startswith("# pytorch_lightning==") and "max_steps: 1" in saved  # a run folder: its config there
