"""The task registry: a task is one class, registered by name, that holds everything that differs between the
things a model here is trained for. Code outside a task's own module asks the registry for the task object and
never names a task (tests/test_layout.py).

A task joins the registry in one of three ways:
- it is a package of this one's `tasks/` (`tasks/translation/`, `tasks/series/`): a built-in task, found when
  the registry is first asked, by the package's name alone;
- a package declares it as an entry point of the group `hf_vanilla_transformer.tasks` (`name =
  "module:Class"` in its pyproject.toml); it is found when first asked for;
- a Python file defines it with `@register_task` and is named where a task is (`--task path/to/file.py`),
  and is imported then (fairseq's `--user-dir`, for a task that lives in one file).

Both may name one task (a package's file named by its path): it is the task registered first. A task file is
its author's code: an exception raised in it is told in one line at its line in the file (`task_file_error`).
A task's options are its own (the command line parses only the chosen task's), and each numeric one carries
a range, checked as they are built (`options.Options`); a task without is refused as it registers.

A saved model records its task's name (`config.task`). Where that task is not installed, the model is still a
plain text-to-text model: the pipeline, translate.py and the demo take it (`find_task` gives None).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import os
import pkgutil
import re
import sys
import traceback
import typing
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import MissingPathError, UsageError, UserError
from ..options import RANGE, Options
from ..readers import iter_text_lines

if TYPE_CHECKING:
    from .base import Task

ENTRY_POINT_GROUP = "hf_vanilla_transformer.tasks"
# What a config's `task` may hold: a name a command line, a file name and a Hub card can all carry.
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]*")

_TASKS: dict[str, Task] = {}
_FILES: dict[Path, Task] = {}  # task files imported, by resolved path
_BROKEN: dict[str, Exception] = {}  # entry points that failed to load, raised when their task is asked for
_entry_points_read = False
_registering: list[str] | None = None  # the names a task file being imported registers


def register_task(cls: type[Task]) -> type[Task]:
    """Class decorator: add the task to the registry under `cls.name`. A class of the same name, qualified
    name and source file as a task registered already is that task (an installed package's file imported by
    its path): the first stays. A copy of it in another file is another task of the same name, refused."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise UsageError(
            f"Task class {cls.__qualname__} has name {name!r}: give it a `name` of lower-case letters, "
            "digits and underscores, starting with a letter."
        )
    known = _TASKS.get(name)
    if known is not None and (
        type(known).__qualname__ != cls.__qualname__ or _source_of(type(known)) != _source_of(cls)
    ):
        raise UsageError(
            f"Two tasks are named {name!r}: {type(known).__module__}.{type(known).__qualname__} and "
            f"{cls.__module__}.{cls.__qualname__}; rename one."
        )
    if known is None:
        check_task_hooks(cls)
        check_task_options(cls)
        _TASKS[name] = cls()
    if _registering is not None:
        _registering.append(name)
    return cls


def _takes_numbers(hint) -> bool:
    """Whether an option's annotation takes numbers (`int`, `float | None`, `list[int]`); a flag does not."""
    if isinstance(hint, str):  # an annotation `get_type_hints` could not resolve: read as written
        return bool(re.search(r"\b(int|float)\b", hint))
    return hint in (int, float) or any(_takes_numbers(arg) for arg in typing.get_args(hint))


def check_task_hooks(cls: type[Task]) -> None:
    """Refuse, as it registers, a task written for the scoring hooks before 1.0.0 (`load_metric`, and a
    `metric` parameter of `score` or `report_details`): called the way hooks are called now, it would be
    ignored or fail only once a run's first validation or an evaluation's decoding is done."""
    scoring = [name for name in ("score", "report_details") if name in cls.__dict__]
    old = [name for name in scoring if "metric" in inspect.signature(cls.__dict__[name]).parameters]
    if "load_metric" in cls.__dict__:
        old.insert(0, "load_metric")
    if old:
        raise UsageError(
            f"Task {cls.__qualname__} defines {', '.join(old)} as tasks did before hf-vanilla-transformer "
            "1.0.0: compute its own scores in `task_scores(self, predictions, references)`, without a "
            "metric object (Task.score adds exact match; docs/tasks.md)."
        )


