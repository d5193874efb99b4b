"""Is one evaluation report better than another by more than the test set's noise?

Two reports of `scripts/evaluate_model.py` on the same split (every prediction next to its reference), the
first as the baseline. Translation reports go through sacreBLEU's paired tests for sacreBLEU and chrF:
approximate randomisation for the p-value, paired bootstrap resampling for each score's 95 % confidence
interval. Reports scored by exact match (the series task, a task of one's own without a metric of its own) go
through McNemar's exact test: only the examples one report gets right and the other wrong carry the
difference. A report scored by neither is refused. Both reports decode one fixed set of examples, so what the
tests measure is the sampling of that set, not the seed of a training run: for two decodings of one model
that is the whole noise, for two trained models only part of it. sacreBLEU's resampling is seeded (12345, or
the environment's SACREBLEU_SEED) and McNemar's test is exact, so a rerun gives the same p-values.

    python scripts/benchmarks/paired_significance.py --baseline outputs/eval/a/eval-test-beam4-lp0.6.json \\
        --other outputs/eval/a/eval-test-beam6-lp1.4.json --output_file outputs/eval/a/paired.json
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.metrics import binomial_standard_error, exact_match
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.outputs import check_output_location, write_json
from hf_vanilla_transformer.readers import read_json


@dataclass
class PairedArguments(Options):
    baseline: str = field(
        metadata={"help": "The report to beat: a JSON report of scripts/evaluate_model.py."}
    )
    other: str = field(metadata={"help": "The report that may beat it, on the same split of the same data."})
    ar_trials: int = field(
        default=10000,
        metadata={"help": "Approximate randomisation trials (translation reports).", "range": ">= 1"},
    )
    bootstrap_samples: int = field(
        default=1000, metadata={"help": "Paired bootstrap resamples (translation reports).", "range": ">= 1"}
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


def _shared_references(baseline: dict, other: dict) -> list:
    references = [example["reference"] for example in baseline["examples"]]
    if references != [example["reference"] for example in other["examples"]]:
        raise UsageError(
            "The two reports score different references: evaluate both on the same --split (and "
            "--max_examples) of the same data."
        )
    return references


def scoring(path: str | Path, report: dict) -> str:
    """How a report was scored: `bleu` (translation) or `exact_match` (the series task, tasks of one's own
    without a metric of their own), from the names in its metrics."""
    metrics = report.get("metrics")
    names = sorted(metrics) if isinstance(metrics, dict) else []
    for name in ("bleu", "exact_match"):
        if name in names:
            return name
    raise UsageError(
        f"{path}: its metrics ({', '.join(names) or 'none'}) hold neither bleu nor exact_match, the two "
        "scorings this test compares; write the report with scripts/evaluate_model.py for the translation "
        "task, the series task or a task scored by exact match."
    )


def compare_exact_match(baseline: dict, other: dict) -> dict:
    """Exact match of both reports (as the task's metric judges it) with its binomial standard error, and the
    two-sided p-value of `other`'s difference by McNemar's exact test: were the two equally good, each example
    that exactly one of them gets right would be `other`'s with probability 1/2."""
    _shared_references(baseline, other)
    right = [
        [exact_match(example["prediction"], example["reference"]) for example in report["examples"]]
        for report in (baseline, other)
    ]
    n = len(right[0])
    shares = [sum(judged) / n for judged in right]
    for option, report, share in zip(("--baseline", "--other"), (baseline, other), shares, strict=True):
        reported = report["metrics"]["exact_match"]
        if abs(share - reported) > 1e-9:
            raise UsageError(
                f"The {option} report gives exact match {reported}, but its predictions match their "
                f"references {share} of the time once stripped of surrounding whitespace: its task judges "
                "matches another way, which this test cannot repeat; compare such reports with the task's "
                "own metric."
            )
    only_baseline = sum(a and not b for a, b in zip(*right, strict=True))
    only_other = sum(b and not a for a, b in zip(*right, strict=True))
    discordant = only_baseline + only_other
    # The binomial tail in exact integers: scipy.stats.binomtest gives the same, and scipy is no dependency.
    tail = sum(math.comb(discordant, k) for k in range(min(only_baseline, only_other) + 1))
    p_value = min(1.0, 2 * tail / 2**discordant)
    entry = {
        "baseline": shares[0],
        "other": shares[1],
        "baseline_stderr": binomial_standard_error(shares[0], n),
        "other_stderr": binomial_standard_error(shares[1], n),
        "right_only_in_baseline": only_baseline,
        "right_only_in_other": only_other,
        "p_value_mcnemar_exact": p_value,
    }
    return {"num_examples": n, "exact_match": entry}


def compare(baseline: dict, other: dict, ar_trials: int = 10000, bootstrap_samples: int = 1000) -> dict:
    """sacreBLEU and chrF of both reports, the p-value of `other`'s difference by paired approximate
    randomisation, and each score's 95 % confidence half-width by paired bootstrap."""
    references = _shared_references(baseline, other)
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
    baseline, other = read_report(args.baseline), read_report(args.other)
    kinds = scoring(args.baseline, baseline), scoring(args.other, other)
    if kinds[0] != kinds[1]:
        raise UsageError(
            f"{args.baseline} is scored by {kinds[0]} and {args.other} by {kinds[1]}; compare two reports of "
            "the same task."
        )
    if kinds[0] == "exact_match":
        result = compare_exact_match(baseline, other)
    else:
        result = compare(baseline, other, args.ar_trials, args.bootstrap_samples)
    result["baseline_report"] = args.baseline
    result["other_report"] = args.other
    if "exact_match" in result:
        entry = result["exact_match"]
        print(
            f"exact_match: {entry['baseline']:.4f} (±{entry['baseline_stderr']:.4f}) -> "
            f"{entry['other']:.4f} (±{entry['other_stderr']:.4f}), "
            f"difference {entry['other'] - entry['baseline']:+.4f}; right only in the baseline: "
            f"{entry['right_only_in_baseline']}, only in the other: {entry['right_only_in_other']}; "
            f"p = {entry['p_value_mcnemar_exact']:.4g} (McNemar's exact test)"
        )
    for metric in ("bleu", "chrf") if "bleu" in result else ():
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
        write_json(args.output_file, result)
    return result


if __name__ == "__main__":
    run_script(main)
