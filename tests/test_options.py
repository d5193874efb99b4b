"""An option's range and choices live on its dataclass field (`options.Options`): a dataclass built by library
code refuses a bad value as the command line does, and `--help` shows the range. Each kind of range, and that
the configuration checks its fields with the same validators: tests/test_validation.py."""

from dataclasses import dataclass, field

import pytest

from hf_vanilla_transformer.cli import make_parser, parse_dataclasses
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.options import Options, check_value


@dataclass
class Settings(Options):
    beams: int = field(default=4, metadata={"help": "Beam width.", "range": ">= 1"})
    share: float | None = field(default=None, metadata={"help": "A share.", "range": "(0, 1]"})
    sizes: list[int] = field(default_factory=lambda: [8], metadata={"help": "Sizes.", "range": ">= 1"})
    layer: int = field(default=-1, metadata={"help": "Any layer.", "range": "any"})
    order: str = field(default="length", metadata={"help": "Order.", "choices": ["length", "source"]})


@dataclass
class MoreSettings(Settings):
    extra: int = field(default=0, metadata={"help": "Checked after the ranges.", "range": ">= 0"})

    def __post_init__(self):
        super().__post_init__()
        self.checked_after = True


def test_a_dataclass_built_by_library_code_refuses_a_bad_value_in_one_line():
    assert Settings(beams=1, share=1.0, sizes=[1, 2], layer=-7).beams == 1
    assert Settings(share=None).share is None  # an option left unset passes
    with pytest.raises(UsageError, match=r"^--beams must be at least 1, got 0\.$"):
        Settings(beams=0)
    with pytest.raises(UsageError, match=r"^--share must be in \(0, 1\], got 0\.$"):
        Settings(share=0)
    with pytest.raises(UsageError, match=r"^--sizes must be at least 1, got 0\.$"):  # each value of a list
        Settings(sizes=[4, 0])
    with pytest.raises(UsageError, match=r"^--order must be one of length, source, got 'random'\.$"):
        Settings(order="random")
    assert MoreSettings().checked_after  # a subclass's own __post_init__ runs after the checks
    with pytest.raises(UsageError, match=r"^--extra must be at least 0, got -1\.$"):
        MoreSettings(extra=-1)
    with pytest.raises(UsageError, match=r"^--beams must be at least 1"):
        MoreSettings(beams=0)


def test_check_value_takes_a_fields_metadata():
    check_value("beams", 1, {"range": ">= 1"})
    check_value("flag", True, {"range": ">= 1"})  # a flag is no number
    with pytest.raises(UsageError, match=r"^--beams must be at least 1, got 0\.$"):
        check_value("beams", 0, {"range": ">= 1"})


def test_the_parser_shows_the_range_in_help_and_refuses_a_value_outside_it():
    parser = make_parser(Settings, args=[])
    text = " ".join(parser.format_help().split())
    assert "Beam width. (at least 1)" in text and "A share. (in (0, 1])" in text
    assert "Any layer. (default: -1)" in text  # "any" is no range to show
    (settings,) = parse_dataclasses(parser, ["--beams", "2", "--sizes", "3", "4"])
    assert (settings.beams, settings.sizes) == (2, [3, 4])
    with pytest.raises(UsageError, match=r"^--beams must be at least 1, got 0\.$"):
        parse_dataclasses(parser, ["--beams", "0"])
