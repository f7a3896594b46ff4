"""A training run at a glance: its logged metrics over the steps, as one PNG (``caption-train report RUN_DIR``,
``text-train report RUN_DIR``).

It reads what the default logger wrote (text_attn.core.lightning_cli.default_loggers) in
``RUN_DIR/lightning_logs/version_N/``: ``metrics.csv``, or, without one, the TensorBoard event files there. RUN_DIR
is the run's ``trainer.default_root_dir`` (its newest version with training steps is read, with the versions it
was resumed from: :func:`resumed_chain`), its ``lightning_logs`` folder, or one ``version_N`` folder; a logger's
folder outside RUN_DIR is found through the record the run left in RUN_DIR (text_attn.core.log_record). The panels,
each drawn only when the run logged something for it:
    loss           train_loss at each logged step (thin) and its running mean, val_loss at each validation
    validation     the 0..1 scores: BLEU-4 (val_Bleu_4 / val_bleu), ROUGE-L, METEOR, alignment accuracy
    sacreBLEU      val_sacrebleu and val_chrf of a real corpus (Multi30k), on their own 0..100 axis
    CIDEr          val_CIDEr, on its own axis (it is not a 0..1 score)
    grounding      val_grounding, val_grounding_mass: on synthetic shapes, does the decoder look at what it names
    reward         reinforcement learning's training quantities: train_reward beside its baseline (SCST's
                   train_baseline, hard attention's moving ``baseline``) and SCST's train_advantage; under SCST the
                   loss panel's train loss is a surrogate near 0 (its legend says so), and these say how it goes
    hard attention train_entropy (the attention's mean entropy, in nats: near log L is near uniform) and the
                   REINFORCE term train_reinforce
    learning rate  lr-* (from a LearningRateMonitor), log scale
The best value of the metric the run chooses its best checkpoint by (its config.yaml's ModelCheckpoint ``monitor``
and ``mode``: val_CIDEr for most caption configs, the bundled model's included) is marked where it is drawn and said in
the summary line; without one, the first validation score's highest. Lightning is not imported; matplotlib only
through its object API (no pyplot state), as in the other plots.
"""

from __future__ import annotations

import csv
import heapq
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path

from text_attn.core.errors import ArgumentParser, dash_refused, emit, fail, one_line
from text_attn.core.log_record import RECORD, recorded
from text_attn.core.safe_files import atomic_output, inert_output, protecting

Series = dict[str, list[tuple[int, float]]]  # metric name -> (step, value) pairs, by step

NAMES = {  # how the panels' legends call the logged metrics
    "train_loss": "train loss",
    "val_loss": "validation loss",
    "val_Bleu_4": "BLEU-4",
    "val_bleu": "BLEU-4",
    "val_ROUGE_L": "ROUGE-L",
    "val_METEOR": "METEOR",
    "val_align_acc": "alignment accuracy",
    "val_sacrebleu": "sacreBLEU",
    "val_chrf": "chrF",
    "val_CIDEr": "CIDEr",
    "val_grounding": "grounding accuracy",
    "val_grounding_mass": "attention mass on the named object",
    "train_reward": "reward",
    "train_baseline": "baseline",
    "baseline": "baseline (moving average)",
    "train_advantage": "advantage (reward - baseline)",
    "train_entropy": "attention entropy (nats)",
    "train_reinforce": "REINFORCE term",
}
SCORES = ("val_Bleu_4", "val_bleu", "val_ROUGE_L", "val_METEOR", "val_align_acc")  # the validation panel, in order
HUNDREDS = ("val_sacrebleu", "val_chrf")  # sacrebleu's scores, 0..100 as sacrebleu gives them: a panel of their own
REWARDS = ("train_reward", "train_baseline", "baseline", "train_advantage")  # SCST's and hard attention's, in order
HARD = ("train_entropy", "train_reinforce")  # hard attention's REINFORCE (captioning.training.objective)
PANELS: list[tuple[str, Callable[[str], bool]]] = [  # (title, which metrics) in drawing order
    ("loss", lambda k: k in ("train_loss", "train_loss_step", "val_loss")),
    ("validation scores", lambda k: k in SCORES),
    ("sacreBLEU and chrF (validation, 0-100)", lambda k: k in HUNDREDS),
    ("CIDEr (validation)", lambda k: k == "val_CIDEr"),
    ("grounding (validation)", lambda k: k in ("val_grounding", "val_grounding_mass")),
    ("reward (training)", lambda k: k in REWARDS),
    ("hard attention (training)", lambda k: k in HARD),
    ("learning rate", lambda k: k.startswith("lr-")),
]
_MEAN_OF = 20  # running mean of the train loss over this many logged steps
_RANGES = {"validation": (0.0, 1.0), "grounding": (0.0, 1.0), "sacreBLEU": (0.0, 100.0)}  # fixed axes, by title


