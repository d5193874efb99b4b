"""The main job, end to end on a default that needs no download: build a small series-expansion data set
with the CAS, train its BPE tokenizer, train a small Transformer for a fixed wall-clock budget
(`--max_train_minutes`), evaluate it, save it to outputs/quickstart/run/final, reload it with
`from_pretrained`, and print its expansions next to the CAS's.

The problem is sized to be learned within that budget: expressions of one or two terms in the symbols a and b
(the recipes use up to four terms in six symbols).

    python scripts/quickstart.py            # the README says how long it takes and what it prints
    python scripts/quickstart.py --help     # its options
"""

from __future__ import annotations

import json
import logging
import math
import shlex
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.configuration_vanilla_transformer import PRESETS
from hf_vanilla_transformer.decoding.generation import generate_texts, generation_settings
from hf_vanilla_transformer.errors import ExistingPathError, UsageError
from hf_vanilla_transformer.evaluation.scoring import EvaluationArguments, evaluate_model
from hf_vanilla_transformer.metrics import exact_match
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.outputs import check_not_a_file
from hf_vanilla_transformer.saving import load_model_folder
from hf_vanilla_transformer.tasks import DataArguments
from hf_vanilla_transformer.tasks.series import SeriesTask
from hf_vanilla_transformer.tasks.series.dataset import generate_series_dataset
from hf_vanilla_transformer.tasks.series.expansion import taylor_series
from hf_vanilla_transformer.tasks.series.tokenizer import train_series_tokenizer
from hf_vanilla_transformer.tokenization import iter_dataset_texts, sequence_length_report
from hf_vanilla_transformer.training import (
    ModelArguments,
    PaperSeq2SeqTrainingArguments,
    RecipeArguments,
    run_training,
)
from hf_vanilla_transformer.training.budget import budget_report

# The README's quickstart run, which its figures come from (tests/test_quickstart.py holds them to its text):
# the steps the default options' budget bought on that machine, and the exact match they gave. A run that
# trains far fewer scores far lower, and says why (`fewer_steps_advice`).
README_STEPS = 3024
README_EXACT_MATCH = 0.660
README_MACHINE = "2 CPU cores"

# Expressions printed at the end, beside the CAS's expansion (not all in the training data).
DEMO_EXPRESSIONS = (
    "exp(2*a*x)",
    "sin(b*x) + cos(a*x)",
    "exp(a*x)*sin(b*x)",
    "tanh(2*b*x) - sinh(a*x)",
    "cos(3*b*x)/exp(a*x)",
)


@dataclass
class QuickstartArguments(Options):
    output_dir: str = field(
        default="outputs/quickstart",
        metadata={
            "help": "Where everything is written: data/, tokenizer/ and run/ (the model in run/final)."
        },
    )
    num_examples: int = field(
        default=8000, metadata={"help": "Series examples to generate (train+val+test).", "range": ">= 1"}
    )
    max_terms: int = field(
        default=2,
        metadata={
            "help": "Terms (function calls) per expression, at most (the recipes use 4).",
            "range": ">= 1",
        },
    )
    symbols: list[str] = field(
        default_factory=lambda: ["a", "b"],
        metadata={"help": "The symbols expressions draw from (the recipes use a b c d f g)."},
    )
    test_size: int = field(default=300, metadata={"help": "Test examples to evaluate on.", "range": ">= 1"})
    vocab_size: int = field(
        default=600, metadata={"help": "BPE vocabulary size of the series tokenizer.", "range": ">= 1"}
    )
    preset: str = field(default="transformer-mini", metadata={"help": "Model size preset."})
    max_train_minutes: float = field(
        default=6.0, metadata={"help": "Wall-clock training budget, minutes.", "range": "> 0"}
    )
    max_tokens: int = field(default=3000, metadata={"help": "Token budget per batch.", "range": ">= 1"})
    seed: int = field(default=0, metadata={"help": "Seed of data generation and training.", "range": ">= 0"})
    overwrite: bool = field(
        default=False,
        metadata={
            "help": "Write into an --output_dir that holds something other than an earlier quickstart (its "
            "data/, tokenizer/ and run/ are replaced). An earlier quickstart's folder is remade without it."
        },
    )

    def __post_init__(self):
        # Checked as the options are read, before minutes of data generation.
        super().__post_init__()
        if self.num_examples <= self.test_size + 100:
            raise UsageError(
                f"--num_examples ({self.num_examples}) must exceed --test_size ({self.test_size}) plus the "
                "100 validation examples, leaving some to train on."
            )
        if self.preset not in PRESETS:
            raise UsageError(f"Unknown --preset {self.preset!r}; available presets: {', '.join(PRESETS)}.")


