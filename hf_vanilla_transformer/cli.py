"""The command line, the package's top layer (only scripts import it): every script's parser, recipe files
read into it (`parse_recipe_and_args`), unknown options answered with the closest real one, each option's
range shown in `--help` (its field's metadata, checked as the dataclass is built: `options.Options`), the
options of every task added where a script takes --task, and a user's mistake (a missing
folder, a bad split, a configuration that cannot work, corrupt weights, empty data) ended with its message
and exit status 2 instead of a traceback, and an output that is one of the command's inputs or holds one
refused (`outputs.check_output_options`). Ctrl-C ends a script in one line with exit status 130.

A user error is a type, never a guess: the package's `errors.UserError` family, a model configuration's
refusal of a value (the errors of `@strict` dataclasses, which name the field and the value), and a model
folder's unreadable weights (`UnreadableWeightsError` of the model file, which cannot import the package).
While the options are parsed, a `ValueError` is the refusal of a value given (the Trainer checks its own
arguments so) and becomes one. Anything else, a `ValueError` from a bug included, is a bug or something
unforeseen, and keeps its traceback. `HF_VANILLA_TRANSFORMER_DEBUG=1` shows the traceback of user errors too.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import yaml
from huggingface_hub.errors import StrictDataclassClassValidationError, StrictDataclassFieldValidationError

from .errors import MissingPathError, UsageError, UserError
from .options import RANGE, describe_range
from .outputs import check_output_options

# A configuration's refusal of a field's value, or of how its values combine.
CONFIG_ERRORS = (StrictDataclassFieldValidationError, StrictDataclassClassValidationError)

DEBUG_VARIABLE = "HF_VANILLA_TRANSFORMER_DEBUG"
# Every script spells one thing one way. transformers' example scripts (run_translation.py) spell these
# options otherwise, and users coming from them are answered with this package's name.
EXAMPLE_SCRIPT_SPELLINGS = {
    "model_name_or_path": "model",
    "dataset_name": "dataset",
    "dataset_config_name": "dataset_config",
    "overwrite_output_dir": "overwrite",
    "preprocessing_num_workers": "num_proc",
}
# Options this package no longer has, answered with what replaced them.
REMOVED_OPTIONS = {
    "paper_learning_rate": "removed: eq. 3 sets the learning rate unless --learning_rate is given",
}


def own_fields(dataclass_type) -> list[dataclasses.Field]:
    """The options of an arguments dataclass that this package defines, not the Trainer's own."""
    fields = []
    for field in dataclasses.fields(dataclass_type):
        owner = next(
            cls for cls in dataclass_type.__mro__ if field.name in vars(cls).get("__annotations__", {})
        )
        if field.init and not owner.__module__.startswith(("transformers", "accelerate")):
            fields.append(field)
    return fields


def is_user_error(error: BaseException) -> bool:
    """Whether `error` is one of the package's messages to the user (see the module docstring)."""
    # The model file is looked up, not imported: a torch-free script (CTranslate2 inference) never loads it,
    # and then none of its errors can occur.
    model_file = sys.modules.get(f"{__package__}.modeling_vanilla_transformer")
    model_errors = (model_file.UnreadableWeightsError,) if model_file else ()
    return isinstance(error, (UserError, *CONFIG_ERRORS, *model_errors))


# 128 + SIGINT: what a shell reports for a command that Ctrl-C ended.
INTERRUPTED_STATUS = 130


# A shell's status for a command ended by SIGPIPE (128 + 13).
BROKEN_PIPE_STATUS = 141