def out_of_100(key: str) -> bool:
    """Whether a logged score is on sacrebleu's 0..100 scale (``val_sacrebleu``, ``test_chrf``, ...), where the
    others (BLEU-4, alignment accuracy, ...) are fractions: the progress lines say so (``val_chrf 51.2/100``)."""
    return key.endswith(("_sacrebleu", "_chrf"))


class RunReportError(ValueError):
    """RUN_DIR holds nothing to report; the message is one line naming it."""


def _version(path: Path) -> int:
    m = re.fullmatch(r"version_(\d+)", path.name)
    return int(m.group(1)) if m else -1


def _has_logs(folder: Path) -> bool:
    return (folder / "metrics.csv").is_file() or any(folder.glob("events.out.tfevents.*"))


def find_log_dir(run_dir: str | Path, example: str = "runs/NAME") -> Path:
    """The folder holding the run's logs: RUN_DIR itself, or the newest version under it with training steps
    (a ``test`` run's version has none), else the newest with validation scores, else the newest with any logs.
    ``example``: a run folder of the command's own family, for the line that says RUN_DIR is no folder."""
    return locate_logs(run_dir, example)[0]


def locate_logs(run_dir: str | Path, example: str = "runs/NAME") -> tuple[Path, str | None]:
    """:func:`find_log_dir`'s folder, and a note where a newer version has logged nothing yet (a fit that has just
    begun: its first log comes at its ``trainer.log_every_n_steps``), which the report is not of; else None."""
    run = Path(run_dir)
    if not run.is_dir():
        raise RunReportError(f"{run} is not a folder (give a run's trainer.default_root_dir, e.g. {example})")
    if _has_logs(run):
        return run, None
    # the default loggers' lightning_logs/; else a logger's own save_dir or name below RUN_DIR (NAME/version_N,
    # SAVE_DIR/NAME/version_N): a CSVLogger or TensorBoardLogger given in the config
    patterns = ("version_*",) if (run / "lightning_logs").is_dir() else ("version_*", "*/version_*", "*/*/version_*")
    root = run / "lightning_logs" if (run / "lightning_logs").is_dir() else run
    found = [p for pattern in patterns for p in root.glob(pattern) if p.is_dir() and _has_logs(p)]
    found.sort(key=lambda p: (_version(p), p.stat().st_mtime), reverse=True)
    runs = _runs_newest_first(found)  # RUN_DIR above several runs' folders (runs/): their versions number apart
    found = [p for run_found in runs.values() for p in run_found]
    # a logger's folder elsewhere, which the run recorded (log_record), the newest recorded first: ranked with the
    # folders here by when each last logged (a newer run here was drawn after the recorded ones, the old run drawn)
    elsewhere = recorded(run)
    mine = {p.resolve() for p in elsewhere}
    found = _newest_first([p for p in elsewhere if p.is_dir() and _has_logs(p)],
                          [p for p in found if p.resolve() not in mine])  # fmt: skip
    if not found:
        raise RunReportError(_nothing_found(run, elsewhere))
    metrics = {p: set(read_metrics(p)) for p in found}
    # a fit's version: training steps logged, or only its validations (a short fit, or one resumed for fewer steps
    # than log_every_n_steps: its version was passed over for the one it continues); a later test's version holds
    # test metrics alone
    fits = [p for p in found if any(k.startswith("train_") for k in metrics[p])
            or any(k.startswith("val_") for k in metrics[p]) and not _evaluation(_config(p))]  # fmt: skip
    chosen = (fits or found)[0]
    # a fit started in a folder that holds a finished one: its version has no metrics until its first logged step,
    # and the report drew the older run without a word (the user was watching the new one)
    waiting = found[0] if found[0] != chosen and not metrics[found[0]] else None
    note = None
    if waiting is not None:
        note = f"{waiting.name} has logged nothing yet ({first_log(waiting)}); this report is of {chosen.name}"
    elif len(runs) > 1:
        shown = chosen.parent.parent if chosen.parent.name == "lightning_logs" else chosen.parent
        note = (f"{run} holds the logs of {len(runs)} runs; this report is of the one logged last, {shown}: give "
                "another's folder for it")  # fmt: skip
    return chosen, note


