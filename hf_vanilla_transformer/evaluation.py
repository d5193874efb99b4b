"""Evaluate a saved model on a data split: batched `generate()`, the task's metrics, a JSON report.

The report holds the command, the decoding settings, the metrics and every prediction next to its
source and reference, so every figure quoted in a model card can be traced to the run that made it.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from .tasks import DataArguments, load_raw_dataset, load_task_metric, score, text_fields

logger = logging.getLogger(__name__)

# Lower bounds of the bins of reference length (characters) in the series breakdown; in the 2,000-example test
# split of the generator's distribution they hold about 6, 35, 45, 12 and 2 % of the series.
SERIES_LENGTH_EDGES = (0, 50, 100, 200, 400)
# An integer of a series that is not an exponent: a numerator, a denominator ("/15"), a lone constant term.
# Exponents follow "*" ("x**2", "O(x**6)") and are left out: they are the monomial, not arithmetic.
SERIES_COEFFICIENT_INTEGER = re.compile(r"(?<![*\d])\d+")
# Groups of the breakdown by the largest such integer: its number of digits, the last group open-ended.
SERIES_INTEGER_DIGIT_GROUPS = (1, 2, 3, 4, 5)


@dataclass
class EvaluationArguments:
    model: str = field(
        default="outputs/run/final", metadata={"help": "A saved model folder (with tokenizer)."}
    )
    split: str = field(default="test", metadata={"help": "Which split of the data set to evaluate on."})
    batch_size: int = field(default=32, metadata={"help": "Sentences per generate() call."})
    num_beams: int | None = field(
        default=None, metadata={"help": "Default: the saved generation config (4)."}
    )
    length_penalty: float | None = field(default=None, metadata={"help": "Default: the saved config (0.6)."})
    max_new_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Default: translation, source length + 50 (§6.1); series, the saved config's max_length "
            "(a series is many times longer than its expression)."
        },
    )
    max_examples: int | None = field(
        default=None, metadata={"help": "Evaluate on the first N examples only."}
    )
    output_file: str | None = field(
        default=None, metadata={"help": "Default: <model>/eval-<split>-<decoding>.json"}
    )
    show_examples: int = field(
        default=5, metadata={"help": "How many predictions to print next to references."}
    )


def _decoding_name(generation: dict) -> str:
    beams = generation.get("num_beams", 1)
    return "greedy" if beams == 1 else f"beam{beams}-lp{generation.get('length_penalty', 1.0)}"


def generation_settings(eval_args: EvaluationArguments, task: str, generation_config) -> dict:
    """generate() keyword arguments: the command line's choices over the model's saved generation config.

    `max_new_tokens` stays None for translation (`generate_texts` then allows source length + 50, §6.1); a
    series is many times longer than its expression, so it gets the saved config's `max_length`.
    """
    return {
        "num_beams": eval_args.num_beams if eval_args.num_beams is not None else generation_config.num_beams,
        "length_penalty": (
            eval_args.length_penalty if eval_args.length_penalty is not None else generation_config.length_penalty
        ),
        "max_new_tokens": (
            eval_args.max_new_tokens
            if eval_args.max_new_tokens is not None or task == "translation"
            else generation_config.max_length
        ),
        "do_sample": False,
    }


def generate_texts(model, tokenizer, sources: list[str], batch_size: int, generation: dict) -> list[str]:
    """Generate for every source, batching sources of similar length (less padding), in input order."""
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    outputs: list[str | None] = [None] * len(sources)
    model.eval()
    for start in tqdm(range(0, len(order), batch_size), desc="Generating", unit="batch"):
        indices = order[start : start + batch_size]
        batch = tokenizer([sources[i] for i in indices], return_tensors="pt", padding=True).to(model.device)
        kwargs = dict(generation)
        max_new_tokens = kwargs.pop("max_new_tokens", None)
        if max_new_tokens is None:
            # §6.1: "maximum output length to input length + 50"
            max_new_tokens = batch["input_ids"].shape[1] + 50
        # Passed as the decoder's total length (start token + new tokens), which is what generate() turns
        # `max_new_tokens` into: given `max_new_tokens` beside the model's saved `max_length`, it would warn
        # on every batch that one overrides the other.
        kwargs["max_length"] = 1 + max_new_tokens
        with torch.inference_mode():
            generated = model.generate(**batch, **kwargs)
        for i, text in zip(indices, tokenizer.batch_decode(generated, skip_special_tokens=True), strict=True):
            outputs[i] = text.strip()
    return outputs  # type: ignore[return-value]


def evaluate_model(eval_args: EvaluationArguments, data_args: DataArguments) -> dict:
    """Generate for `eval_args.split` and score it; write and return the report."""
    tokenizer = AutoTokenizer.from_pretrained(eval_args.model)
    model = AutoModelForSeq2SeqLM.from_pretrained(eval_args.model)
    raw = load_raw_dataset(data_args)
    if eval_args.split not in raw:
        raise ValueError(f"No split {eval_args.split!r} in {data_args.dataset}; splits: {', '.join(raw)}.")
    split = raw[eval_args.split]
    if eval_args.max_examples is not None:
        split = split.select(range(min(eval_args.max_examples, split.num_rows)))
    (src_column, src_key), (tgt_column, tgt_key) = text_fields(data_args)
    sources = [row[src_key] for row in split[src_column]] if src_key else list(split[src_column])
    references = [row[tgt_key] for row in split[tgt_column]] if tgt_key else list(split[tgt_column])

    generation = generation_settings(eval_args, data_args.task, model.generation_config)
    started = time.time()
    predictions = generate_texts(model, tokenizer, sources, eval_args.batch_size, generation)
    seconds = time.time() - started

    metric = load_task_metric(data_args.task)
    metrics = score(data_args.task, metric, predictions, references)
    task_details = {}
    if data_args.task == "translation":
        lower = metric.compute(predictions=predictions, references=references, lowercase=True)
        metrics["bleu_lowercase"] = lower["score"]
        metrics["bleu_lowercase_signature"] = lower["signature"]
    else:
        task_details["exact_match_by_reference_length"] = exact_match_by_reference_length(predictions, references)
        task_details["exact_match_by_largest_integer"] = exact_match_by_largest_integer(predictions, references)
        task_details["exact_match_by_term_count"] = exact_match_by_term_count(sources, predictions, references)
        if "train" in raw and eval_args.split != "train":
            train_sources = raw["train"][src_column]
            task_details["exact_match_by_train_overlap"] = exact_match_by_train_overlap(
                sources, predictions, references, train_sources
            )

    report = {
        "command": " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv]),
        "model": eval_args.model,
        "data": asdict(data_args),
        "split": eval_args.split,
        "num_examples": len(sources),
        "generation": generation,
        "generation_seconds": round(seconds, 1),
        "metrics": metrics,
        **task_details,
        "examples": [
            {"source": s, "reference": r, "prediction": p}
            for s, r, p in zip(sources, references, predictions, strict=True)
        ],
    }
    output_file = Path(
        eval_args.output_file
        or Path(eval_args.model) / f"eval-{eval_args.split}-{_decoding_name(generation)}.json"
    )
    output_file.parent.mkdir(parents=True, exist_ok=True)
    output_file.write_text(json.dumps(report, indent=2, ensure_ascii=False))
    report["output_file"] = str(output_file)
    return report


def _exact_match_row(label_key: str, label: str, hits: list[bool]) -> dict:
    """One row of a breakdown: the group's label, size, exact match and its binomial standard error."""
    from .metrics.series_metrics.series_metrics import binomial_standard_error

    accuracy = sum(hits) / len(hits)
    return {
        label_key: label,
        "n": len(hits),
        "exact_match": accuracy,
        "exact_match_stderr": binomial_standard_error(accuracy, len(hits)),
    }