# Written into --output_dir first: it marks the folder as the quickstart's own, to be remade by the next run.
OPTIONS_FILE = "quickstart-options.json"


def check_output_folder(out: Path, overwrite: bool) -> None:
    """Refuse an --output_dir that holds files the quickstart did not write (no `OPTIONS_FILE`) unless asked:
    each run replaces its data/, tokenizer/ and run/ folders."""
    check_not_a_file(out)
    if overwrite or not out.exists() or (out / OPTIONS_FILE).is_file():
        return
    if any(out.iterdir()):
        raise ExistingPathError(
            f"--output_dir {out} holds files that no earlier quickstart wrote (it has no {OPTIONS_FILE}), "
            "and a run replaces its data/, tokenizer/ and run/: pass --overwrite, or another --output_dir."
        )


def _say(message: str) -> None:
    print(f"\n[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def command_line(args: QuickstartArguments, **changes) -> str:
    """The command that runs the quickstart as `args` did (the options off their defaults), with `changes`."""
    defaults, words = QuickstartArguments(), ["python", "scripts/quickstart.py"]
    for option in fields(args):
        value = changes.get(option.name, getattr(args, option.name))
        if option.name in changes or value != getattr(defaults, option.name):
            words += [f"--{option.name}", *map(_shown, value if isinstance(value, list) else [value])]
    return shlex.join(words)


def _shown(value) -> str:
    """An option's value as a command line gives it."""
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def fewer_steps_advice(steps: int, args: QuickstartArguments) -> str | None:
    """What a run of `args` that trained `steps`, under half the README's, says beside its score: the score
    follows the steps, which the budget and the machine's speed decide, and the budget that would train about
    as many here. None for a run that trained half as many or more."""
    if steps * 2 >= README_STEPS:
        return None
    minutes = args.max_train_minutes
    # At the pace this run kept; a busy machine's pace varies, hence "about".
    needed = math.ceil(minutes * README_STEPS / max(steps, 1))
    readme_minutes = QuickstartArguments.max_train_minutes  # the README's run took the defaults
    lines = [
        f"This run trained {steps:,} steps in {minutes:g} minutes; the README's run trained "
        f"{README_STEPS:,} in {readme_minutes:g} minutes on",
        f"{README_MACHINE} with nothing else running, for exact match {README_EXACT_MATCH:.3f}. The score "
        "follows the steps,",
        "which the budget and the machine's speed decide. To train about as many steps here:",
        command_line(args, max_train_minutes=float(needed)),
    ]
    return "\n".join(f"    {line}" for line in lines)


def run_quickstart(args: QuickstartArguments) -> dict:
    started = time.time()
    out = Path(args.output_dir)
    data_dir, tokenizer_dir, run_dir = out / "data", out / "tokenizer", out / "run"
    check_output_folder(out, args.overwrite)
    out.mkdir(parents=True, exist_ok=True)
    (out / OPTIONS_FILE).write_text(json.dumps(asdict(args), indent=2) + "\n", encoding="utf-8")

    _say(
        f"1/5 Generating {args.num_examples} expression -> Taylor series pairs with symengine/sympy: up to "
        f"{args.max_terms} terms in the symbols {', '.join(args.symbols)} ..."
    )
    summary = generate_series_dataset(
        data_dir,
        args.num_examples,
        seed=args.seed,
        max_terms=args.max_terms,
        symbols=args.symbols,
        test_size=args.test_size,
        validation_size=100,
        overwrite=True,
    )
    print(f"    splits: {summary['splits']}; dropped by reason: {summary['drops']}")

    _say(f"2/5 Training a {args.vocab_size}-token BPE tokenizer on expressions and series ...")
    from datasets import load_from_disk

    data = load_from_disk(str(data_dir))
    tokenizer = train_series_tokenizer(
        iter_dataset_texts(data["train"], ["expression", "series"]),
        vocab_size=args.vocab_size,
        model_max_length=256,
        show_progress=False,
        output_dir=tokenizer_dir,
    )
    report = sequence_length_report(tokenizer, data["validation"]["series"])
    average_tokens, average_chars = report["avg_tokens"], report["avg_chars"]
    print(f"    a target series is {average_tokens:.1f} tokens on average ({average_chars:.1f} characters)")

    _say(
        f"3/5 Training a {args.preset} Transformer for {args.max_train_minutes:g} minutes (the paper's "
        "recipe, no dropout) ..."
    )
    # The default budget is too short to over-fit: dropout would only slow learning (measured: 0.48 exact
    # match with the paper's 0.1, 0.58 without).
    model_args = ModelArguments(preset=args.preset, config_overrides={"dropout": 0.0})
    data_args = DataArguments(
        task=SeriesTask.name,
        dataset=str(data_dir),
        tokenizer=str(tokenizer_dir),
        max_source_length=128,
        max_target_length=256,
    )
    # The quickstart remakes its own folder each time it runs, data and tokenizer included.
    recipe_args = RecipeArguments(
        max_tokens=args.max_tokens, lr_scale=1.0, max_train_minutes=args.max_train_minutes, overwrite=True
    )
    training_args = PaperSeq2SeqTrainingArguments(
        output_dir=str(run_dir),
        max_steps=100_000,
        warmup_steps=400,
        eval_strategy="no",
        save_strategy="no",
        logging_steps=50,
        seed=args.seed,
        disable_tqdm=False,
    )
    trainer, final = run_training(model_args, data_args, recipe_args, training_args)
    if final is None:  # Ctrl-C or SIGTERM: the quickstart saves no checkpoints (save_strategy "no")
        print(f"    stopped at step {trainer.state.global_step}; nothing saved.", file=sys.stderr)
        raise SystemExit(trainer.interruption.exit_status)
    steps = trainer.state.global_step
    print(f"    {budget_report(trainer.time_budget) or f'Trained {steps:,} steps.'}\n    Saved to {final}")

    _say("4/5 Evaluating on the test split (greedy decoding) ...")
    eval_report = evaluate_model(
        EvaluationArguments(model=str(final), split="test", num_beams=1, batch_size=50, show_examples=0),
        data_args,
    )
    metrics = eval_report["metrics"]
    print(
        f"    exact match {metrics['exact_match']:.3f} ± {metrics['exact_match_stderr']:.3f}, "
        f"symbolically equal {metrics['symbolic_match']:.3f} ± {metrics['symbolic_match_stderr']:.3f}, "
        f"parses {metrics['parse_rate']:.3f} (n={metrics['n']}); report: {eval_report['output_file']}"
    )
    advice = fewer_steps_advice(steps, args)
    if advice is not None:
        print(advice)

    _say(f"5/5 Reloading {final} with from_pretrained and expanding a few expressions ...")
    model, tokenizer = load_model_folder(final)
    # The series task caps outputs at the model's max_length: a series is many times longer than its
    # expression.
    generation = generation_settings(
        EvaluationArguments(model=str(final), num_beams=1), data_args.task_spec, model.generation_config
    )
    predictions = generate_texts(
        model, tokenizer, list(DEMO_EXPRESSIONS), batch_size=8, generation=generation
    )
    for expression, prediction in zip(DEMO_EXPRESSIONS, predictions, strict=True):
        reference = taylor_series(expression)
        verdict = "exact" if exact_match(prediction, reference) else "differs"
        print(f"\n  {expression}\n    model: {prediction}\n    CAS:   {reference}\n    ({verdict})")

    minutes = (time.time() - started) / 60
    _say(f"Done in {minutes:.1f} minutes. Model folder: {final}")
    return {"metrics": metrics, "minutes": minutes, "model": str(final)}


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    (args,) = parse_arguments(QuickstartArguments, description=__doc__)
    run_quickstart(args)


if __name__ == "__main__":
    run_script(main)
