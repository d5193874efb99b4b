"""The rules a value must keep, each a validator: a callable that takes the value and raises `ValueError`
naming the rule and the value (`"must be at least 1, got 0."`). The model's configuration attaches them to its
fields (huggingface_hub's `validated_field`), and `options.Options` applies them to a command's options,
adding the option's name (`"--beams must be at least 1, got 0."`): a configuration field and an option refuse
a value by the same check, in the same words.

A number's rule is a range, written as an option's field states it and as `--help` shows it: `">= 1"`,
`"> 0"`, an interval such as `"[0, 1)"` (a bracket includes its end), or `"any"` for a number with no bound.

    number_in("[0, 1)")(1.5)   # ValueError: must be in [0, 1), got 1.5.
    one_of("xavier", "fairseq")("kaiming")   # ValueError: must be one of xavier, fairseq, got 'kaiming'.

Only the standard library is imported here: this file travels with `configuration_vanilla_transformer.py` in
every saved model folder (`trust_remote_code`), and a command checks its options before it imports torch.
"""

import functools
import re
from collections.abc import Callable
from numbers import Real
from typing import Any

Validator = Callable[[Any], None]


def is_number(value: Any) -> bool:
    """Whether `value` is a real number; a bool (a flag) is none."""
    return isinstance(value, Real) and not isinstance(value, bool)


def in_range(value: Any, spec: str) -> bool:
    """Whether the number `value` lies in the range `spec` (see the module docstring)."""
    if spec == "any":
        return True
    if spec.startswith((">=", ">")):
        bound = float(spec.split()[-1])
        return value >= bound if spec.startswith(">=") else value > bound
    low, high = (float(part) for part in spec[1:-1].split(","))
    return (low <= value if spec[0] == "[" else low < value) and (
        value <= high if spec[-1] == "]" else value < high
    )


def describe_range(spec: str) -> str:
    """`">= 1"` -> `"at least 1"`, `"[0, 1)"` -> `"in [0, 1)"`: as an error or a help text says it."""
    if spec[0] in "[(":
        return f"in {spec}"
    return spec.replace(">=", "at least").replace(">", "more than")


def _shown(value: Any) -> str:
    # A number as the user typed it (numpy's repr would add its type); anything else quoted, so that "0.1"
    # the string does not read as 0.1 the number.
    return str(value) if is_number(value) else repr(value)


@functools.cache
def number_in(spec: str) -> Validator:
    """A validator of a real number (no bool) in the range `spec`. One per spec, so that a configuration field
    and an option with the same range hold the same validator."""

    def check(value: Any) -> None:
        if not is_number(value) or not in_range(value, spec):
            raise ValueError(f"must be {describe_range(spec)}, got {_shown(value)}.")

    return check


@functools.cache
def integer_in(spec: str) -> Validator:
    """A validator of an int (no bool, no float) in the range `spec`, such as a layer count."""
    rule = "a positive integer" if spec == ">= 1" else f"an integer {describe_range(spec)}"

    def check(value: Any) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or not in_range(value, spec):
            raise ValueError(f"must be {rule}, got {_shown(value)}.")

    return check


@functools.cache
def one_of(*choices: Any) -> Validator:
    """A validator of a value among `choices`."""

    def check(value: Any) -> None:
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(map(str, choices))}, got {value!r}.")

    return check


@functools.cache
def optional(validator: Validator) -> Validator:
    """`validator`, with None (a value left unset) let through."""

    def check(value: Any) -> None:
        if value is not None:
            validator(value)

    return check


def check_task_name(value: Any) -> None:
    """A task's name, as a registry records it: no list of tasks here, so that a model of a task of its user's
    own loads wherever this file goes."""
    if value is not None and not (isinstance(value, str) and re.fullmatch(r"[a-z][a-z0-9_]*", value)):
        raise ValueError(f"must be None or a task name (lower-case letters, digits, _), got {value!r}.")


def check_languages(value: Any) -> None:
    """A translation model's `langs`: None, or two different language codes, source then target."""
    if value is None:
        return
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(code, str) and code for code in value)
        or value[0] == value[1]
    ):
        raise ValueError(
            f"must be None or two different language codes, source then target (e.g. ['de', 'en']), got "
            f"{value!r}."
        )