def check_task_options(cls: type[Task]) -> None:
    """Refuse a task whose options would take any value: a numeric option without a range (`--train_size -3`
    would make empty data), or ranges on a dataclass that does not check them (`options.Options`)."""
    options = getattr(cls, "options", None)
    if options is None:
        return
    where = f"task {cls.name!r} ({defined_in(cls)})"
    if not dataclasses.is_dataclass(options):
        raise UsageError(
            f"The options of {where} are {options!r}: make them a @dataclass of options.Options."
        )
    try:
        hints = typing.get_type_hints(options)
    except Exception:  # an annotation naming what the module does not define: read them as written
        hints = {}
    fields = [field for field in dataclasses.fields(options) if field.init]
    for field in fields:
        if RANGE not in field.metadata and _takes_numbers(hints.get(field.name, str(field.type))):
            raise UsageError(
                f"Option --{field.name} of {where} takes a number but has no range: give its field one, "
                f'`field(..., metadata={{..., "range": ">= 0"}})` ("any" for a number without bounds).'
            )
    if not issubclass(options, Options) and any(
        RANGE in f.metadata or "choices" in f.metadata for f in fields
    ):
        raise UsageError(
            f"The options of {where}, {options.__qualname__}, have ranges but nothing checks them: subclass "
            "hf_vanilla_transformer.options.Options."
        )


def _shown(path: str | Path) -> str:
    """A file's path as a message names it: from the working directory when it is below it."""
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def defined_in(cls: type) -> str:
    """Where a task class is defined, as a message names it: its file, else its module."""
    file = getattr(sys.modules.get(cls.__module__), "__file__", None)
    return _shown(file) if file else cls.__module__


def _source_of(cls: type) -> Path | None:
    """The file that defines `cls`, resolved (None where none can be found)."""
    try:
        return Path(inspect.getsourcefile(cls)).resolve()
    except (TypeError, OSError):
        return None


def _read_entry_points() -> None:
    global _entry_points_read
    if _entry_points_read:
        return
    _entry_points_read = True
    for package in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if package.ispkg:  # a built-in task: its class registers itself as its package is imported
            try:
                importlib.import_module(f"{__package__}.{package.name}")
                if package.name not in _TASKS:
                    raise UsageError(
                        f"hf_vanilla_transformer/tasks/{package.name}/ registers no task named "
                        f"{package.name!r}: a built-in task's package is named as its task."
                    )
            except Exception as error:
                _BROKEN[package.name] = error
    for point in entry_points(group=ENTRY_POINT_GROUP):
        # A task that cannot load breaks no other: its error is raised when it is asked for.
        try:
            cls = point.load()  # a decorated class registered itself as its module was imported
            if getattr(cls, "name", None) != point.name:
                raise UsageError(
                    f"Entry point {point.name!r} of group {ENTRY_POINT_GROUP} loads {point.value}, whose "
                    f"task is named {getattr(cls, 'name', None)!r}: the entry point's name and the task's "
                    "must be one."
                )
            register_task(cls)
        except Exception as error:
            _BROKEN[point.name] = error


def registered_tasks() -> dict[str, Task]:
    """Every task known to this process, by name: the installed packages' and the files imported so far."""
    _read_entry_points()
    return dict(_TASKS)


def load_task_file(path: str | Path) -> Task:
    """Import a Python file that defines one task with `@register_task`, and return that task (the one
    registered already, for the file of an installed task). An exception the file raises is refused in one
    line at its line in the file (`task_file_error`); the registry is left as it was."""
    global _registering
    path = Path(path)
    resolved = path.resolve()
    if resolved in _FILES:
        return _FILES[resolved]
    if not path.is_file():
        raise MissingPathError(
            f"No task file at {path}: give a .py file that defines a task with @register_task."
        )
    _read_entry_points()
    before, outer = dict(_TASKS), _registering
    module_name = "hf_vanilla_transformer_task_" + re.sub(r"\W", "_", resolved.stem)
    spec = importlib.util.spec_from_file_location(module_name, resolved)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look a class's module up by name
    _registering = registered = []
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        sys.modules.pop(module_name, None)
        _TASKS.clear()
        _TASKS.update(before)
        if isinstance(error, UsageError):  # the registry's refusal of the task: it names the fix
            raise
        # An error no line of the file can be blamed for (bytes that are no Python source: a compressed file)
        # still names the file.
        shown = task_file_error(error, {str(resolved): str(path)})
        raise shown or UsageError(f"{path}: {type(error).__name__}: {error}") from error
    finally:
        _registering = outer
    names = list(dict.fromkeys(registered))
    if len(names) != 1:
        raise UsageError(
            f"{path} registered {len(names)} tasks ({', '.join(names) or 'none'}): a task file defines "
            "exactly one class decorated with @register_task."
        )
    _FILES[resolved] = _TASKS[names[0]]
    return _FILES[resolved]


