r"""Score a training run at each of its checkpoints, as if its clock had stopped there (the average of the
last N checkpoints, beam search by the saved generation config), against the minutes of training spent: a
table, a JSON file and a PNG. `scripts/benchmarks/quality_curve.py` says when one run gives the
whole curve.

    python scripts/train.py scripts/recipes/multi30k_de_en_paper.yaml --save_total_limit 100 \
        --output_dir outputs/multi30k-curve                  # keep every checkpoint
    python scripts/quality_curve.py --run_dir outputs/multi30k-curve --task translation \
        --dataset outputs/data/multi30k-de-en --source_lang de --target_lang en --split test --every 2

A schedule decayed by the clock (`--decay_by_clock`) needs one run per budget; give them all, and each is one
point, its end (here its last checkpoint alone). `--compare` draws earlier curves in the same plot:

    python scripts/quality_curve.py --run_dir outputs/run-30min outputs/run-75min --last 1 \
        --label "decay by the clock" --compare outputs/multi30k-curve/curve/curve.json \
        --output_dir outputs/curves --task translation --dataset outputs/data/multi30k-de-en \
        --source_lang de --target_lang en --split test
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.quality_curve import (
    budget_curve,
    format_curve,
    load_curve,
    plot_curve,
    quality_curve,
)
from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.evaluation.generation import EvaluationArguments
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.outputs import check_not_a_file
from hf_vanilla_transformer.tasks import DatasetArguments


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
    (output_dir / "curve.json").write_text(json.dumps(curve, indent=2) + "\n", encoding="utf-8")
    curves = {label: points, **{other["label"]: other["points"] for other in others}}
    png = plot_curve(curves, metric, output_dir / "curve.png", title=f"{args.split} {metric}")
    print(format_curve(points, metric))
    print(f"Wrote {output_dir / 'curve.json'} and {png}")


if __name__ == "__main__":
    run_script(main)