def run_script(main: Callable[[], object]) -> None:
    """Run a script's `main`, turning a user error into `error: <message>` on stderr and exit status 2, and
    Ctrl-C into one line and exit status 130, a closed standard output (`| head`) into none and status 141; a
    `SystemExit` (a script's own status) passes as it is."""
    try:
        main()
    except KeyboardInterrupt:
        if os.environ.get(DEBUG_VARIABLE):
            raise
        print("interrupted (Ctrl-C)", file=sys.stderr)
        raise SystemExit(INTERRUPTED_STATUS) from None
    except BrokenPipeError:
        # The reader of standard output left (`... | head`): end quietly, as a shell command does. Python
        # would report the same error again while flushing standard output at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(BROKEN_PIPE_STATUS) from None
    except Exception as error:
        if os.environ.get(DEBUG_VARIABLE) or not is_user_error(error):
            raise
        # One line: a configuration's refusal puts its cause on a second, indented line.
        print("error: " + " ".join(line.strip() for line in str(error).splitlines()), file=sys.stderr)
        raise SystemExit(2) from None


def option_suggestion(name: str, options: Iterable[str], quote: str = "{}") -> str:
    """`" (here called X)"` for the spelling of transformers' example scripts, `" (did you mean X?)"` for a
    near miss, or
    nothing; X is the option's name in `quote` (`"--{}"` on a command line, `"'{}'"` in a recipe)."""
    options = list(options)
    if name in REMOVED_OPTIONS:
        return f" ({REMOVED_OPTIONS[name]})"
    if EXAMPLE_SCRIPT_SPELLINGS.get(name) in options:
        return f" (here called {quote.format(EXAMPLE_SCRIPT_SPELLINGS[name])})"
    close = difflib.get_close_matches(name, options, n=1)
    return f" (did you mean {quote.format(close[0])}?)" if close else ""


def unknown_options_message(unknown: Iterable[str], options: Iterable[str]) -> str:
    """`Unknown option --max_stepz (did you mean --max_steps?)`, for the `--name` items of `unknown`."""
    options = sorted(options)
    hints = []
    for item in unknown:
        if not item.startswith("--"):
            continue
        name = item[2:].split("=", 1)[0]
        hints.append(f"--{name}{option_suggestion(name, options, quote='--{}')}")
    stray = [item for item in unknown if not item.startswith("--")]
    if not hints:
        return f"Unexpected argument(s): {' '.join(stray)}. `--help` lists what the script takes."
    return f"Unknown option(s): {', '.join(hints)}. `--help` lists the options."


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """`--help` shows the script's docstring as written (its example commands) and each option's default."""


def make_parser(
    *dataclass_types, description: str | None = None, usage: str | None = None, args: list[str] | None = None
):
    """Every script's parser: its options are the fields of `dataclass_types`, read by transformers'
    `HfArgumentParser` (the Trainer's own arguments are such dataclasses); `--help` starts with `description`,
    the script's docstring. A dataclass that names a task (`tasks.TaskChoice`) brings the options of every
    task, those of a task file named in `args` (the command line) included; the parse hands them to it."""
    from transformers import HfArgumentParser

    class Parser(HfArgumentParser):
        def add_argument(self, *names, **kwargs):
            spec = kwargs.pop(RANGE, None)  # a field's range is no argparse setting: `--help` shows it
            if spec not in (None, "any"):
                kwargs["help"] = f"{kwargs.get('help', '')} ({describe_range(spec)})".strip()
            return super().add_argument(*names, **kwargs)

    args = sys.argv[1:] if args is None else list(args)
    attached = []
    for dtype in dataclass_types:
        for extra in getattr(dtype, "attached_option_types", lambda argv: [])(args):
            if extra not in attached:
                attached.append(extra)
    taken = {}
    for dtype in [*dataclass_types, *attached]:
        for field in dataclasses.fields(dtype):
            if field.init and taken.setdefault(field.name, dtype) is not dtype:
                raise UsageError(
                    f"Option --{field.name} of {dtype.__qualname__} is also one of "
                    f"{taken[field.name].__qualname__}: rename it in the task's options."
                )
    # No abbreviations: a typo that happens to be a prefix (--num_beam) would silently set another option.
    parser = Parser(
        [*dataclass_types, *attached],
        description=description,
        usage=usage,
        formatter_class=HelpFormatter,
        allow_abbrev=False,
    )
    parser.attached_types = attached
    return parser


