"""DDP on Lightning's own engine, 2 CPU processes (gloo): both families finish, the ranks train on disjoint data
in equal numbers of batches, and the validation metrics of a 2-process run, the loss included, equal those of 1
process on the same weights and split (the outputs are gathered from all ranks). Slow: each run launches two Python
processes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers.srun import srun_processes

pytestmark = pytest.mark.slow
TESTS = Path(__file__).resolve().parents[1]
DDP = ["--trainer.strategy", "ddp", "--trainer.devices", "2", "--trainer.accelerator", "cpu"]
CONFIGS = {"text": TESTS / "fixtures/text/tiny_reorder.yaml", "caption": TESTS / "fixtures/captions/tiny_shapes.yaml"}
TOOLS = {"text": "text-train", "caption": "caption-train"}


def _env() -> dict:
    """The tests' environment with tests/helpers importable (the probe callback)."""
    return {**os.environ, "PYTHONPATH": f"{TESTS / 'helpers'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def launch(family: str, args: list[str], cwd: Path, probe: Path) -> list[dict]:
    exe = Path(sys.executable).parent / TOOLS[family]
    cmd = [str(exe), *args, "--trainer.callbacks+=ddp_probe.Probe", f"--trainer.callbacks.out={probe}"]
    done = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(p.read_text()) for p in sorted(probe.glob("rank*.json"))]


def config(family: str, tmp_path: Path) -> str:
    cfg = yaml.safe_load(CONFIGS[family].read_text())
    # val split of odd size: the DistributedSampler pads one rank's share with a repeat, which must not count twice
    cfg["data"].update(val_size=15) if family == "text" else cfg["data"].update(val_size=7)
    cfg["trainer"].update(limit_val_batches=None, enable_checkpointing=True)
    cfg["trainer"]["callbacks"] = [
        {
            "class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
            "init_args": {"save_last": True, "save_top_k": 0, "every_n_train_steps": 1},
        }
    ]
    path = tmp_path / f"{family}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


@pytest.mark.parametrize("family", ["text", "caption"])
def test_two_process_ddp_trains_disjoint_shares_and_scores_the_whole_split(family, tmp_path):
    cfg = config(family, tmp_path)
    ranks = launch(family, ["fit", "--config", cfg, *DDP, "--trainer.max_steps", "3"], tmp_path, tmp_path / "fit")
    assert [r["world_size"] for r in ranks] == [2, 2]
    assert len(ranks[0]["batches"]) == len(ranks[1]["batches"]) == 3
    seen = [{i for b in r["batches"] for i in b} for r in ranks]
    assert seen[0] and seen[1] and not seen[0] & seen[1]  # disjoint shares of one epoch
    assert len(list(tmp_path.rglob("model.pt"))) == 1  # written once, by the first process (anywhere passed)
    # the same weights validated by 2 processes and by 1: the same numbers, on every rank
    ckpt = str(next(tmp_path.rglob("last.ckpt")))
    two = launch(family, ["validate", "--config", cfg, *DDP, "--ckpt_path", ckpt], tmp_path, tmp_path / "v2")
    one = launch(family, ["validate", "--config", cfg, "--ckpt_path", ckpt], tmp_path, tmp_path / "v1")
    assert len(two) == 2 and len(one) == 1
    metric = "val_bleu" if family == "text" else "val_Bleu_4"
    assert metric in one[0]["metrics"]
    scores = [v for k, v in one[0]["metrics"].items() if not k.endswith("_loss")]
    assert any(v > 0 for v in scores), one[0]["metrics"]  # something non-trivial to compare
    for rank in two:
        for name, value in one[0]["metrics"].items():
            # the loss too: pooled over the gathered sentences / photos, not a mean of batch means (the batches of
            # 2 processes are not those of 1); float noise only, each row's loss computed in another batch
            tolerance = {"rel": 1e-5} if name.endswith("_loss") else {"abs": 1e-9}
            assert rank["metrics"][name] == pytest.approx(value, **tolerance), name


def test_two_process_distillation_keeps_each_ranks_teacher_targets(tmp_path):
    """A distillation fit under DDP: each rank keeps the targets of the pairs it sees, later epochs read them."""
    cfg, exe = str(CONFIGS["caption"]), Path(sys.executable).parent / TOOLS["caption"]
    common = ["fit", "--config", cfg, "--trainer.max_steps", "40", "--trainer.limit_val_batches", "0"]
    teacher = tmp_path / "t" / "model.pt"
    done = subprocess.run([str(exe), *common, "--trainer.default_root_dir", str(tmp_path / "t"),
                           "--model.export_path", str(teacher)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    done = subprocess.run([str(exe), *common, *DDP, "--trainer.default_root_dir", str(tmp_path / "s"),
                           "--model.export_path", str(tmp_path / "s" / "model.pt"),
                           "--model.objective.distil_from", str(teacher)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("caption-train: the teacher's targets: ")]
    served, made = (int(n.replace(",", "")) for n in re.search(r"([\d,]+) pairs read .*, ([\d,]+) made", line).groups())
    assert served > 2 * made > 0, line  # rank 0's: the sampler reshuffles, so each epoch after the first reads most
    assert (tmp_path / "s" / "model.pt").is_file()


def test_the_data_notes_are_said_once_not_by_each_process(tmp_path):
    """Every process reads the data and met the same notes: each was said by both (eight times on eight GPUs)."""
    exe = Path(sys.executable).parent / TOOLS["caption"]
    cmd = [str(exe), "fit", "--config", config("caption", tmp_path), *DDP, "--trainer.max_steps", "1",
           "--data.max_caption_len", "3"]  # fmt: skip
    done = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    cut = [x for x in done.stderr.splitlines() if "longer than data.max_caption_len=3 words are cut" in x]
    assert len(cut) == 1, done.stderr[-3000:]


def test_processes_srun_starts_train_and_say_the_data_notes_once(tmp_path):
    """srun starts each process itself, numbered SLURM_PROCID / SLURM_LOCALID, with no RANK nor LOCAL_RANK set: the
    second process said every data note too."""
    cmd = [str(Path(sys.executable).parent / TOOLS["caption"]), "fit", "--config", config("caption", tmp_path), *DDP,
           "--trainer.max_steps", "1", "--data.max_caption_len", "3"]  # fmt: skip
    done = [(code, err) for code, _, err in srun_processes(cmd, tmp_path, _env())]
    assert [code for code, _ in done] == [0, 0], [err[-2000:] for _, err in done]
    said = [sum("longer than data.max_caption_len=3 words are cut" in x for x in err.splitlines()) for _, err in done]
    assert said == [1, 0]
    assert "GLOBAL_RANK: 1, MEMBER: 2/2" in done[1][1]  # the second process was one of the run
