"""An option's range and choices live on its dataclass field (`options.Options`): each kind of range reads as
written, a dataclass built by library code refuses a bad value as the command line does, and `--help` shows
the range."""

from dataclasses import dataclass, field

import pytest

from hf_vanilla_transformer.cli import make_parser, parse_dataclasses
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.options import Options, check_value, describe_range, in_range


@pytest.mark.parametrize(
    ("spec", "inside", "outside"),
    [
        (">= 1", [1, 2, 10**9], [0, -1, 0.5]),
        (">= 0", [0, 0.0, 3], [-1, -1e-9]),
        ("> 0", [1e-9, 1, 2.5], [0, 0.0, -3]),
        ("[0, 1)", [0, 0.5, 0.999], [1, -0.1, 2]),
        ("(0, 1]", [1e-9, 0.5, 1], [0, 1.01]),
        ("(0, 1)", [0.5], [0, 1]),
        ("[0, 1]", [0, 1], [-0.01, 1.01]),
        ("[1, 65535]", [1, 8080, 65535], [0, 65536]),
        ("any", [-(10**9), -1, 0, 1e9], []),
    ],
)
def test_each_kind_of_range_holds_what_it_says(spec, inside, outside):
    assert all(in_range(value, spec) for value in inside), [v for v in inside if not in_range(v, spec)]
    assert not any(in_range(value, spec) for value in outside), [v for v in outside if in_range(v, spec)]


def test_a_range_reads_as_an_error_or_a_help_text_says_it():
    assert describe_range(">= 1") == "at least 1"
    assert describe_range("> 0") == "more than 0"
    assert describe_range("[0, 1)") == "in [0, 1)"


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