def parse_arguments(*dataclass_types, description: str | None = None, args: list[str] | None = None) -> tuple:
    """`make_parser(*dataclass_types)` applied to the command line (or `args`), an unknown option answered by
    the closest real one. Returns one instance of each dataclass."""
    return parse_dataclasses(make_parser(*dataclass_types, description=description, args=args), args)


def parse_dataclasses(parser, args: list[str] | None = None) -> tuple:
    """`HfArgumentParser.parse_args_into_dataclasses`, with an unknown option answered by the closest real
    one (as a `ValueError`, a user error) instead of transformers' traceback. Unknown options are looked for
    first, so that a misspelt required option is not reported as missing."""
    args = sys.argv[1:] if args is None else list(args)
    known = [option for action in parser._actions for option in action.option_strings]
    unknown = [item for item in args if item.startswith("--") and item.split("=", 1)[0] not in known]
    if not unknown:
        try:
            *parsed, unknown = parser.parse_args_into_dataclasses(
                args=args, look_for_args_file=False, return_remaining_strings=True
            )
        except ValueError as error:
            if is_user_error(error):
                raise
            # Raised while the arguments' dataclasses are built from the values given (the Trainer's own
            # checks among them): a refusal of those values, in one line.
            raise UsageError(" ".join(str(error).split())) from error
    if unknown:
        names = [option[2:] for option in known if option.startswith("--")]
        raise UsageError(unknown_options_message(unknown, names))
    check_output_options({name: value for instance in parsed for name, value in vars(instance).items()})
    attached = getattr(parser, "attached_types", [])
    if attached:  # the task options made for the dataclasses that asked for them
        parsed, options = parsed[: -len(attached)], parsed[-len(attached) :]
        for instance in parsed:
            if hasattr(instance, "attach_options"):
                instance.attach_options(options)
    return tuple(parsed)


RECIPE_SUFFIXES = (".yaml", ".yml", ".json")


def parse_recipe_and_args(parser, args: Sequence[str] | None = None) -> tuple:
    """Parse `[recipe file] [--option value ...]` into the parser's dataclasses: the recipe's values replace
    the defaults, and options on the command line replace the recipe's.

    A recipe is a YAML (or JSON) mapping of option names to values, the keys that
    `HfArgumentParser.parse_yaml_file` reads; `config_overrides` may be a nested mapping. Its values become
    the parser's defaults, so they go through the same conversions as command-line values (`1e-9` in YAML is
    a string; it still becomes a float). A key that is no option, or a missing file, raises an error naming
    the key or the path.
    """
    args = list(sys.argv[1:] if args is None else args)
    if args and not args[0].startswith("-") and args[0].endswith(RECIPE_SUFFIXES):
        parser.set_defaults(**load_recipe(args.pop(0), parser))
    return parse_dataclasses(parser, args)


def load_recipe(path: str | Path, parser) -> dict:
    """Read a recipe file into a dict, checking that each key is an option of `parser`'s dataclasses."""
    path = Path(path)
    if not path.is_file():
        raise MissingPathError(f"No recipe file at {path}: give the path of a .yaml (or .json) recipe.")
    text = path.read_text(encoding="utf-8")
    try:
        recipe = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise UsageError(f"Recipe {path} does not parse: {error}") from error
    if not isinstance(recipe, dict):
        raise UsageError(f"Recipe {path} must be a mapping of option names to values, got {recipe!r}.")
    options = {f.name for dtype in parser.dataclass_types for f in dataclasses.fields(dtype) if f.init}
    unknown = sorted(set(recipe) - options)
    if unknown:
        hints = [repr(key) + option_suggestion(key, options, quote="'{}'") for key in unknown]
        raise UsageError(
            f"Recipe {path} sets {', '.join(hints)}: not an option of "
            f"{', '.join(dtype.__name__ for dtype in parser.dataclass_types)}. `--help` lists the options."
        )
    return recipe