def _runs_newest_first(found: list[Path]) -> dict[Path, list[Path]]:
    """Version folders (each run's newest version first) by the run's folder that holds them, the run logged last
    first: the version numbers of two runs say nothing of which is newer (a new run's version_0 was passed over for
    an older run's version_1)."""
    runs: dict[Path, list[Path]] = {}
    for p in found:
        runs.setdefault(p.parent, []).append(p)
    order = sorted(runs, key=lambda r: -max(_last_logged(p) for p in runs[r]))
    return {r: runs[r] for r in order}


def _last_logged(folder: Path) -> float:
    """When ``folder``'s logs were last written (its metrics.csv's or newest event file's time)."""
    files = [folder / "metrics.csv", *folder.glob("events.out.tfevents.*")]
    return max((f.stat().st_mtime for f in files if f.is_file()), default=0.0)


def _newest_first(recorded: list[Path], here: list[Path]) -> list[Path]:
    """Two lists of log folders, each newest first, as one: merged by when each last logged, so each keeps its own
    order (the version numbers here: a copied run folder's times say nothing of which version came first); the
    recorded one first where both logged at once (heapq.merge is stable)."""
    return list(heapq.merge(recorded, here, key=lambda p: -_last_logged(p)))


def _nothing_found(run: Path, elsewhere: list[Path]) -> str:
    """The line for a RUN_DIR where no logs were found: the folders looked in, and what to give instead."""
    if elsewhere:
        return (
            f"{run} holds no training logs, and the folders its {RECORD} records hold none either (moved or "
            f"removed?): {', '.join(map(str, elsewhere[:3]))}; give the logger's folder (its save_dir) as RUN_DIR"
        )
    return (
        f"{run} holds no training logs: looked for metrics.csv or TensorBoard event files in {run / 'lightning_logs'}"
        f"/version_N/, in a logger's NAME/version_N/ below it and in the folders {run / RECORD} records (a logger "
        "writing elsewhere records its folder there); trained with trainer.logger false? For logs elsewhere that no "
        "record names, give the logger's save_dir as RUN_DIR"
    )


def first_log(version: Path) -> str:
    """When a version's first metrics come: 'a fit logs every 50 steps: trainer.log_every_n_steps' (its config.yaml's,
    Lightning's default 50 where it names none), as the report's notes say it."""
    config = _config(version) or {}
    trainer = config.get("trainer") if isinstance(config.get("trainer"), dict) else {}
    every = trainer.get("log_every_n_steps")
    every = every if isinstance(every, int) and every > 0 else 50
    return f"a fit logs every {every} steps: trainer.log_every_n_steps"


def _train_steps(series: Series) -> list[int]:
    return sorted(step for k, points in series.items() if k.startswith("train_") for step, _ in points)


def resumed_chain(log_dir: Path) -> list[Path]:
    """The version folders one run's logs are spread over, oldest first, ending at ``log_dir``: a fit resumed with
    ``--ckpt_path`` logs into a new version, from the checkpoint's step on, so the newest version alone lacks the
    run's start. Each version's saved config.yaml says where its fit began (:func:`_resumed_from`): ``ckpt_path:
    null`` is a fresh fit, a run of its own; a checkpoint file belongs to the version folder holding it, in this
    run folder or another."""
    chain = [log_dir]
    seen = {log_dir.resolve()}
    while (found := _resumed_from(chain[0])) is not None and found.resolve() not in seen:
        chain.insert(0, found)
        seen.add(found.resolve())
    return chain


