"""The series task (after Judge & Prosper's Transformer tutorial): `expression` -> `series` columns (Taylor
series to O(x**6)), scored by exact string match (every task's), symbolic equivalence (sympy), the share of
predictions that parse and the share with the reference's terms. This module is the task, as the registry
knows it, and its scores; beside it, one module per concern:

- `grammar`: the names, the tokenizer's split patterns and the one safe parser, used by the generator, the
  tokenizer and the metric alike (imports only sympy and the standard library);
- `sampling`: random source expressions;
- `expansion`: the CAS's canonical series of one expression;
- `workers`: many expansions in parallel, each under a time and a memory limit;
- `dataset`: building, splitting and saving the data set, with its summary;
- `renamings`: order-preserving symbol renamings (recall versus expansion, data augmentation);
- `equivalence`: symbolic comparison of a prediction with its reference, in a worker with a time limit;
- `reports`: exact match broken down by length, arithmetic, number of terms and overlap with training data;
- `tokenizer`: a BPE over the grammar's chunks, and the tutorial's fixed vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import UsageError
from ...metrics import binomial_standard_error
from ...options import Options
from ..base import Task
from ..registry import register_task
from .grammar import check_model_input
from .renamings import add_symbol_renamings, held_out_expressions
from .reports import ROW_FORMATS, series_breakdowns


@dataclass
class SeriesOptions(Options):
    symbol_renamings: int = field(
        default=0,
        metadata={
            "help": "Series training: add up to N renamings of each training pair's symbols that keep their "
            "alphabetical order (so the renamed series is still the CAS's canonical one); none equals a "
            "validation or test expression.",
            "range": ">= 0",
        },
    )
    integer_digits: bool = field(
        default=False,
        metadata={"help": "Series tokenizers: write integers digit by digit instead of as BPE tokens."},
    )
    tutorial_vocabulary: bool = field(
        default=False,
        metadata={
            "help": "Series tokenizers: the fixed character-level vocabulary of Judge & Prosper's tutorial "
            "instead of a trained BPE (the data is still read, for the length report and the round-trip "
            "check)."
        },
    )

    def __post_init__(self):
        super().__post_init__()
        if self.integer_digits and self.tutorial_vocabulary:
            raise UsageError(
                "`integer_digits` is for BPE vocabularies; the tutorial's has single digits already."
            )


@register_task
class SeriesTask(Task):
    name = "series"
    source_column = "expression"
    target_column = "series"
    options = SeriesOptions
    # A series is several times longer than its expression, so source length + 50 would cut it.
    output_length_from_config = True
    lossless_tokenizer = True
    input_label = "expression (series to O(x**6))"
    input_hint = "an expression such as sin(a*x)"
    demo_examples = ("sin(a*x)", "exp(2*b*x)*cos(a*x)", "tan(a*x) + cosh(b*x)", "sinh(2*b*x)/cos(a*x)")
    expands_with_cas = True
    row_formats = ROW_FORMATS
    # Seconds per pair for parsing and comparing: sympy can run for minutes on one pair; a pair over the limit
    # counts as not equivalent, and in `timeouts`.
    equivalence_timeout = 5.0

    @property
    def data_made_by(self) -> str:
        return "python scripts/generate_series.py --output_dir <folder>"

    def check_input(self, text):
        check_model_input(text)

    def held_out_data(self, raw, options):
        return held_out_expressions(raw) if options.symbol_renamings else set()

    def add_training_data(self, raw, held_out, options):
        if options.symbol_renamings and "train" in raw:
            raw["train"] = add_symbol_renamings(raw["train"], options.symbol_renamings, held_out)
        return raw

    def refuses_streaming(self, options):
        if options.symbol_renamings:
            return "--symbol_renamings rewrites a training split held whole: drop it, or --streaming."
        return None

    def task_scores(self, predictions, references):
        """Beside exact match: `symbolic_match` (equal once simplified, within `equivalence_timeout`),
        `parse_rate` (the prediction parses as a series of the grammar), `term_match` (the reference's terms,
        whatever their coefficients), each with its binomial standard error; `n` and `timeouts`. A reference
        that does not parse raises a ValueError naming its index."""
        from .equivalence import EquivalenceChecker  # sympy: imported when scored, not when listed

        n = len(predictions)
        parsed = equivalent = same_terms = timeouts = 0
        with EquivalenceChecker(timeout=self.equivalence_timeout) as checker:
            for index, (prediction, reference) in enumerate(zip(predictions, references, strict=True)):
                try:
                    result = checker.check(prediction, reference)
                except ValueError as err:
                    raise ValueError(f"references[{index}]: {err}") from err
                parsed += result.parsed
                equivalent += result.equivalent
                same_terms += result.same_terms
                timeouts += result.timed_out
        scores = {"n": n}
        counts = {"symbolic_match": equivalent, "parse_rate": parsed, "term_match": same_terms}
        for name, count in counts.items():
            scores[name] = count / n
            scores[f"{name}_stderr"] = binomial_standard_error(count / n, n)
        return {**scores, "timeouts": timeouts}

    def report_details(self, sources, predictions, references, train_sources, options):
        seen = train_sources() if train_sources is not None else None
        return {}, series_breakdowns(sources, predictions, references, seen)

    def train_tokenizer(self, corpus, vocab_size, options, **settings):
        from .tokenizer import train_series_tokenizer, tutorial_series_tokenizer

        if options.tutorial_vocabulary:  # fixed, not learned: the corpus and the BPE options do not apply
            return tutorial_series_tokenizer(settings["model_max_length"], settings.get("output_dir"))
        return train_series_tokenizer(corpus, vocab_size, integer_digits=options.integer_digits, **settings)