def exact_match_by_reference_length(
    predictions: list[str], references: list[str], edges: tuple[int, ...] = SERIES_LENGTH_EDGES
) -> list[dict]:
    """Exact match within bins of reference length (characters; `edges` are the bins' lower bounds), with
    the binomial standard error of each: how accuracy falls as series get longer. Empty bins are left out."""
    bins = []
    for low, high in zip(edges, (*edges[1:], None), strict=True):
        hits = [
            prediction == reference
            for prediction, reference in zip(predictions, references, strict=True)
            if low <= len(reference) and (high is None or len(reference) < high)
        ]
        if hits:
            label = f"{low}-{high - 1}" if high is not None else f"{low}+"
            bins.append(_exact_match_row("reference_chars", label, hits))
    return bins


def exact_match_by_largest_integer(
    predictions: list[str], references: list[str], digit_groups: tuple[int, ...] = SERIES_INTEGER_DIGIT_GROUPS
) -> list[dict]:
    """Exact match grouped by the number of digits of the largest coefficient integer in the reference
    (`digit_groups` are consecutive digit counts; the last takes every longer integer too): how accuracy
    falls as the arithmetic gets harder. Empty groups are left out."""
    groups: dict[int, list[bool]] = {digits: [] for digits in digit_groups}
    for prediction, reference in zip(predictions, references, strict=True):
        digits = max((len(number) for number in SERIES_COEFFICIENT_INTEGER.findall(reference)), default=1)
        groups[min(max(digits, digit_groups[0]), digit_groups[-1])].append(prediction == reference)
    return [
        _exact_match_row("largest_integer_digits", f"{digits}+" if digits == digit_groups[-1] else str(digits), hits)
        for digits, hits in groups.items()
        if hits
    ]


