"""Quality against training time: the score a run would have shipped had its clock stopped at each of its
checkpoints (the average of the last N checkpoints up to there, §6.1, scored like the shipped model), against
the minutes of training spent by then (`time_budget.json`, written into every checkpoint of a run with
`max_train_minutes`). `scripts/quality_curve.py` is the command line.

One run gives the whole curve when its schedule does not depend on the length of the run (eq. 3's inverse
square root): training for fewer minutes is then the same run stopped earlier. With `decay_by_clock` a shorter
budget decays sooner, so each budget is a run of its own, and its point is the run's end (`budget_curve`).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hf_vanilla_transformer.errors import MissingPathError, UsageError
from hf_vanilla_transformer.evaluation.generation import EvaluationArguments, evaluate_model
from hf_vanilla_transformer.extras import require
from hf_vanilla_transformer.readers import read_json
from hf_vanilla_transformer.tasks import DatasetArguments
from hf_vanilla_transformer.training.averaging import average_checkpoints
from hf_vanilla_transformer.training.budget import TimeBudget
from hf_vanilla_transformer.training.checkpoints import complete_checkpoints, not_whole


def checkpoints_with_minutes(run_dir: str | Path) -> list[tuple[Path, float]]:
    """The run's whole `checkpoint-<step>` folders in step order, each with the minutes of training it
    records; one whose save did not finish is skipped, and named."""
    run_dir = Path(run_dir)
    checkpoints = complete_checkpoints(run_dir, unrecorded=True)
    if not checkpoints:
        raise MissingPathError(
            f"No whole checkpoint-<step> folders in {run_dir}{not_whole(run_dir)}: is it a training run's "
            "output_dir?"
        )
    points = []
    for checkpoint in checkpoints:
        record = checkpoint / TimeBudget.STATE_FILE
        if not record.is_file():
            raise MissingPathError(
                f"{checkpoint} has no {TimeBudget.STATE_FILE}: only runs with --max_train_minutes record the "
                "time of each checkpoint."
            )
        points.append((checkpoint, json.loads(record.read_text(encoding="utf-8"))["elapsed_seconds"] / 60))
    return points


def quality_curve(
    run_dir: str | Path,
    eval_args: EvaluationArguments,
    data_args: DatasetArguments,
    last: int = 5,
    every: int = 1,
    report_dir: str | Path | None = None,
) -> list[dict]:
    """For every `every`-th checkpoint of `run_dir` (the last one always), the average of the last `last`
    checkpoints up to it, scored by `evaluate_model` with `eval_args` (its `model` is ignored). Each point is
    `{"step", "minutes", "checkpoints", "metrics"}`; reports are written into `report_dir` (default: the run's
    `curve/` folder)."""
    if every < 1:
        raise UsageError(f"`every` ({every}) must be at least 1.")
    checkpoints = checkpoints_with_minutes(run_dir)
    chosen = [i for i in range(len(checkpoints)) if (len(checkpoints) - 1 - i) % every == 0]
    report_dir = Path(report_dir) if report_dir is not None else Path(run_dir) / "curve"
    return [_score(checkpoints, index, eval_args, data_args, last, report_dir) for index in chosen]


def budget_curve(
    run_dirs: list[str | Path],
    eval_args: EvaluationArguments,
    data_args: DatasetArguments,
    report_dir: str | Path,
    last: int = 1,
) -> list[dict]:
    """One point per run, at its end (the average of its last `last` checkpoints), in order of minutes: the
    curve of a schedule that depends on the budget, one run per budget. Points as in `quality_curve`; each
    run's report goes to `report_dir/<run folder name>/`."""
    points = []
    for run_dir in run_dirs:
        checkpoints = checkpoints_with_minutes(run_dir)
        points.append(
            _score(
                checkpoints,
                len(checkpoints) - 1,
                eval_args,
                data_args,
                last,
                Path(report_dir) / Path(run_dir).name,
            )
        )
    return sorted(points, key=lambda point: point["minutes"])


def _score(checkpoints, index, eval_args, data_args, last, report_dir: Path) -> dict:
    """The point of `checkpoints[index]`: the average of the `last` checkpoints up to it, scored."""
    if last < 1:
        raise UsageError(f"`last` ({last}) must be at least 1.")
    window = [path for path, _ in checkpoints[max(0, index - last + 1) : index + 1]]
    step = int(window[-1].name.split("-")[-1])
    with tempfile.TemporaryDirectory() as folder:
        averaged = average_checkpoints(window, Path(folder) / "averaged")
        args = EvaluationArguments(
            **{**vars(eval_args), "model": str(averaged), "show_examples": 0,
               "output_file": str(report_dir / f"eval-{eval_args.split}-step{step}.json")}
        )  # fmt: skip
        report = evaluate_model(args, data_args)
    return {
        "step": step,
        "minutes": checkpoints[index][1],
        "checkpoints": [path.name for path in window],
        "metrics": report["metrics"],
    }


def load_curve(path: str | Path) -> dict:
    """A curve.json written by `scripts/quality_curve.py`: `{"label", "metric", "split", "points"}`."""
    if not Path(path).exists():
        raise MissingPathError(f"No curve at {path}: give a curve.json of scripts/quality_curve.py.")
    curve = read_json(path, "Score that run again with scripts/quality_curve.py", "curve file")
    if not isinstance(curve, dict) or not {"label", "metric", "points"} <= curve.keys():
        raise UsageError(
            f"{path} is not a curve.json of scripts/quality_curve.py (an object with label, metric and "
            "points): score that run again with this version of the script."
        )
    return curve


def format_curve(points: list[dict], metric: str) -> str:
    """The Markdown table behind the plot."""
    lines = [f"| minutes | step | checkpoints averaged | {metric} |", "|---|---|---|---|"]
    for point in points:
        averaged = (
            f"{point['checkpoints'][0]} to {point['checkpoints'][-1]}"
            if len(point["checkpoints"]) > 1
            else point["checkpoints"][0]
        )
        lines.append(
            f"| {point['minutes']:.1f} | {point['step']:,} | {averaged} | {point['metrics'][metric]:.2f} |"
        )
    return "\n".join(lines)


def plot_curve(curves: dict[str, list[dict]], metric: str, path: str | Path, title: str = "") -> Path:
    """`metric` against minutes of training, one line per curve (named by its key in `curves`), one marker
    per point, as a PNG."""
    matplotlib = require("matplotlib", "The quality-curve plot")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for label, points in curves.items():
        minutes = [point["minutes"] for point in points]
        ax.plot(minutes, [point["metrics"][metric] for point in points], marker="o", label=label)
    ax.set_xlabel("minutes of training")
    ax.set_ylabel(metric)
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    if len(curves) > 1:
        ax.legend()
    if title:
        ax.set_title(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
