"""The series data set: generate unique (expression, series) pairs, split them, save them with a summary.

    expression: exp(2*d*x)*tan(c*x)**3
    series:     c**3*x**3 + 2*c**3*d*x**4 + x**5*(c**5 + 2*c**3*d**2) + O(x**6)

Expressions without a Taylor series at 0 (poles) or whose series does not depend on x are dropped, and every
drop is counted by reason in `summary.json`. Same arguments give byte-identical data files, whatever the
number of workers (see `workers` for the one caveat, timeouts).
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ...errors import CorruptFileError, ExistingPathError, MissingPathError, UsageError
from ...options import Options
from ...outputs import staged
from ...readers import read_json
from .grammar import SYMBOL_NAMES, count_terms
from .renamings import symbol_renaming_shape
from .sampling import MAX_TERMS, check_sampling


def split_examples(
    examples: Sequence[tuple[str, str]], test_size: int, validation_size: int, seed: int = 0
) -> dict[str, list[tuple[str, str]]]:
    """Shuffle (seeded) and cut into test, validation and train, in that order.

    Sources are unique (``generate_examples`` removes duplicates), so no source is in two splits.
    """
    from .workers import validate_positive

    validate_positive("test_size", test_size, allow_zero=True, integer=True)
    validate_positive("validation_size", validation_size, allow_zero=True, integer=True)
    if test_size + validation_size >= len(examples):
        raise UsageError(
            f"test_size={test_size} + validation_size={validation_size} leaves no training examples "
            f"out of {len(examples)}; lower them or raise num_examples."
        )
    order = list(range(len(examples)))
    # A string seed goes through sha512, so the split order does not follow the sampler's stream.
    random.Random(f"split-{seed}").shuffle(order)
    shuffled = [examples[i] for i in order]
    return {
        "train": shuffled[test_size + validation_size :],
        "validation": shuffled[test_size : test_size + validation_size],
        "test": shuffled[:test_size],
    }


def length_stats(values: Sequence[int]) -> dict[str, float]:
    """Mean, min, max and nearest-rank percentiles (50, 90, 99) of a list of lengths."""
    if not values:
        return {}
    ordered = sorted(values)

    def percentile(p: float) -> int:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]

    return {
        "mean": round(sum(ordered) / len(ordered), 2),
        "min": ordered[0],
        "p50": percentile(50),
        "p90": percentile(90),
        "p99": percentile(99),
        "max": ordered[-1],
    }


@dataclass
class SeriesDataArguments(Options):
    """Command-line arguments of ``scripts/generate_series.py`` (parsed with ``HfArgumentParser``)."""

    # The summary of the data set output_dir holds already, made with these arguments (the output check's)
    kept_summary = None  # not a field: no option of the command line

    output_dir: str = field(
        default="outputs/data/series", metadata={"help": "Where to save the DatasetDict and summary.json."}
    )
    num_examples: int = field(
        default=50_000, metadata={"help": "Unique examples in all splits together.", "range": ">= 1"}
    )
    seed: int = field(
        default=0, metadata={"help": "Seed of the expression sampler and of the split.", "range": ">= 0"}
    )
    max_terms: int = field(
        default=MAX_TERMS,
        metadata={
            "help": f"Terms (function calls) per expression, at most; 1 to {MAX_TERMS} drawn uniformly.",
            "range": ">= 1",
        },
    )
    symbols: list[str] = field(
        default_factory=lambda: list(SYMBOL_NAMES),
        metadata={"help": f"The symbols expressions draw from, a subset of {' '.join(SYMBOL_NAMES)}."},
    )
    num_proc: int = field(default=2, metadata={"help": "Worker processes computing series.", "range": ">= 1"})
    test_size: int | None = field(
        default=None,
        metadata={
            "help": "Examples in the test split (default: 2000, or 4 percent below 50,000).",
            "range": ">= 0",
        },
    )
    validation_size: int | None = field(
        default=None,
        metadata={
            "help": "Examples in the validation split (default: 1000, or 2 percent below 50,000).",
            "range": ">= 0",
        },
    )
    timeout: float = field(
        default=2.0,
        metadata={"help": "Seconds per expression before its worker is killed and replaced.", "range": "> 0"},
    )
    max_target_chars: int = field(
        default=1000,
        metadata={
            "help": "Longer series are dropped as too_long (the 99th percentile is ~500).",
            "range": ">= 1",
        },
    )
    memory_limit_mb: int = field(
        default=2048,
        metadata={"help": "Extra address space per worker; 0 disables the limit.", "range": ">= 0"},
    )
    overwrite: bool = field(default=False, metadata={"help": "Replace an existing non-empty output_dir."})
    held_out_from: str | None = field(
        default=None,
        metadata={
            "help": "An earlier data set of this script whose validation and test splits are kept as they "
            "are: every generated example whose expression is in neither becomes training data. More "
            "training data against the same held-out expressions; its sampler settings must be these."
        },
    )

    def __post_init__(self):
        super().__post_init__()
        check_sampling(self.max_terms, self.symbols)
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise UsageError(f"seed={self.seed!r} must be an integer.")
        if self.held_out_from is not None:
            if self.test_size or self.validation_size:  # 0, 0: this check's own result, parsed again
                raise UsageError(
                    "--held_out_from keeps that data set's validation and test splits: drop --test_size "
                    "and --validation_size."
                )
            if Path(self.held_out_from).resolve() == Path(self.output_dir).resolve():
                raise UsageError(
                    f"--held_out_from {self.held_out_from} is the output_dir: write the larger set to a new "
                    "folder."
                )
            self.test_size = self.validation_size = 0  # nothing generated is held out: the folder's are
            self._check_output_dir()
            return
        default_test, default_validation = default_split_sizes(self.num_examples)
        if self.test_size is None:
            self.test_size = default_test
        if self.validation_size is None:
            self.validation_size = default_validation
        if self.test_size + self.validation_size >= self.num_examples:
            raise UsageError(
                f"test_size={self.test_size} + validation_size={self.validation_size} must be smaller than "
                f"num_examples={self.num_examples} so that the train split is not empty; lower the split "
                "sizes or raise num_examples."
            )
        self._check_output_dir()

    def _check_output_dir(self) -> None:
        path = Path(self.output_dir)
        if path.exists() and not path.is_dir():
            raise UsageError(
                f"output_dir={self.output_dir!r} is a file: give a folder (a new one, or one to replace)."
            )
        if path.is_dir() and any(path.iterdir()) and not self.overwrite:
            summary, differing = self.differing_from(path)
            if not differing:
                # the same arguments make the same files, so a second run (a recipe run again) has nothing
                # to do; the first run's files are kept as they are (summary.json is written last: whole)
                self.kept_summary = summary
                return
            if differing == ["*"]:
                reason = "is not empty"
            else:
                reason = "holds a data set made with another " + ", ".join(differing)
            raise ExistingPathError(
                f"output_dir={self.output_dir!r} {reason}; choose another directory or pass "
                "overwrite=True (--overwrite) to replace it."
            )

    def differing_from(self, folder: Path) -> tuple[dict | None, list[str]]:
        """The summary of the data set in `folder` and the arguments deciding the data that differ from
        those it was made with; (None, ["*"]) when `folder` holds no readable summary of this script."""
        try:
            summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
            earlier = summary["arguments"]
            differing = [name for name in DATA_SETTINGS if earlier[name] != getattr(self, name)]
            held_out = [earlier["held_out_from"], self.held_out_from]
        except (OSError, ValueError, KeyError, TypeError):
            return None, ["*"]
        if len({None if path is None else Path(path).resolve() for path in held_out}) > 1:
            differing.append("held_out_from")
        return summary, differing


SAMPLER_SETTINGS = ("max_terms", "symbols", "max_target_chars")
# What decides a data set's files (held_out_from too, compared as a path); not the workers or their memory.
DATA_SETTINGS = ("num_examples", "seed", *SAMPLER_SETTINGS, "test_size", "validation_size", "timeout")


def check_held_out_from(args: SeriesDataArguments) -> None:
    """Refuse `args.held_out_from` unless its expressions were drawn as `args` would draw them (else the
    larger set's training data is another distribution), before minutes of generation."""
    folder = Path(args.held_out_from)
    if folder.is_file():
        raise UsageError(
            f"--held_out_from {folder} is a file: give the folder scripts/generate_series.py wrote."
        )
    if not folder.is_dir() or not (folder / "summary.json").exists():
        state = "does not exist" if not folder.is_dir() else "holds no summary.json"
        raise MissingPathError(
            f"--held_out_from {folder} {state}: give a folder written by scripts/generate_series.py."
        )
    summary = read_json(folder / "summary.json", f"Make the data set {folder} again", what="summary")
    try:
        earlier, sizes = summary["arguments"], summary["splits"]
        earlier.items(), sizes.items()
    except (KeyError, TypeError, AttributeError):
        raise CorruptFileError(
            f"{folder / 'summary.json'} holds no 'arguments' and 'splits' of scripts/generate_series.py: "
            f"make the data set {folder} again."
        ) from None
    differing = [name for name in SAMPLER_SETTINGS if earlier.get(name) != getattr(args, name)]
    if differing:
        raise UsageError(
            f"--held_out_from {folder} was drawn with "
            + ", ".join(f"{name} {earlier.get(name)!r}" for name in differing)
            + "; give the same "
            + ", ".join(f"--{name}" for name in differing)
            + " so that the new training data follows the held-out data's distribution."
        )
    empty = [name for name in ("validation", "test") if not sizes.get(name)]
    if empty:
        raise UsageError(f"--held_out_from {folder} has no {' and no '.join(empty)} examples to keep.")


def read_held_out_splits(folder: str | os.PathLike) -> dict[str, list[tuple[str, str]]]:
    """The validation and test pairs of the data set in `folder`. Call it once the workers have finished
    (it imports `datasets`: see `generate_series_dataset`)."""
    from ...data.files import load_saved_dataset

    dataset = load_saved_dataset(folder)
    missing = [name for name in ("validation", "test") if name not in dataset]
    if missing:
        raise CorruptFileError(
            f"--held_out_from {folder} has no {' or '.join(missing)} split, though its summary.json counts "
            "one: make it again."
        )
    return {
        name: list(zip(dataset[name]["expression"], dataset[name]["series"], strict=True))
        for name in ("validation", "test")
    }


def default_split_sizes(num_examples: int) -> tuple[int, int]:
    """(test_size, validation_size) when not given: 2000 and 1000, scaled to 4% and 2% of smaller sets."""
    return min(2000, num_examples * 4 // 100), min(1000, num_examples * 2 // 100)


def generate_series_dataset(
    output_dir: str | os.PathLike, num_examples: int = 50_000, *, progress: bool = True, **options
) -> dict:
    """Generate, split and save the data set; return the summary (also written to summary.json).

    `options` are the other fields of `SeriesDataArguments` (seed, num_proc, test_size, validation_size,
    timeout, max_target_chars, memory_limit_mb, overwrite); bad values raise `ValueError` naming them.
    `output_dir` receives a `datasets.DatasetDict` (`save_to_disk`; splits train, validation and test, one
    asked to be empty left out; columns `expression` and `series`) and `summary.json` (split sizes, drops by
    reason, character-length statistics, the arguments and the time taken). A folder holding the data set
    these arguments make is kept as it is, and its summary returned.
    """
    # The CAS (sympy, symengine) and its workers: imported to generate, not to parse these options.
    import sympy as sp

    from .expansion import se
    from .workers import generate_examples

    args = SeriesDataArguments(output_dir=str(output_dir), num_examples=num_examples, **options)
    if args.kept_summary is not None:
        return args.kept_summary
    if args.held_out_from is not None:
        check_held_out_from(args)
    started = time.perf_counter()
    result = generate_examples(
        args.num_examples,
        seed=args.seed,
        max_terms=args.max_terms,
        symbols=args.symbols,
        num_proc=args.num_proc,
        timeout=args.timeout,
        max_target_chars=args.max_target_chars,
        memory_limit_mb=args.memory_limit_mb,
        progress=progress,
    )
    generation_seconds = time.perf_counter() - started
    if len(result.examples) < args.num_examples:  # only possible if the candidate stream ends
        made = len(result.examples)
        raise UsageError(
            f"Only {made} of --num_examples {args.num_examples} unique examples could be made from "
            f"expressions of up to {args.max_terms} terms in the symbols {args.symbols}: ask for at most "
            f"{made}, or allow more terms or symbols (--max_terms, --symbols). Nothing was written."
        )
    if args.held_out_from is None:
        splits = split_examples(result.examples, args.test_size, args.validation_size, args.seed)
    else:
        held_out = read_held_out_splits(args.held_out_from)
        kept = {expression for rows in held_out.values() for expression, _ in rows}
        splits = {"train": [example for example in result.examples if example[0] not in kept], **held_out}

    # datasets is imported only now: it maps ~1.3 GB of address space and may start threads, and
    # neither should be inherited by the forked workers above.
    from datasets import Dataset, DatasetDict

    # A split asked to be empty (--test_size 0) is left out, as the summary's count of 0 says: `datasets`
    # saves an empty split as one that `load_from_disk` cannot read.
    dataset = DatasetDict(
        {
            name: Dataset.from_dict({"expression": [e for e, _ in rows], "series": [s for _, s in rows]})
            for name, rows in splits.items()
            if rows
        }
    )
    train_targets = {s for _, s in splits["train"]}
    train_shapes = {symbol_renaming_shape(e) for e, _ in splits["train"]}
    summary = {
        "description": (
            "Taylor series about x = 0 up to O(x**6) of random expressions in exp, sin, cos, tan, sinh, "
            f"cosh, tanh of k*s*x, s in {{{', '.join(args.symbols)}}}, at most {args.max_terms} terms (after "
            "Judge & Prosper 2023). Coefficients are "
            "cancelled rational functions, printed expanded over a monomial denominator, else as (N)/(D)."
        ),
        "splits": {name: len(rows) for name, rows in splits.items()},
        "held_out_from": args.held_out_from,
        "num_candidates": result.num_candidates,
        "drops": result.drops,
        "timed_out_expressions": result.timed_out[:50],
        "slowest_expression": {"seconds": round(result.slowest[0], 3), "expression": result.slowest[1]},
        # Single terms run out fast (a few hundred exist), hence most duplicates and few 1-term examples.
        "terms_per_expression": dict(
            sorted(Counter(str(count_terms(e)) for e, _ in result.examples).items())
        ),
        "lengths_chars": {
            "expression": length_stats([len(e) for e, _ in result.examples]),
            "series": length_stats([len(s) for _, s in result.examples]),
        },
        # Different sources can share a series (e.g. tan(a*x)*cos(a*x) and sin(a*x)); informational.
        "series_also_in_train": {
            name: sum(s in train_targets for _, s in splits[name]) for name in ("validation", "test")
        },
        # Expressions that are a training expression with its symbols renamed: answerable by recall.
        "expressions_renaming_train": {
            name: sum(symbol_renaming_shape(e) in train_shapes for e, _ in splits[name])
            for name in ("validation", "test")
        },
        "arguments": asdict(args),
        "versions": {"sympy": sp.__version__, "symengine": se.__version__},
        "seconds": {
            "generation": round(generation_seconds, 1),
            "total": round(time.perf_counter() - started, 1),
        },
    }
    with staged(args.output_dir) as staging:
        dataset.save_to_disk(str(staging))
        (staging / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
