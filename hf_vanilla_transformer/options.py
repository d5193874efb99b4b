"""Every option's rules live on its dataclass field, beside its help, as transformers' example scripts keep
them (`field(metadata={"help": ...})`): `"range"` for a number, `"choices"` for a word. `Options` checks them
whenever the dataclass is built, by a script's parser or by library code, so a value that cannot work is
refused in one line naming the option instead of failing deep in the code.

    @dataclass
    class Settings(Options):
        beams: int = field(default=4, metadata={"help": "Beam width.", "range": ">= 1"})

A range is `">= 1"`, `"> 0"`, an interval such as `"[0, 1)"` (a bracket includes its end), or `"any"` for a
number with no bound (the test of every script's options asks each number to say which).
"""

from __future__ import annotations

import dataclasses

from .errors import UsageError

RANGE = "range"


def in_range(value, spec: str) -> bool:
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


def check_value(name: str, value, metadata) -> None:
    """Refuse `value` of the option `name` outside the range or the choices its field's `metadata` gives (a
    list option: each of its values); None, an option left unset, passes."""
    if isinstance(value, list | tuple):
        for item in value:
            check_value(name, item, metadata)
        return
    spec, choices = metadata.get(RANGE), metadata.get("choices")
    if value is None:
        return
    if choices is not None and value not in choices:
        raise UsageError(f"--{name} must be one of {', '.join(map(str, choices))}, got {value!r}.")
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    if spec is not None and numeric and not in_range(value, spec):
        raise UsageError(f"--{name} must be {describe_range(spec)}, got {value}.")


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