def _resumed_from(version: Path) -> Path | None:
    """The version folder holding the checkpoint ``version``'s fit resumed from; None for a fresh fit. Its config.yaml
    records ``ckpt_path`` as given: a path (relative ones from where the fit ran, which its ``default_root_dir``
    gives away) names the folder; ``null`` none, whatever the steps look like. A name (``last``, ``best``), or no
    config.yaml (another logger's folder): the nearest earlier fit in the same folder whose training steps begin before
    this one's and whose logs reach them (within two of its logging intervals: a single training log's is its config's
    ``log_every_n_steps``)."""
    config = _config(version)
    if _evaluation(config):  # a validate or test of a checkpoint (given by its path) continues no fit
        return None
    if config is not None and "ckpt_path" in config:
        start = config["ckpt_path"]
        if start is None:
            return None
        if str(start) not in ("last", "best", "hpc"):
            return _holder(version, config, Path(str(start)).expanduser())
    logged = read_metrics(version)
    # a resumed fit shorter than its logging interval logs its validations alone: their steps say where it began
    steps = _train_steps(logged) or sorted(step for points in logged.values() for step, _ in points)
    if not steps or _version(version) < 0:
        return None
    earlier = sorted((p for p in version.parent.glob("version_*") if p.is_dir() and _has_logs(p) and
                      _version(p) < _version(version)), key=_version, reverse=True)  # fmt: skip
    for p in earlier:
        series = read_metrics(p)
        theirs = _train_steps(series)
        if not theirs and not _evaluation(_config(p)):  # a resumed fit shorter than its logging interval: its
            # validations alone (it was passed over, and the chain, with its validations, ended at the next one)
            theirs = sorted(step for points in series.values() for step, _ in points)
        if theirs:  # not a validate / test run's version
            # one training log has no interval to read: the config's (a short run's single log gave 1, and its
            # resumed version, logging from a step 20 later, was drawn alone)
            trainer = (_config(p) or {}).get("trainer")
            every = trainer.get("log_every_n_steps") if isinstance(trainer, dict) else None
            every = every if isinstance(every, int) and not isinstance(every, bool) and every > 0 else 50  # Lightning's
            gap = max((b - a for a, b in zip(theirs, theirs[1:], strict=False)), default=every)
            reached = max(step for points in series.values() for step, _ in points)  # its validations' steps too
            return p if theirs[0] < steps[0] <= reached + 2 * gap else None
    return None


def _evaluation(config: dict | None) -> bool:
    """Whether a version's config.yaml is a ``validate`` or ``test`` run's: those subcommands' own option
    ``verbose``, which fit has not."""
    return config is not None and "verbose" in config


def _holder(version: Path, config: dict, checkpoint: Path) -> Path | None:
    """The version folder (``.../version_K/checkpoints/FILE``) ``checkpoint`` lies in, where it holds logs; a relative
    path is read from the folder the fit ran in: ``version``'s path less its ``default_root_dir/lightning_logs/
    version_N`` (or, where that does not fit, this process's working folder)."""
    trainer = config.get("trainer") if isinstance(config.get("trainer"), dict) else {}
    root = trainer.get("default_root_dir")
    tail = Path(str(root)).parts if root and not Path(str(root)).is_absolute() else ()
    bases = []
    for run in (version.parent.parent, version.resolve().parent.parent):  # <default_root_dir>/lightning_logs/version_N
        if not root:  # Lightning's default: the working folder itself
            bases.append(run)
        elif tail and run.parts[-len(tail) :] == tail:  # as given first: the line names it as the user would
            bases.append(Path(*run.parts[: -len(tail)]))
    for base in [*bases, Path()] if not checkpoint.is_absolute() else [Path()]:
        folder = (base / checkpoint).parent
        if folder.name == "checkpoints" and folder.parent.is_dir() and _has_logs(folder.parent):
            return folder.parent
    return None


def _config(version: Path) -> dict | None:
    """A version's config.yaml (what the run was started with) as a mapping; None where it has none or it cannot be
    read."""
    import yaml

    try:
        config = yaml.safe_load((version / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return config if isinstance(config, dict) else None


def chained_metrics(chain: list[Path]) -> Series:
    """The metrics of a resumed run's versions as one series: each version's points before the next one's first
    training step (the steps after its checkpoint were trained again by the next), then the next's."""
    merged: Series = {}
    for i, folder in enumerate(chain):
        series = read_metrics(folder)
        later = _train_steps(read_metrics(chain[i + 1])) if i + 1 < len(chain) else []
        until = later[0] if later else math.inf
        for key, points in series.items():
            merged.setdefault(key, []).extend((step, v) for step, v in points if step < until)
    return {k: sorted(v) for k, v in merged.items() if v}


def _read_csv(path: Path) -> Series:
    series: Series = {}
    with path.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            step = row.get("step")
            if not step:
                continue
            for key, value in row.items():
                if key in ("step", "epoch") or value in ("", None):
                    continue
                series.setdefault(key, []).append((int(float(step)), float(value)))
    return series


def _read_events(folder: Path) -> Series:
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        raise RunReportError(f"{folder} has TensorBoard logs only, and tensorboard is not installed") from None
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})  # 0: keep every point
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"] if tag != "epoch"}


