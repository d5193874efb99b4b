"""Lengths in tokens, one rule: the options that bound a training pair's sides and what becomes of a longer
pair (`LengthArguments`, which training's data arguments and prepare_translation.py's both extend), and the
one check of a length against every limit that bounds it (`check_length`), which refuses in the same words a
pair's side past a tokenizer's `model_max_length` or a model's positions and a decoding length past the
positions. The limits a length meets are given by what sets each (`{"the model's max_position_embeddings":
1024, ...}`), so that a refusal names the limit that bites and how to raise it; `smallest_limit` is what
decoding cuts a source at.

    check_length("max_source_length", 300, {"the model's max_position_embeddings": 256})
    # UsageError: --max_source_length 300 is more than 256, the model's max_position_embeddings: give
    #   --max_source_length 256 or less.

Neither torch nor transformers is imported here: a command checks its options before it loads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import UsageError
from .options import Options

LONG_PAIRS = ("drop", "truncate")
# A pair's side holds a token and the </s> the tokenizer appends.
MIN_SIDE_LENGTH = 2


@dataclass(kw_only=True)
class LengthArguments(Options):
    """How long a training pair's sides may be, in tokens counting `</s>`, and what becomes of a longer pair.
    Keyword-only, so that arguments with required fields of their own extend it."""

    max_source_length: int = field(
        default=256,
        metadata={
            "help": "Tokens a training source may hold, its </s> counted; a longer pair is dropped or "
            "truncated (--long_pairs). A model trained with it records it, and decoding cuts a longer source "
            "to it.",
            "range": f">= {MIN_SIDE_LENGTH}",
        },
    )
    max_target_length: int = field(
        default=256,
        metadata={
            "help": "Tokens a training target may hold, its </s> counted; a longer pair is dropped or "
            "truncated (--long_pairs).",
            "range": f">= {MIN_SIDE_LENGTH}",
        },
    )
    long_pairs: str = field(
        default="drop",
        metadata={
            "help": "What becomes of a pair with a side longer than its limit: drop (counted) or truncate "
            "(each side cut to its limit, keeping its </s>; counted). Drop by default: a target cut short "
            "teaches the model to stop mid-sentence, and a source cut short to translate words it was not "
            "given.",
            "choices": list(LONG_PAIRS),
        },
    )


def smallest_limit(limits: Mapping[str, int | None]) -> tuple[str, int] | None:
    """The smallest of `limits` that is set ({what sets it: its number, or None where nothing does}), as
    (what sets it, the number); the first named of equal ones; None where none is set."""
    set_limits = [(limit, what) for what, limit in limits.items() if limit is not None]
    if not set_limits:
        return None
    limit, what = min(set_limits, key=lambda item: item[0])
    return what, limit


def check_length(
    option: str,
    value: int | None,
    limits: Mapping[str, int | None],
    fixes: Mapping[str, str] | None = None,
    minimum: int = 0,
) -> None:
    """Refuse the number of tokens `value` given for the option `option`: one that is no integer of at least
    `minimum` (`MIN_SIDE_LENGTH` for a pair's side), or more than the smallest of `limits` ({what sets it:
    its number, or None where nothing does}). The refusal names the option, its value, the limit and what
    sets it, and the fix: a smaller value or, where `fixes` gives one for that limit, a larger limit. None,
    an option left unset, passes."""
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        why = " (a token and </s>)" if minimum == MIN_SIDE_LENGTH else ""
        raise UsageError(f"--{option} must be an integer >= {minimum}{why}, got {value!r}.")
    smallest = smallest_limit(limits)
    if smallest is None or value <= smallest[1]:
        return
    what, limit = smallest
    fix = (fixes or {}).get(what)
    raise UsageError(
        f"--{option} {value} is more than {limit}, {what}: give --{option} {limit} or less"
        f"{f', or {fix}' if fix else ''}."
    )


__all__ = ["LONG_PAIRS", "LengthArguments", "check_length", "smallest_limit"]