def exact_match_by_term_count(sources: list[str], predictions: list[str], references: list[str]) -> list[dict]:
    """Exact match grouped by the number of terms (function calls) of the source expression, fewest first:
    how accuracy falls as expressions grow. Empty groups are left out."""
    from .data.series import count_terms

    groups: dict[int, list[bool]] = {}
    for source, prediction, reference in zip(sources, predictions, references, strict=True):
        groups.setdefault(count_terms(source), []).append(prediction == reference)
    return [_exact_match_row("terms", str(terms), groups[terms]) for terms in sorted(groups)]


def exact_match_by_train_overlap(
    sources: list[str], predictions: list[str], references: list[str], train_sources: list[str]
) -> list[dict]:
    """Exact match apart for expressions that are a training expression with its symbols renamed (which
    a model can answer by recall) and for new ones (which it has to expand). Empty groups are left out."""
    from .data.series import symbol_renaming_shape

    train_shapes = {symbol_renaming_shape(source) for source in train_sources}
    groups: dict[str, list[bool]] = {"renaming of a training expression": [], "new": []}
    for source, prediction, reference in zip(sources, predictions, references, strict=True):
        seen = symbol_renaming_shape(source) in train_shapes
        groups["renaming of a training expression" if seen else "new"].append(prediction == reference)
    return [_exact_match_row("expression", name, hits) for name, hits in groups.items() if hits]


def format_report(report: dict, show_examples: int = 5) -> str:
    """Metrics and a few predictions side by side with their references, for the terminal."""
    lines = [
        f"{report['model']} on {report['split']} ({report['num_examples']} examples, "
        f"{_decoding_name(report['generation'])}, {report['generation_seconds']} s):"
    ]
    for name, value in report["metrics"].items():
        lines.append(f"  {name}: {value:.4f}" if isinstance(value, float) else f"  {name}: {value}")
    for row in report.get("exact_match_by_reference_length", []):
        lines.append(
            f"  exact match, reference of {row['reference_chars']} characters ({row['n']} examples): "
            f"{row['exact_match']:.4f} ± {row['exact_match_stderr']:.4f}"
        )
    for row in report.get("exact_match_by_largest_integer", []):
        lines.append(
            f"  exact match, largest integer of {row['largest_integer_digits']} digits ({row['n']} examples): "
            f"{row['exact_match']:.4f} ± {row['exact_match_stderr']:.4f}"
        )
    for row in report.get("exact_match_by_term_count", []):
        lines.append(
            f"  exact match, {row['terms']}-term expressions ({row['n']} examples): "
            f"{row['exact_match']:.4f} ± {row['exact_match_stderr']:.4f}"
        )
    for row in report.get("exact_match_by_train_overlap", []):
        lines.append(
            f"  exact match, expression {row['expression']} ({row['n']} examples): "
            f"{row['exact_match']:.4f} ± {row['exact_match_stderr']:.4f}"
        )
    for example in report["examples"][:show_examples]:
        lines += [
            f"  source:     {example['source']}",
            f"  reference:  {example['reference']}",
            f"  prediction: {example['prediction']}",
            "",
        ]
    lines.append(f"Report written to {report['output_file']}")
    return "\n".join(lines)