def read_metrics(log_dir: str | Path) -> Series:
    """Every logged metric of one version folder as (step, value) pairs sorted by step (metrics.csv if there is
    one, else the TensorBoard event files). The steps are the optimizer steps done, as the progress lines and the
    checkpoints' names count them (``validated at step 16``, ``best-epoch=1-step=16.ckpt``): Lightning's loggers
    write the count before the step's own (15), the report said the best was "at step 15"."""
    folder = Path(log_dir)
    try:
        raw = _read_csv(folder / "metrics.csv") if (folder / "metrics.csv").is_file() else _read_events(folder)
    except (OSError, ValueError, csv.Error) as err:
        if isinstance(err, RunReportError):
            raise
        raise RunReportError(f"cannot read the logs in {folder}: {one_line(err)}") from None
    return {k: sorted((step + 1, v) for step, v in points) for k, points in raw.items() if points}


def _running_mean(values: list[float], n: int) -> list[float]:
    """Mean over a window of n values centred on each one (narrower at the ends): no lag behind a falling loss."""
    half = n // 2
    return [sum(values[max(0, i - half) : i + half + 1]) / len(values[max(0, i - half) : i + half + 1])
            for i in range(len(values))]  # fmt: skip


def monitored(version: Path) -> tuple[str, str] | None:
    """(metric, "max" | "min") the run's first ModelCheckpoint with a ``monitor`` chooses its best checkpoint by, as
    ``version``'s config.yaml records it; None where it names none (or cannot be read)."""
    try:
        callbacks = ((_config(version) or {}).get("trainer") or {}).get("callbacks") or []
    except AttributeError:  # a trainer that is no mapping
        return None
    for cb in callbacks if isinstance(callbacks, list) else [callbacks]:
        if not isinstance(cb, dict) or not str(cb.get("class_path", "")).endswith("ModelCheckpoint"):
            continue
        args = cb.get("init_args") or {}
        if isinstance(args, dict) and args.get("monitor"):
            return str(args["monitor"]), "max" if args.get("mode") == "max" else "min"  # Lightning's default: min
    return None


def best_of(series: Series, mark: tuple[str, str] | None = None) -> tuple[str, int, float] | None:
    """(metric, step, value) of the best validation: ``mark``'s metric (name, mode) where it was logged, else the first
    validation score's highest; None where none was logged."""
    key, mode = mark if mark and mark[0] in series else (next((k for k in SCORES if k in series), None), "max")
    if key is None:
        return None
    pick = max if mode == "max" else min
    scored = [p for p in series[key] if not math.isnan(p[1])]  # max/min stayed on a first NaN ("best nan at step
    if not scored:  # 10"), where ModelCheckpoint skips it
        return None
    step, value = pick(scored, key=lambda p: p[1])
    return key, step, value


def _draw_panel(ax, title: str, keys: list[str], series: Series, best: tuple[str, int, float] | None) -> None:
    fixed = next((span for start, span in _RANGES.items() if title.startswith(start)), None)
    for key in keys:
        steps, values = zip(*series[key], strict=True)
        label = NAMES.get(key, key.removeprefix("lr-"))
        if key.startswith("train_loss") and "train_advantage" in series:  # SCST's: not a loss to watch fall
            label += " (SCST's surrogate, near 0: see the reward)"
        if key.startswith("train_") and len(values) > _MEAN_OF:  # a batch's value: noisy
            line = ax.plot(steps, values, lw=0.8, alpha=0.35)[0]
            ax.plot(steps, _running_mean(list(values), _MEAN_OF), color=line.get_color(), label=f"{label} (mean)")
        else:
            style = "steps-post" if key.startswith("lr-") else "default"  # a rate holds until the next one
            ax.plot(steps, values, marker="o" if len(values) < 40 else None, ms=3, label=label, drawstyle=style)
    if best is not None and best[0] in keys:
        key, step, value = best
        steps = [s for s, _ in series[key]]
        at = steps.index(step) / max(len(steps), 1)
        side = "right" if at > 0.7 else "left" if at < 0.3 else "center"
        low, high = fixed or ax.get_ylim()
        upper = value > (low + high) / 2
        ax.annotate(f"best {value:.3f}\nstep {step}", (step, value), fontsize=8, xytext=(0, -30 if upper else 18),
                    textcoords="offset points", ha=side, arrowprops={"arrowstyle": "-", "lw": 0.6})  # fmt: skip
    if fixed:
        ax.set_ylim(*fixed)
    if title == "learning rate":
        ax.set_yscale("log")
    ax.set_title(title, loc="left", fontsize=10)
    ax.set_xlabel("step")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: a short run showed 12.4, 12.6, ...
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)


