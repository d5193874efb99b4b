"""Every option's rules live on its dataclass field, beside its help, as transformers' example scripts keep
them (`field(metadata={"help": ...})`): `"range"` for a number, `"choices"` for a word. `Options` checks them
whenever the dataclass is built, by a script's parser or by library code, so a value that cannot work is
refused in one line naming the option instead of failing deep in the code.

    @dataclass
    class Settings(Options):
        beams: int = field(default=4, metadata={"help": "Beam width.", "range": ">= 1"})

A range is `">= 1"`, `"> 0"`, an interval such as `"[0, 1)"` (a bracket includes its end), or `"any"` for a
number with no bound (the test of every script's options asks each number to say which). Ranges and choices
are checked by the validators the model's configuration checks its fields with (`validation`), so an option
and a configuration field refuse a value in the same words.
"""

from __future__ import annotations

import dataclasses

from .errors import UsageError
from .validation import is_number, number_in, one_of

RANGE = "range"


def check_value(name: str, value, metadata) -> None:
    """Refuse `value` of the option `name` outside the range or the choices its field's `metadata` gives (a
    list option: each of its values); None, an option left unset, passes, and so does a value that is no
    number (a flag) where a range is given."""
    if isinstance(value, list | tuple):
        for item in value:
            check_value(name, item, metadata)
        return
    spec, choices = metadata.get(RANGE), metadata.get("choices")
    if value is None:
        return
    try:
        if choices is not None:
            one_of(*choices)(value)
        if spec is not None and is_number(value):
            number_in(spec)(value)
    except ValueError as error:
        raise UsageError(f"--{name} {error}") from None


def check_options(instance) -> None:
    """Check every field of a dataclass instance against its metadata (`check_value`)."""
    for field in dataclasses.fields(instance):
        if field.init and (RANGE in field.metadata or "choices" in field.metadata):
            check_value(field.name, getattr(instance, field.name), field.metadata)


class Options:
    """A dataclass whose fields' ranges and choices are checked as it is built. A subclass with a
    `__post_init__` of its own calls `super().__post_init__()` first."""

    def __post_init__(self):
        check_options(self)
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:  # a library dataclass further up (the Trainer's arguments) checks its own
            parent()


__all__ = ["Options"]
