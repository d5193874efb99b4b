"""The task registry: a task is one class, registered by name, that holds everything that differs between the
things a model here is trained for. Code outside a task's own module asks the registry for the task object and
never names a task (tests/test_layout.py).

A task joins the registry in one of two ways:
- a package declares it as an entry point of the group `hf_vanilla_transformer.tasks` (`name =
  "module:Class"` in its pyproject.toml), as this package declares its own two; it is found when first
  asked for;
- a Python file defines it with `@register_task` and is named where a task is (`--task path/to/file.py`),
  and is imported then (fairseq's `--user-dir`, for a task that lives in one file).

A saved model records its task's name (`config.task`). Where that task is not installed, the model is still a
plain text-to-text model: the pipeline, translate.py and the demo take it (`find_task` gives None).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import MissingPathError, UsageError

if TYPE_CHECKING:
    from .base import Task

ENTRY_POINT_GROUP = "hf_vanilla_transformer.tasks"
# What a config's `task` may hold: a name a command line, a file name and a Hub card can all carry.
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]*")

_TASKS: dict[str, Task] = {}
_FILES: dict[Path, Task] = {}  # task files imported, by resolved path
_entry_points_read = False


def register_task(cls: type[Task]) -> type[Task]:
    """Class decorator: add the task to the registry under `cls.name`."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise UsageError(
            f"Task class {cls.__qualname__} has name {name!r}: give it a `name` of lower-case letters, "
            "digits and underscores, starting with a letter."
        )
    known = _TASKS.get(name)
    if known is not None and type(known).__qualname__ != cls.__qualname__:
        raise UsageError(
            f"Two tasks are named {name!r}: {type(known).__module__}.{type(known).__qualname__} and "
            f"{cls.__module__}.{cls.__qualname__}; rename one."
        )
    _TASKS[name] = cls()
    return cls


def _read_entry_points() -> None:
    global _entry_points_read
    if _entry_points_read:
        return
    _entry_points_read = True
    for point in entry_points(group=ENTRY_POINT_GROUP):
        cls = point.load()  # a decorated class registered itself as its module was imported
        if point.name not in _TASKS:
            register_task(cls)
        if _TASKS[point.name].__class__ is not cls:
            raise UsageError(
                f"Entry point {point.name!r} of group {ENTRY_POINT_GROUP} loads {point.value}, whose task is "
                f"named {getattr(cls, 'name', None)!r}: the entry point's name and the task's must be one."
            )


def registered_tasks() -> dict[str, Task]:
    """Every task known to this process, by name: the installed packages' and the files imported so far."""
    _read_entry_points()
    return dict(_TASKS)


def load_task_file(path: str | Path) -> Task:
    """Import a Python file that defines one task with `@register_task`, and return that task."""
    path = Path(path)
    resolved = path.resolve()
    if resolved in _FILES:
        return _FILES[resolved]
    if not path.is_file():
        raise MissingPathError(
            f"No task file at {path}: give a .py file that defines a task with @register_task."
        )
    _read_entry_points()
    before = set(_TASKS)
    module_name = "hf_vanilla_transformer_task_" + re.sub(r"\W", "_", resolved.stem)
    spec = importlib.util.spec_from_file_location(module_name, resolved)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look a class's module up by name
    spec.loader.exec_module(module)
    added = sorted(set(_TASKS) - before)
    if len(added) != 1:
        raise UsageError(
            f"{path} registered {len(added)} tasks ({', '.join(added) or 'none'}): a task file defines "
            "exactly one class decorated with @register_task."
        )
    _FILES[resolved] = _TASKS[added[0]]
    return _FILES[resolved]


def get_task(name: str) -> Task:
    """The task of a name, or of a task file (`path/to/file.py`); a `UsageError` listing the tasks there
    are."""
    if name.endswith(".py"):
        return load_task_file(name)
    task = registered_tasks().get(name)
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


def task_files_in(argv: list[str]) -> list[str]:
    """The task files a command line names: `--task x.py`, `--task=x.py`, or a leading recipe's `task: x.py`
    (the recipe is read again by the parser)."""
    files = []
    for index, item in enumerate(argv):
        value = None
        if item == "--task" and index + 1 < len(argv):
            value = argv[index + 1]
        elif item.startswith("--task="):
            value = item.split("=", 1)[1]
        if value and value.endswith(".py"):
            files.append(value)
    if argv and argv[0].endswith((".yaml", ".yml", ".json")) and Path(argv[0]).is_file():
        import yaml

        try:
            recipe = yaml.safe_load(Path(argv[0]).read_text(encoding="utf-8"))
        except yaml.YAMLError:
            recipe = None  # the parser reports it
        task = recipe.get("task") if isinstance(recipe, dict) else None
        if isinstance(task, str) and task.endswith(".py"):
            files.append(task)
    return files


def input_rules(name: str | None) -> tuple:
    """`pipeline_seq2seq.INPUT_RULES`: a model's task's input check and whether its texts are split into
    sentences; a task not installed here takes a plain text, split."""
    task = find_task(name)
    return (task.check_input, task.splits_into_sentences) if task is not None else (None, True)