def task_file_error(error: BaseException, files: dict[str, str] | None = None) -> UsageError | None:
    """An exception raised by the code of a task file, as its author is told it: one line, `file:line: Type:
    message`, at the innermost frame in the file (a syntax error at its own line); None for an exception that
    no task file raised. `files` maps resolved paths to how they are shown (default: the files imported)."""
    if files is None:
        files = {str(resolved): _shown(resolved) for resolved in _FILES}
    if isinstance(error, SyntaxError) and error.filename in files:
        return UsageError(f"{files[error.filename]}:{error.lineno}: {type(error).__name__}: {error.msg}")
    stack = traceback.extract_tb(error.__traceback__)
    in_file = [index for index, frame in enumerate(stack) if frame.filename in files]
    if not in_file:
        return None
    # Raised in this package's code that the task file called (its `super().load_raw()`, say): maybe a bug
    # of the package's, which keeps its traceback. Raised in the file, or in a library it called: the file's.
    package = str(Path(__file__).resolve().parents[1])
    if any(frame.filename.startswith(package) for frame in stack[in_file[-1] + 1 :]):
        return None
    last = stack[in_file[-1]]
    what = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return UsageError(f"{files[last.filename]}:{last.lineno}: {what}")


def get_task(name: str) -> Task:
    """The task of a name, or of a task file (`path/to/file.py`); a `UsageError` listing the tasks there
    are."""
    if name.endswith(".py"):
        return load_task_file(name)
    task = registered_tasks().get(name)
    if task is None and name in _BROKEN:
        raise _BROKEN[name]
    if task is None:
        raise UsageError(
            f"Unknown task {name!r}; installed: {', '.join(sorted(_TASKS))}. A task of your own: pass the "
            "file that defines it (--task path/to/task.py) or install its package (docs/tasks.md)."
        )
    return task


def find_task(name: str | None) -> Task | None:
    """The task a model names (its config's `task`), None where that task is not installed. A model that
    names none (saved before configs recorded it, or imported) is the task that claims such models."""
    tasks = registered_tasks()
    if name is None:
        return next((task for task in tasks.values() if task.claims_unnamed_models), None)
    return tasks.get(name)


def task_or_plain(name: str | None) -> Task:
    """`find_task`, or, for a model of a task not installed here, a plain text-to-text task of its name:
    inputs taken as they are and split into sentences, as the pipeline a folder carries takes them."""
    task = find_task(name)
    if task is None:
        from .base import Task

        task = Task()
        task.name, task.splits_into_sentences = name or "text", True
    return task


def installed_task_of(name: str | None, model: str) -> Task:
    """The task a model at `model` names, or an error saying how to install it: evaluating or training needs
    the task's data and metric code."""
    task = find_task(name)
    if task is None:
        raise UsageError(
            f"{model} was trained for task {name!r}, which is not installed here: pass the file that defines "
            "it (--task path/to/task.py) or install its package (docs/tasks.md)."
        )
    return task


def task_named_in(argv: Sequence[str]) -> str | None:
    """The task a command line names: its last `--task x` or `--task=x`, else a leading recipe's `task: x`
    (the recipe is read again by the parser)."""
    named = None
    for index, item in enumerate(argv):
        if item == "--task" and index + 1 < len(argv):
            named = argv[index + 1]
        elif item.startswith("--task="):
            named = item.split("=", 1)[1]
    if named is None and argv and argv[0].endswith((".yaml", ".yml", ".json")) and Path(argv[0]).is_file():
        import yaml

        try:
            recipe = yaml.safe_load("\n".join(iter_text_lines(argv[0], "recipe file")))
        except (yaml.YAMLError, UserError):
            recipe = None  # the parser reports it
        task = recipe.get("task") if isinstance(recipe, dict) else None
        named = task if isinstance(task, str) else None
    return named or None


def option_types() -> dict[str, type]:
    """The options dataclass of every task known here that has options, by task name."""
    return {name: task.options for name, task in registered_tasks().items() if task.options is not None}


def option_owners(name: str) -> list[str]:
    """The tasks that have an option `name`."""
    types = option_types().items()
    return sorted(task for task, options in types if name in {f.name for f in dataclasses.fields(options)})


def other_task_option_error(name: str, task: str) -> UsageError:
    """The refusal of `--name`, an option of other tasks than `task`: in one wording, whatever the command."""
    owners = option_owners(name)
    tasks = f"the {' and '.join(owners)} task{'s' if len(owners) > 1 else ''}"
    return UsageError(f"`{name}` applies to {tasks} only; drop it for task {task!r}.")


def input_rules(name: str | None) -> tuple:
    """`pipeline_seq2seq.INPUT_RULES`: a model's task's input check and whether its texts are split into
    sentences; a task not installed here takes a plain text, split."""
    task = find_task(name)
    return (task.check_input, task.splits_into_sentences) if task is not None else (None, True)
