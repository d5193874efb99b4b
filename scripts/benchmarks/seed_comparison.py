"""Recipes compared with seeds: each arm (a recipe, or the baseline with one lever changed) trained with
several seeds for the same number of updates, its last checkpoint scored, and every difference from the
baseline set against the spread of the seeds. `scripts/benchmarks/multi30k_seeds.py` is the command line.

With two or three seeds a side there is no honest confidence interval, so the rule is deliberately plain: a
difference counts only when the arms' ranges do not overlap (every seed of one arm above every seed of the
other). Anything else reads "inside the seed noise".
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from hf_vanilla_transformer.errors import MissingPathError, UsageError
from hf_vanilla_transformer.extras import require
from hf_vanilla_transformer.training.logs import LOSS_LOG_NAME


def compare_arms(scores: dict[str, list[float]], baseline: str) -> list[dict]:
    """One row per arm: its scores by seed, their mean and range, and its difference from `baseline`'s mean
    with the verdict (`"above"`, `"below"` or `"inside the seed noise"`; `None` for the baseline itself)."""
    if baseline not in scores:
        raise UsageError(f"No scores for the baseline arm {baseline!r}; arms: {', '.join(scores)}.")
    base = scores[baseline]
    rows = []
    for arm, values in scores.items():
        if not values:
            raise UsageError(f"Arm {arm!r} has no scores.")
        row = {
            "arm": arm,
            "scores": values,
            "mean": statistics.fmean(values),
            "min": min(values),
            "max": max(values),
        }
        if arm == baseline:
            row["difference"], row["verdict"] = None, None
        else:
            row["difference"] = row["mean"] - statistics.fmean(base)
            if len(values) < 2 or len(base) < 2:
                row["verdict"] = "one seed: no noise band"
            elif min(values) > max(base):
                row["verdict"] = "above"
            elif max(values) < min(base):
                row["verdict"] = "below"
            else:
                row["verdict"] = "inside the seed noise"
        rows.append(row)
    return rows


def format_comparison(rows: list[dict], metric: str = "sacreBLEU") -> str:
    """The rows of `compare_arms` as a Markdown table."""
    lines = [
        f"| arm | {metric} by seed | mean | range | difference from the baseline | outside the seed noise? |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        difference = "baseline" if row["difference"] is None else f"{row['difference']:+.2f}"
        verdict = "" if row["verdict"] is None else row["verdict"]
        lines.append(
            f"| {row['arm']} | {', '.join(f'{value:.2f}' for value in row['scores'])} | {row['mean']:.2f} | "
            f"{row['min']:.2f}-{row['max']:.2f} | {difference} | {verdict} |"
        )
    return "\n".join(lines)


def validation_curve(run_dir: str | Path, key: str = "eval_loss") -> list[tuple[int, float]]:
    """(step, value) of `key` from a run's loss log, in step order."""
    path = Path(run_dir) / LOSS_LOG_NAME
    if not path.is_file():
        raise MissingPathError(f"No {LOSS_LOG_NAME} in {run_dir}: is it a training run's output_dir?")
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return sorted((record["step"], record[key]) for record in records if key in record)


def plot_validation_curves(
    curves: dict[str, list[list[tuple[int, float]]]], path: str | Path, ylabel: str = "validation loss"
) -> Path:
    """One colour per arm, one line per seed: validation loss against updates, as a PNG."""
    matplotlib = require("matplotlib", "The validation-curve plot")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for index, (arm, runs) in enumerate(curves.items()):
        colour = f"C{index}"
        for number, points in enumerate(runs):
            ax.plot(
                [step for step, _ in points],
                [value for _, value in points],
                marker="o",
                color=colour,
                alpha=0.8,
                label=arm if number == 0 else None,
            )
    ax.set_xlabel("updates")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
