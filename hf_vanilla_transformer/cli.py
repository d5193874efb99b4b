"""The command line, the package's top layer (only scripts import it): every script's parser, recipe files
read into it (`parse_recipe_and_args`), unknown options answered with the closest real one, each option's
range shown in `--help` (its field's metadata, checked as the dataclass is built: `options.Options`), the
chosen task's options parsed apart where a script takes --task (`parse_task_options`), and a user's mistake (a
missing folder, a bad split, a configuration that cannot work, corrupt weights, empty data) ended with its
message and exit status 2 instead of a traceback, and an output that is one of the command's inputs or holds
one refused (`outputs.check_output_options`). Ctrl-C and SIGTERM end a script in one line with exit status
130 or 143 (`stopping`).

A user error is a type, never a guess: the package's `errors.UserError` family, a model configuration's
refusal of a value (the errors of `@strict` dataclasses, which name the field and the value), and a model
folder's unreadable weights (`UnreadableWeightsError` of the model file, which cannot import the package).
While the options are parsed, a `ValueError` is the refusal of a value given (the Trainer checks its own
arguments so) and becomes one. An exception raised in a task file (`--task path/to/file.py`) is its author's
to fix, told at its line in the file (`tasks.registry.task_file_error`). Anything else, a `ValueError` from a
bug included, is a bug or something unforeseen, and keeps its traceback. `HF_VANILLA_TRANSFORMER_DEBUG=1`
shows the traceback of user errors too.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import errno
import importlib.machinery
import importlib.util
import json
import os
import stat
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import yaml

from . import stopping
from .errors import MissingPathError, UsageError, UserError
from .locks import command_started, release_all
from .options import RANGE
from .outputs import check_output_options, forget_written, stop_summary
from .readers import iter_text_lines
from .validation import describe_range

# What argparse's `add_argument` takes from a field's metadata.
ARGPARSE_SETTINGS = frozenset(
    {"action", "choices", "const", "default", "dest", "help", "metavar", "nargs", "required", "type"}
)
# A configuration's refusal of a field's value, or of how its values combine (`config_errors`).
CONFIG_ERROR_NAMES = ("StrictDataclassFieldValidationError", "StrictDataclassClassValidationError")

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
    # The errors of a configuration and of the model file are looked up, not imported: a script that never
    # made a configuration (`--help`, CTranslate2 inference) imported neither, and then neither can occur.
    model_file = sys.modules.get(f"{__package__}.modeling_vanilla_transformer")
    model_errors = (model_file.UnreadableWeightsError,) if model_file else ()
    return isinstance(error, (UserError, *config_errors(), *model_errors))


def config_errors() -> tuple[type[Exception], ...]:
    """The errors of `@strict` dataclasses (a model configuration's refusal of a value), where
    huggingface_hub has defined them: none before it is imported, as nothing can have raised one."""
    errors = sys.modules.get("huggingface_hub.errors")
    return tuple(getattr(errors, name) for name in CONFIG_ERROR_NAMES) if errors is not None else ()


def __getattr__(name: str):
    if name == "CONFIG_ERRORS":  # the errors themselves, for code that catches them: imported when asked for
        import huggingface_hub.errors  # noqa: F401

        return config_errors()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def task_code_error(error: BaseException) -> UserError | None:
    """An exception raised in the code of a task file, as one line at its line in the file; None for any
    other. The registry is looked up, not imported: a script that never read a task imported no task file."""
    registry = sys.modules.get(f"{__package__}.tasks.registry")
    return registry.task_file_error(error) if registry is not None else None


# A shell's status for a command ended by SIGPIPE (128 + 13).
BROKEN_PIPE_STATUS = 141
# A write refused for want of room: no space left on the device, or the user's disk quota used up.
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def full_output_error(error: BaseException) -> UsageError | None:
    """The one line for a standard output that takes no more bytes (`> /dev/full`, a file on a full disk):
    `error` a write refused for want of room (`FULL_ERRNOS`, no file named) while standard output is found
    full; None for any other error. Standard output is then pointed at /dev/null, so that Python's flush at
    exit does not fail again."""
    if not isinstance(error, OSError) or error.errno not in FULL_ERRNOS or error.filename is not None:
        return None
    if not _standard_output_full():
        return None  # another file's write: not standard output's to report
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return UsageError(
        f"standard output could not be written: {os.strerror(error.errno).lower()}. Free space where it "
        "goes, or send it elsewhere."
    )


def _standard_output_full() -> bool:
    """Whether standard output refuses a write for want of room: a device that refuses even no bytes
    (/dev/full), or a file on a file system with less than a MiB left."""
    if sys.stdout is None:
        return False
    try:
        descriptor = sys.stdout.fileno()
        if stat.S_ISREG(os.fstat(descriptor).st_mode):
            usage = os.fstatvfs(descriptor)
            return usage.f_bavail * usage.f_frsize < 2**20
        os.write(descriptor, b"")
    except (OSError, ValueError) as error:  # no descriptor (a test's StringIO), or a closed one
        return getattr(error, "errno", None) in FULL_ERRNOS
    return False


def run_script(main: Callable[[], object]) -> None:
    """Run a script's `main`, turning a user error into `error: <message>` on stderr and exit status 2, a
    closed standard output (`| head`) into none and status 141; a `SystemExit` (a script's own status)
    passes as it is. Ctrl-C and SIGTERM end every command one way (`stopping`): its workers ended, what it
    was writing left unfinished and not kept, one line saying what was kept and how to go on, and status
    130 or 143. The locks of its outputs (`locks`) are released however it ends. A script that `accelerate
    launch` started ends as a launch's process must (`leave_process_group`). A full standard output (a full
    disk, /dev/full), found when written or flushed at the end, is a user error too (`full_output_error`)."""
    previous = stopping.install()
    forget_written()
    command_started()
    try:
        main()
        stopping.check()  # a stop that a library swallowed ("Exception ignored in ...") ends here
        if sys.stdout is not None:  # None when started with standard output closed (`>&-`)
            sys.stdout.flush()  # here, where a full one is reported: Python's own flush at exit is past these
    except (KeyboardInterrupt, stopping.Stopped) as error:
        _end_stopped(stopping.as_stopped(error), error)
    except BrokenPipeError:
        # The reader of standard output left (`... | head`): end quietly, as a shell command does. Python
        # would report the same error again while flushing standard output at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(BROKEN_PIPE_STATUS) from None
    except Exception as error:
        stop = stopping.stop_behind(error)
        if stop is not None:  # a library's clean-up that failed while the stop unwound it (datasets' pool)
            _end_stopped(stop, error)
        reported = error if is_user_error(error) else task_code_error(error) or full_output_error(error)
        if os.environ.get(DEBUG_VARIABLE) or reported is None:
            raise
        # One line: a configuration's refusal puts its cause on a second, indented line.
        print("error: " + " ".join(line.strip() for line in str(reported).splitlines()), file=sys.stderr)
        raise SystemExit(2) from None
    finally:
        release_all()
        stopping.restore(previous)
    leave_process_group()


def _end_stopped(stop: stopping.Stopped, raised: BaseException) -> None:
    """A command's end on Ctrl-C or SIGTERM: its workers ended, one line, status 130 or 143 (with the debug
    variable, what was `raised`, with its traceback)."""
    stopping.ended()
    stopping.end_workers()
    if os.environ.get(DEBUG_VARIABLE):
        raise raised
    print(f"Stopped by {stop.name}; {stop_summary()}.", file=sys.stderr)
    raise SystemExit(stop.status) from None


def leave_process_group() -> None:
    """End a script's process as a launch's process must, once its work is done: the processes' group it
    joined destroyed while the interpreter is whole, and, one of several, ended by `leave_launched_process`,
    without the interpreter's finalization, in which gloo's threads can abort a finished process (SIGABRT,
    "terminate called without an active exception"; docs/training.md, "Several processes"). A training
    script ends so itself (`training.end_process`); this is every other script's end. Only on success:
    after an error the launcher stops the other processes."""
    distributed = sys.modules.get("torch.distributed")  # a script that never imported it joined no group
    if distributed is None or not distributed.is_available() or not distributed.is_initialized():
        return
    several = distributed.get_world_size() > 1
    distributed.destroy_process_group()
    if several:
        from .training.exits import leave_launched_process

        leave_launched_process(0)


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


def _or_none(convert: type) -> Callable[[str], object]:
    """`convert`, or None for the word `none`: `--max_train_minutes none` takes back a recipe's value of an
    option whose default is unset."""

    def parse(text: str):
        return None if text.strip().lower() == "none" else convert(text)

    parse.__name__ = convert.__name__  # argparse names the type in its message: "invalid float value"
    return parse


ARGUMENT_PARSER_MODULE = "transformers.hf_argparser"


def argument_parser_class() -> type:
    """transformers' `HfArgumentParser`, every script's parser. Where transformers is not imported yet, its
    module is loaded alone, under its own name, so that a command answers `--help` and refuses a mistyped
    option without the half second that `import transformers` takes (it reads the import structure of every
    model). The module imports only the standard library and yaml (a relative import would import the package
    first, as usual); transformers, imported later, finds it in `sys.modules`: one class either way."""
    if "transformers" not in sys.modules and ARGUMENT_PARSER_MODULE not in sys.modules:
        package = importlib.util.find_spec("transformers")  # found, not imported
        spec = importlib.machinery.PathFinder.find_spec(
            ARGUMENT_PARSER_MODULE, package.submodule_search_locations
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[ARGUMENT_PARSER_MODULE] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[ARGUMENT_PARSER_MODULE]
            raise
    if "transformers" not in sys.modules:
        return sys.modules[ARGUMENT_PARSER_MODULE].HfArgumentParser
    from transformers import HfArgumentParser

    return HfArgumentParser


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """`--help` shows the script's docstring as written (its example commands) and each option's default."""


def make_parser(
    *dataclass_types, description: str | None = None, usage: str | None = None, args: list[str] | None = None
):
    """Every script's parser: its options are the fields of `dataclass_types`, read by transformers'
    `HfArgumentParser` (the Trainer's own arguments are such dataclasses); `--help` starts with `description`,
    the script's docstring. A dataclass that names a task (`tasks.TaskChoice`) takes the chosen task's options
    too, parsed apart (`parse_dataclasses`): `--help` lists each task's under its name, or the chosen task's
    alone when `args` (the command line) names one, and a task option spelt like one of the script's is
    refused."""
    HfArgumentParser = argument_parser_class()

    class Parser(HfArgumentParser):
        def add_argument(self, *names, **kwargs):
            spec = kwargs.pop(RANGE, None)  # a field's range is no argparse setting: `--help` shows it
            # Nor are the rest of a field's own metadata (a decoding option's name in each backend:
            # `decoding.settings`), which the code that reads the field uses.
            kwargs = {key: value for key, value in kwargs.items() if key in ARGPARSE_SETTINGS}
            if spec not in (None, "any"):
                kwargs["help"] = f"{kwargs.get('help', '')} ({describe_range(spec)})".strip()
            unset = "default" in kwargs and kwargs["default"] is None
            if unset and kwargs.get("type") in (int, float) and "nargs" not in kwargs:
                # An option a recipe may set and the command line must be able to unset again
                kwargs["type"] = _or_none(kwargs["type"])
            return super().add_argument(*names, **kwargs)

        def task_option_types(self, argv: Sequence[str] = ()) -> dict[str, type]:
            """The options dataclass of every task, by name (the task file `argv` names imported first), where
            the script takes a task; else none."""
            types = {}
            for dtype in self.dataclass_types:
                types.update(getattr(dtype, "task_option_types", lambda argv: {})(argv))
            return types

        def chosen_task(self, argv: Sequence[str]):
            """The task `argv` names, where the script takes one."""
            choosers = [dtype for dtype in self.dataclass_types if hasattr(dtype, "chosen_task")]
            return choosers[0].chosen_task(argv) if choosers else None

        def format_help(self):
            types = self.task_option_types(self.argv)
            chosen = self.chosen_task(self.argv)
            if chosen is not None:
                types = {chosen.name: chosen.options} if chosen.options is not None else {}
            sections = [_task_options_help(name, dtype) for name, dtype in types.items()]
            return super().format_help() + "".join(sections)

    args = sys.argv[1:] if args is None else list(args)
    check_option_spellings(dataclass_types)
    # No abbreviations: a typo that happens to be a prefix (--num_beam) would silently set another option.
    parser = Parser(
        dataclass_types,
        description=description,
        usage=usage,
        formatter_class=HelpFormatter,
        allow_abbrev=False,
    )
    parser.argv = args
    parser.task_defaults = {}  # a recipe's values of task options (`parse_recipe_and_args`)
    chosen = parser.chosen_task(args)
    if chosen is not None and chosen.options is not None:
        check_option_spellings(dataclass_types, chosen.options)
    return parser


def check_option_spellings(dataclass_types: Sequence[type], task_options: type | None = None) -> None:
    """Refuse an option that two of a script's dataclasses define, or that a task's options (`task_options`)
    spell like one of the script's."""
    taken = {}
    for dtype in [*dataclass_types, *([task_options] if task_options is not None else [])]:
        for field in dataclasses.fields(dtype):
            if field.init and taken.setdefault(field.name, dtype) is not dtype:
                raise spelt_twice(field.name, dtype.__qualname__, taken[field.name].__qualname__)


def spelt_twice(name: str, owner: str, other: str) -> UsageError:
    """The refusal of an option `name` of the dataclass `owner` that `other` has too."""
    return UsageError(f"Option --{name} of {owner} is also one of {other}: rename it in the task's options.")


def _task_options_help(name: str, options_type: type) -> str:
    """`--help`'s section of a task's options."""
    parser = make_parser(options_type, args=[])
    # argparse's formatter, private but stable since Python 3.2: the one way to render a group of options in
    # the parser's own format (tests/test_script_help.py renders every script's help).
    formatter = parser._get_formatter()
    formatter.start_section(f"options of task {name} (with that task only)")
    formatter.add_arguments(
        [action for action in parser._actions if action.option_strings[1:2] != ["--help"]]
    )
    formatter.end_section()
    return "\n" + formatter.format_help()


def option_strings(parser) -> set[str]:
    """The `--name` strings a parser takes."""
    return {option for action in parser._actions for option in action.option_strings}


def parse_arguments(*dataclass_types, description: str | None = None, args: list[str] | None = None) -> tuple:
    """`make_parser(*dataclass_types)` applied to the command line (or `args`), an unknown option answered by
    the closest real one. Returns one instance of each dataclass."""
    return parse_dataclasses(make_parser(*dataclass_types, description=description, args=args), args)


def parse_dataclasses(parser, args: list[str] | None = None) -> tuple:
    """`HfArgumentParser.parse_args_into_dataclasses`, with an unknown option answered by the closest real
    one (as a `ValueError`, a user error) instead of transformers' traceback. Unknown options are looked for
    first, so that a misspelt required option is not reported as missing.

    Where the script takes a task (`tasks.TaskChoice`), the strings that are none of the script's options are
    kept for the chosen task's options (`parse_task_options`): parsed at once when the task is known (--task,
    a recipe's `task`), else as soon as it is (an evaluation's, from its model). A string that is an option of
    no task is refused at once."""
    args = sys.argv[1:] if args is None else list(args)
    task_types = parser.task_option_types(args) if hasattr(parser, "task_option_types") else {}
    known = option_strings(parser)
    for dtype in task_types.values():
        known |= option_strings(make_parser(dtype, args=[]))
    unknown = [item for item in args if item.startswith("--") and item.split("=", 1)[0] not in known]
    if not unknown:
        *parsed, remaining = _parse_into_dataclasses(parser, args)
        choosers = [instance for instance in parsed if hasattr(instance, "take_options_from")]
        # Left for the task: its options and their values; strings before the first option are no one's.
        first = next((i for i, item in enumerate(remaining) if item.startswith("--")), len(remaining))
        unknown = remaining[:first] if choosers else remaining
    if unknown:
        names = [option[2:] for option in known if option.startswith("--")]
        raise UsageError(unknown_options_message(unknown, names))
    values = {name: value for instance in parsed for name, value in vars(instance).items()}
    script_options = {
        field.name: dtype.__qualname__
        for dtype in parser.dataclass_types
        for field in dataclasses.fields(dtype)
    }
    make = TaskStrings(remaining, dict(getattr(parser, "task_defaults", {})), script_options)
    for instance in choosers:
        instance.take_options_from(make)  # the task's options made and checked here when the task is known
        if instance.task is not None and instance.options is not None:
            values.update(vars(instance.options))
    check_output_options(values)
    return tuple(parsed)


def _parse_into_dataclasses(parser, args: list[str]) -> list:
    """The parser's dataclasses and the strings left over; a value refused as they are built is a
    `UsageError`."""
    try:
        return parser.parse_args_into_dataclasses(
            args=args, look_for_args_file=False, return_remaining_strings=True
        )
    except ValueError as error:
        if is_user_error(error):
            raise
        # Raised while the arguments' dataclasses are built from the values given (the Trainer's own
        # checks among them): a refusal of those values, in one line.
        raise UsageError(" ".join(str(error).split())) from error


@dataclasses.dataclass
class TaskStrings:
    """What a command line gave the options of the task it chooses (`parse_task_options`), called with the
    task once it is known; equal for equal command lines, as the arguments that hold it are."""

    strings: list[str]
    defaults: dict
    script_options: dict[str, str]

    def __call__(self, task):
        return parse_task_options(task, self.strings, self.defaults, self.script_options)


def parse_task_options(task, strings: list[str], defaults: dict, script_options: dict[str, str]):
    """The options of `task` (a `Task`) from the command line's `strings` that are none of the script's, over
    a recipe's values of them (`defaults`): parsed with the task's options dataclass alone, so that two tasks
    may have options of the same name. An option of another task is refused in the words every command uses
    (`tasks.registry.other_task_option_error`), and so is a task option spelt like one of the script's
    (`script_options`: name -> the dataclass that has it). None for a task without options."""
    from .tasks.registry import option_owners, other_task_option_error

    parser = make_parser(task.options, args=[]) if task.options is not None else None
    own = option_strings(parser) if parser is not None else set()
    for name in script_options:
        if parser is not None and f"--{name}" in own:
            raise spelt_twice(name, task.options.__qualname__, script_options[name])
    given = [item.split("=", 1)[0][2:].replace("-", "_") for item in strings if item.startswith("--")]
    for name in [*given, *defaults]:
        if f"--{name}" not in own:
            if option_owners(name):
                raise other_task_option_error(name, task.name)
            raise UsageError(unknown_options_message([f"--{name}"], [option[2:] for option in own]))
    if parser is None:
        return None
    parser.set_defaults(**defaults)
    options, remaining = _parse_into_dataclasses(parser, strings)
    if remaining:
        raise UsageError(unknown_options_message(remaining, [option[2:] for option in own]))
    return options


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
        recipe = load_recipe(args.pop(0), parser)
        own = {field.name for dtype in parser.dataclass_types for field in dataclasses.fields(dtype)}
        parser.set_defaults(**{key: value for key, value in recipe.items() if key in own})
        # The rest are task options: the chosen task's options take them (`parse_task_options`).
        parser.task_defaults = {key: value for key, value in recipe.items() if key not in own}
    return parse_dataclasses(parser, args)


def read_recipe_file(path: str | Path) -> dict:
    """A recipe file's mapping of option names to values, read through the one text reader (a file missing,
    a folder, not UTF-8, compressed or cut short is named) and refused in one line if it is no mapping."""
    path = Path(path)
    if not path.exists():
        raise MissingPathError(f"No recipe file at {path}: give the path of a .yaml (or .json) recipe.")
    text = "\n".join(iter_text_lines(path, "recipe file"))
    try:
        recipe = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise UsageError(f"Recipe {path} does not parse: {' '.join(str(error).split())}") from error
    if not isinstance(recipe, dict):
        raise UsageError(f"Recipe {path} must be a mapping of option names to values, got {recipe!r}.")
    return recipe


def load_recipe(path: str | Path, parser) -> dict:
    """Read a recipe file into a dict (`read_recipe_file`), checking that each key is an option of `parser`'s
    dataclasses or of a task (the recipe's `task`, a file, imported first)."""
    recipe = read_recipe_file(path)
    options = {f.name for dtype in parser.dataclass_types for f in dataclasses.fields(dtype) if f.init}
    task = recipe.get("task")
    for dtype in parser.task_option_types(["--task", task] if isinstance(task, str) else []).values():
        options |= {f.name for f in dataclasses.fields(dtype) if f.init}
    unknown = sorted(set(recipe) - options)
    if unknown:
        hints = [repr(key) + option_suggestion(key, options, quote="'{}'") for key in unknown]
        raise UsageError(
            f"Recipe {path} sets {', '.join(hints)}: not an option of "
            f"{', '.join(dtype.__name__ for dtype in parser.dataclass_types)}. `--help` lists the options."
        )
    return recipe
