r"""Score a training run at each of its checkpoints, as if its clock had stopped there (the average of the
last N checkpoints up to there, §6.1, beam search by the saved generation config, scored like the shipped
model), against the minutes of training spent by then (`time_budget.json`, written into every checkpoint of a
run with `max_train_minutes`): a table, a JSON file and a PNG.

    python scripts/train.py scripts/recipes/multi30k_de_en_paper.yaml --save_total_limit 100 \
        --output_dir outputs/multi30k-curve                  # keep every checkpoint
    python scripts/benchmarks/quality_curve.py --run_dir outputs/multi30k-curve --task translation \
        --dataset outputs/data/multi30k-de-en --source_lang de --target_lang en --split test --every 2

One run gives the whole curve when its schedule does not depend on the length of the run (eq. 3's inverse
square root): training for fewer minutes is then the same run stopped earlier. A schedule decayed by the clock
(`--decay_by_clock`) decays sooner for a shorter budget, so each budget is a run of its own: give them all,
and each is one point, its end (here its last checkpoint alone; `budget_curve`). `--compare` draws earlier
curves in the same plot:

    python scripts/benchmarks/quality_curve.py --run_dir outputs/run-30min outputs/run-75min --last 1 \
        --label "decay by the clock" --compare outputs/multi30k-curve/curve/curve.json \
        --output_dir outputs/curves --task translation --dataset outputs/data/multi30k-de-en \
        --source_lang de --target_lang en --split test

The command line (`main`) and the functions it calls, which the tests import as `benchmarks.quality_curve`.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.errors import MissingPathError, UsageError
from hf_vanilla_transformer.evaluation.scoring import EvaluationArguments, evaluate_model
from hf_vanilla_transformer.extras import require
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.outputs import check_not_a_file, staged, write_json
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
    """A curve.json written by this command: `{"label", "metric", "split", "points"}`."""
    script = "scripts/benchmarks/quality_curve.py"
    if not Path(path).exists():
        raise MissingPathError(f"No curve at {path}: give a curve.json of {script}.")
    curve = read_json(path, f"Score that run again with {script}", "curve file")
    if not isinstance(curve, dict) or not {"label", "metric", "points"} <= curve.keys():
        raise UsageError(
            f"{path} is not a curve.json of {script} (an object with label, metric and points): score that "
            "run again with this version of the script."
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
    with staged(path, folder=False) as staging:
        fig.savefig(staging, dpi=100, format="png")
    plt.close(fig)
    return path


@dataclass
class CurveArguments(Options):
    run_dir: list[str] = field(
        metadata={
            "help": "A training run's output_dir, with its checkpoint-<step> folders; or several runs, one "
            "per time budget, each scored at its end."
        }
    )
    last: int = field(
        default=5, metadata={"help": "How many checkpoints each point averages (§6.1).", "range": ">= 1"}
    )
    every: int = field(
        default=1,
        metadata={
            "help": "Score every N-th checkpoint (the last one always); one run only.",
            "range": ">= 1",
        },
    )
    split: str = field(default="test", metadata={"help": "Which split to score."})
    batch_size: int = field(default=50, metadata={"help": "Sentences per generate() call.", "range": ">= 1"})
    num_beams: int | None = field(
        default=None, metadata={"help": "Default: the saved generation config (4).", "range": ">= 1"}
    )
    max_examples: int | None = field(
        default=None, metadata={"help": "Score the first N examples only.", "range": ">= 1"}
    )
    label: str | None = field(
        default=None, metadata={"help": "This curve's name in the plot; default: the first run's folder."}
    )
    compare: list[str] = field(
        default_factory=list,
        metadata={"help": "curve.json files written by earlier runs of this script, drawn in the same plot."},
    )
    output_dir: str | None = field(
        default=None,
        metadata={"help": "Where curve.json and curve.png go; default: <run_dir>/curve (one run only)."},
    )
    overwrite: bool = field(
        default=False, metadata={"help": "Replace the curve and its reports left by an earlier run of this."}
    )


def main() -> None:
    args, data_args = parse_arguments(CurveArguments, DatasetArguments, description=__doc__)
    several = len(args.run_dir) > 1
    if several and args.every != 1:
        raise UsageError("--every picks checkpoints within one run; several runs are scored at their ends.")
    if several and args.output_dir is None:
        raise UsageError("With several runs, say where the curve goes: --output_dir.")
    metric = data_args.task_spec.best_metric
    others = [load_curve(path) for path in args.compare]
    for other in others:
        if other["metric"] != metric:
            raise UsageError(f"--compare {other['label']} plots {other['metric']}, this curve {metric}.")
    output_dir = Path(args.output_dir or Path(args.run_dir[0]) / "curve")
    check_not_a_file(output_dir)
    if (output_dir / "curve.json").exists() and not args.overwrite:
        raise UsageError(
            f"{output_dir / 'curve.json'} exists: pass --overwrite to replace it, or --output_dir to write "
            "elsewhere."
        )
    eval_args = EvaluationArguments(
        model=args.run_dir[0],
        split=args.split,
        batch_size=args.batch_size,
        num_beams=args.num_beams,
        max_examples=args.max_examples,
        overwrite=args.overwrite,
    )
    if several:
        points = budget_curve(args.run_dir, eval_args, data_args, output_dir, last=args.last)
    else:
        points = quality_curve(
            args.run_dir[0], eval_args, data_args, last=args.last, every=args.every, report_dir=output_dir
        )
    label = args.label or Path(args.run_dir[0]).name
    output_dir.mkdir(parents=True, exist_ok=True)
    curve = {"label": label, "metric": metric, "split": args.split, "points": points}
    write_json(output_dir / "curve.json", curve)
    curves = {label: points, **{other["label"]: other["points"] for other in others}}
    png = plot_curve(curves, metric, output_dir / "curve.png", title=f"{args.split} {metric}")
    print(format_curve(points, metric))
    print(f"Wrote {output_dir / 'curve.json'} and {png}")


if __name__ == "__main__":
    run_script(main)
