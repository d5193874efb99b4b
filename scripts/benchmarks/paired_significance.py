"""Is one translation report better than another by more than the test set's noise?

Two reports of `scripts/evaluate_model.py` on the same split (every prediction next to its reference) go
through sacreBLEU's paired tests for sacreBLEU and chrF, the first report as the baseline: approximate
randomisation for the p-value, paired bootstrap resampling for each score's 95 % confidence interval. Both
decode one fixed set of sentences, so what the tests measure is the
sampling of that set, not the seed of a training run: for two decodings of one model that is the whole
noise, for two trained models only part of it. The resampling is seeded by sacreBLEU (12345, or the
environment's SACREBLEU_SEED), so a rerun gives the same p-values.

    python scripts/benchmarks/paired_significance.py --baseline outputs/eval/a/eval-test-beam4-lp0.6.json \\
        --other outputs/eval/a/eval-test-beam6-lp1.4.json --output_file outputs/eval/a/paired.json
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.outputs import check_output_location
from hf_vanilla_transformer.readers import read_json


@dataclass
class PairedArguments(Options):
    baseline: str = field(
        metadata={"help": "The report to beat: a JSON report of scripts/evaluate_model.py."}
    )
    other: str = field(metadata={"help": "The report that may beat it, on the same split of the same data."})
    ar_trials: int = field(
        default=10000, metadata={"help": "Approximate randomisation trials.", "range": ">= 1"}
    )
    bootstrap_samples: int = field(
        default=1000, metadata={"help": "Paired bootstrap resamples.", "range": ">= 1"}
    )
    output_file: str | None = field(default=None, metadata={"help": "Also write the result here, as JSON."})
    overwrite: bool = field(default=False, metadata={"help": "Replace an existing --output_file."})


def read_report(path: str | Path) -> dict:
    report = read_json(path, "Write it again with scripts/evaluate_model.py", what="report")
    examples = report.get("examples") if isinstance(report, dict) else None
    if (
        not isinstance(examples, list)
        or not examples
        or not all(
            isinstance(example, dict) and {"prediction", "reference"} <= example.keys()
            for example in examples
        )
    ):
        raise UsageError(
            f"{path}: holds no predictions ('examples', each with 'prediction' and 'reference'); write it "
            "with scripts/evaluate_model.py."
        )
    return report


def compare(baseline: dict, other: dict, ar_trials: int = 10000, bootstrap_samples: int = 1000) -> dict:
    """sacreBLEU and chrF of both reports, the p-value of `other`'s difference by paired approximate
    randomisation, and each score's 95 % confidence half-width by paired bootstrap."""
    references = [example["reference"] for example in baseline["examples"]]
    if references != [example["reference"] for example in other["examples"]]:
        raise UsageError(
            "The two reports score different references: evaluate both on the same --split (and "
            "--max_examples) of the same data."
        )
    systems = [
        ("baseline", [example["prediction"] for example in baseline["examples"]]),
        ("other", [example["prediction"] for example in other["examples"]]),
    ]
    metrics = {"bleu": BLEU(), "chrf": CHRF()}
    result = {"num_sentences": len(references)}
    for test_type, samples in (("ar", ar_trials), ("bs", bootstrap_samples)):
        test = PairedTest(systems, metrics, [references], test_type=test_type, n_samples=samples)
        signatures, scores = test()
        # sacreBLEU keys its answers by the metric's own name (BLEU, chrF2), in the order given
        for metric, name in zip(metrics, signatures, strict=True):
            base, challenger = scores[name]
            entry = result.setdefault(metric, {"signature": str(signatures[name])})
            entry["baseline"] = float(base.score)
            entry["other"] = float(challenger.score)
            if test_type == "ar":
                entry["p_value_approximate_randomization"] = float(challenger.p_value)
                entry["ar_trials"] = samples
            else:
                entry["baseline_95ci"] = float(base.ci)  # half-width, as sacreBLEU gives it
                entry["other_95ci"] = float(challenger.ci)
                entry["bootstrap_samples"] = samples
    return result


def main(argv: list[str] | None = None) -> dict:
    (args,) = parse_arguments(PairedArguments, description=__doc__, args=argv)
    if args.output_file is not None:
        check_output_location(args.output_file, args.overwrite, option="--output_file")
    result = compare(
        read_report(args.baseline), read_report(args.other), args.ar_trials, args.bootstrap_samples
    )
    result["baseline_report"] = args.baseline
    result["other_report"] = args.other
    for metric in ("bleu", "chrf"):
        entry = result[metric]
        print(
            f"{metric}: {entry['baseline']:.2f} (95% CI ±{entry['baseline_95ci']:.2f}) -> "
            f"{entry['other']:.2f} (±{entry['other_95ci']:.2f}), "
            f"difference {entry['other'] - entry['baseline']:+.2f}; "
            f"p = {entry['p_value_approximate_randomization']:.4f} (approximate randomisation, "
            f"{entry['ar_trials']} trials)"
        )
    if args.output_file is not None:
        Path(args.output_file).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output_file).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    run_script(main)
