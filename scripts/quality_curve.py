r"""Score a training run at each of its checkpoints, as if its clock had stopped there (the average of the
last N checkpoints, beam search by the saved generation config), against the minutes of training spent: a
table, a JSON file and a PNG. `hf_vanilla_transformer.benchmarks.quality_curve` says when one run gives the
whole curve.

    python scripts/train.py scripts/recipes/multi30k_de_en.yaml --save_total_limit 100 \
        --output_dir outputs/multi30k-curve                  # keep every checkpoint
    python scripts/quality_curve.py --run_dir outputs/multi30k-curve --task translation \
        --dataset outputs/data/multi30k-de-en --source_lang de --target_lang en --split test --every 2
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

from hf_vanilla_transformer.benchmarks.quality_curve import format_curve, plot_curve, quality_curve
from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.evaluation.generation import EvaluationArguments
from hf_vanilla_transformer.tasks import DatasetArguments


@dataclass
class CurveArguments:
    run_dir: str = field(
        metadata={"help": "A training run's output_dir, with its checkpoint-<step> folders."}
    )
    last: int = field(default=5, metadata={"help": "How many checkpoints each point averages (§6.1)."})
    every: int = field(default=1, metadata={"help": "Score every N-th checkpoint (the last one always)."})
    split: str = field(default="test", metadata={"help": "Which split to score."})
    batch_size: int = field(default=50, metadata={"help": "Sentences per generate() call."})
    num_beams: int | None = field(
        default=None, metadata={"help": "Default: the saved generation config (4)."}
    )
    max_examples: int | None = field(default=None, metadata={"help": "Score the first N examples only."})
    output_dir: str | None = field(
        default=None, metadata={"help": "Where curve.json and curve.png go; default: <run_dir>/curve."}
    )


def main() -> None:
    args, data_args = parse_arguments(CurveArguments, DatasetArguments, description=__doc__)
    eval_args = EvaluationArguments(
        model=args.run_dir,
        split=args.split,
        batch_size=args.batch_size,
        num_beams=args.num_beams,
        max_examples=args.max_examples,
    )
    points = quality_curve(args.run_dir, eval_args, data_args, last=args.last, every=args.every)
    metric = data_args.task_spec.best_metric
    output_dir = Path(args.output_dir or Path(args.run_dir) / "curve")
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "curve.json").write_text(json.dumps(points, indent=2) + "\n", encoding="utf-8")
    png = plot_curve(
        points, metric, output_dir / "curve.png", title=f"{Path(args.run_dir).name}, {args.split}"
    )
    print(format_curve(points, metric))
    print(f"Wrote {output_dir / 'curve.json'} and {png}")


if __name__ == "__main__":
    run_script(main)