def panels_for(series: Series) -> list[tuple[str, list[str]]]:
    """The report's panels for these metrics: (title, metric names), empty panels left out."""
    panels = []
    for name, wanted in PANELS:
        keys = [k for k in series if wanted(k)]
        if name == "validation scores":
            keys.sort(key=SCORES.index)
        elif name.startswith(("reward", "hard")):
            keys.sort(key=(REWARDS + HARD).index)
        if keys:
            panels.append((name, keys))
    return panels


FORMATS = {".png": "png", ".pdf": "pdf", ".svg": "svg"}  # the report's file by its name's suffix; none: PNG


def report_format(path: str | Path) -> str | None:
    """The format a report written to ``path`` takes (PNG where the name has no suffix); None for a suffix of a
    format it cannot be (``report.html`` was a PNG under that name, said "wrote", exit 0)."""
    suffix = Path(path).suffix.lower()
    return FORMATS.get(suffix) if suffix else "png"


def plot_report(series: Series, path: str | Path, title: str = "", mark: tuple[str, str] | None = None) -> Path:
    """Write the report (:func:`report_figure`) as a PNG, or a PDF or SVG by ``path``'s suffix; returns the path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from text_attn.core.fonts import quiet_missing_glyphs

    fig = report_figure(series, title, mark)
    out = Path(path)
    FigureCanvasAgg(fig)
    # a run folder's name in a script DejaVu Sans lacks: drawn in an installed font that has it; what none has is
    # said once by the command (report_main), not in matplotlib's warning a character with its source line
    with atomic_output(out) as tmp, quiet_missing_glyphs():  # a fresh file, renamed: a planted link never written
        fig.savefig(tmp, format=report_format(out) or "png", dpi=100)
    return out


def report_figure(series: Series, title: str = "", mark: tuple[str, str] | None = None):
    """The report as a matplotlib Figure: the module doc's panels, two per row; ``mark``: the monitored metric and
    its mode, whose best is marked, as :func:`best_of` chooses."""
    from matplotlib.figure import Figure

    panels = panels_for(series)
    if not panels:
        raise RunReportError(f"nothing to plot: no loss or validation metric among {sorted(series)}")
    cols = 1 if len(panels) == 1 else 2
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(6.0 * cols, 3.4 * rows + 0.4), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    steps = [step for name, keys in panels for key in keys for step, _ in series[key]]
    low, high = min(steps), max(steps)
    pad = max(0.5, 0.02 * (high - low))  # one step range for every panel: a validation's point beside the losses
    for ax, (name, keys) in zip(axes, panels, strict=False):
        _draw_panel(ax, name, keys, series, best_of(series, mark))
        ax.set_xlim(low - pad, high + pad)
    for ax in axes[len(panels) :]:
        ax.set_axis_off()
    if title:
        from text_attn.core.fonts import families

        fig.suptitle(title, fontsize=11, family=families([title]))
    return fig


def summary(series: Series, mark: tuple[str, str] | None = None) -> str:
    """'logged to step 120, 5 validations; best BLEU-4 0.412 at step 100' (the report's gist in one line; the best of
    ``mark``'s metric where the run chooses by it, :func:`best_of`)."""
    last = max((s for v in series.values() for s, _ in v), default=0)
    text = f"logged to step {last}"
    if best := best_of(series, mark):
        key, step, value = best
        count = f"{len(series[key])} validation" + ("s" if len(series[key]) != 1 else "")
        text += f", {count}; best {NAMES.get(key, key)} {value:.3f} at step {step}"
    return text


@inert_output
def report_main(prog: str, argv: list[str], example: str = "runs/NAME") -> int:
    """``PROG report RUN_DIR [--out PNG]``: write the run's report; bad RUN_DIR: one line, exit code 2. ``example``:
    a run folder of PROG's family (its shipped config's default_root_dir), for the help and the error line. The
    summary line is the command's output, on stdout (errors.emit: a reader that is gone is one line, exit code 2); the
    "wrote" line goes to stderr, as every command's."""
    p = ArgumentParser(
        prog=f"{prog} report",
        description="Plot a training run's logged metrics over the steps into one PNG: the loss, the validation "
        "scores (BLEU-4, CIDEr, ...) and, where logged, grounding. RUN_DIR: the run's trainer.default_root_dir "
        "(its newest version with training steps), its lightning_logs folder or one version_N folder. The same "
        "logs open live in TensorBoard: tensorboard --logdir RUN_DIR.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help=f"the run's folder, e.g. {example}")
    p.add_argument("--out", metavar="FILE", help="where to write the report: a .png (default: RUN_DIR/report.png), "
                   ".pdf or .svg file")  # fmt: skip
    args = p.parse_args(argv)
    if args.out == "":  # was RUN_DIR/report.png, unsaid
        fail(f"{prog} report", "--out is empty: give the report's file name (default: RUN_DIR/report.png)")
    if args.out == "-":  # was a PNG file named "-"
        fail(f"{prog} report", dash_refused("--out", "a picture"))
    if args.out and report_format(args.out) is None:
        fail(f"{prog} report", f"--out {args.out}: the report is a picture: give a .png, .pdf or .svg name")
    if args.out and Path(args.out).is_dir():
        fail(f"{prog} report", f"--out {args.out} is a folder; give a file name")
    if args.out and not Path(args.out).parent.is_dir():  # it was made: a mistyped folder, unsaid (every other
        # command's file output is refused so)
        fail(f"{prog} report", f"cannot write --out {args.out}: the folder {Path(args.out).parent} does not exist")
    out = Path(args.out) if args.out else Path(args.run_dir) / "report.png"
    try:
        log_dir, note = locate_logs(args.run_dir, example)
        if note:  # a newer version, its fit just begun: said before anything else
            print(f"{prog} report: note: {note}", file=sys.stderr)
        chain = resumed_chain(log_dir)
        series = chained_metrics(chain)
        if not series:  # a fit before its first logged step (its TensorBoard file is made as it starts)
            csv_file = Path(log_dir) / "metrics.csv"  # the CSV logger writes it at its first logged step
            if csv_file.is_file():  # there, and nothing read: empty, cut, or without its step column, not "yet"
                raise RunReportError(f"{csv_file}: no metric with its step can be read from it (empty, cut off, or "
                                     "not the CSV logger's columns: step, then the metrics)")  # fmt: skip
            raise RunReportError(f"{log_dir}: no metrics logged yet ({first_log(log_dir)})")
        mark = monitored(chain[-1])  # what the run chooses its best by
        if len(chain) > 1:  # resumed: said in the title and the line (a version of another run folder by its path)
            names = (p.name if p.resolve().parent == chain[-1].resolve().parent else str(p) for p in chain[:-1])
            log_dir = f"{log_dir} (resumed; with {', '.join(names)})"
        gist = f"{log_dir}: {summary(series, mark)}"  # the picture's title and the line printed
        logs = [p for folder in chain for p in Path(folder).iterdir() if p.is_file()]
        with protecting(logs):  # the logs read are never replaced
            path = plot_report(series, out, gist, mark)
    except RunReportError as err:
        fail(f"{prog} report", str(err))
    except OSError as err:  # the picture's file, or a log that cannot be read (it said "cannot write RUN_DIR/...")
        failed = Path(err.filename) if getattr(err, "filename", None) else out
        if failed.resolve() != out.resolve():
            fail(f"{prog} report", f"cannot read {failed}: {err.strerror or one_line(err)}")
        more = "" if args.out else " (--out FILE writes it elsewhere)"
        fail(f"{prog} report", f"cannot write {out}: {err.strerror or one_line(err)}{more}")
    from text_attn.core.fonts import glyph_message, uncovered

    if chars := uncovered([gist]):  # the title's, drawn as boxes
        print(f"{prog} report: note: {glyph_message(chars)}", file=sys.stderr)
    print(f"wrote {path}", file=sys.stderr)
    emit(f"{prog} report", gist)
    return 0
