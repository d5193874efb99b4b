"""Where a command writes: never over what it did not make. A folder option never names a user's file, a
location that holds something is replaced only when the user asked (`--overwrite`), and an output is never
one of the command's own inputs, `--overwrite` or not. The library's writers and the scripts both check
here."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

from .errors import ExistingPathError, UsageError

# The scripts' options that name what a command writes, and those that name what it reads (each is spelt one
# way in every script): as the options are parsed (`cli.parse_dataclasses`), an output that is an input or
# holds one is refused (`check_output_options`). tests/test_script_help.py fails on a script's option that
# may name a path and is in neither table nor among those it lists as left out, with why.
OUTPUT_OPTIONS = ("output_dir", "output_file", "output", "tokenized_output_dir", "folder")
# Not `resume_from_checkpoint`: it is the run itself, inside its --output_dir by design.
INPUT_OPTIONS = (
    "model",
    "tokenizer",
    "dataset",
    "run_dir",
    "text_files",
    "multi30k",
    "library_speed_of",
    "input",
    "compare",
    "recipe",
    "config_overrides",
    "held_out_from",
    "baseline",
    "other",
)


def check_not_a_file(path: str | Path, option: str = "--output_dir") -> None:
    """Refuse a folder option that names an existing file, `--overwrite` or not: the user asked to replace
    what a folder holds, not to turn a file of theirs into one (`mkdir` would answer with a traceback)."""
    if Path(path).is_file():
        raise ExistingPathError(f"{option} {path} is a file: give a folder (a new one, or one to replace).")


def check_output_location(path: str | Path, overwrite: bool, option: str = "--output_dir") -> None:
    """Refuse to write to `path` when it holds something already (a file, or a folder that is not empty),
    unless the user passed `--overwrite`: a command replaces only what it was asked to. A folder option
    (any but `--..._file`) never replaces a file: `check_not_a_file`."""
    if not option.endswith("_file"):
        check_not_a_file(path, option)
    path = Path(path)
    if overwrite or not path.exists() or (path.is_dir() and not any(path.iterdir())):
        return
    held = "is not empty" if path.is_dir() else "exists"
    raise ExistingPathError(f"{path} {held}: pass --overwrite to replace what it holds, or another {option}.")


def local_paths(value) -> list[Path]:
    """The existing local paths that an option's value names (a list option may name several); a Hub id, or
    anything else that is not on disk, names none."""
    values = value if isinstance(value, list | tuple) else [value]
    return [
        Path(item) for item in values if isinstance(item, str | Path) and str(item) and exists_on_disk(item)
    ]


def exists_on_disk(value: str | Path) -> bool:
    """`Path.exists`, False for a value no file can be named by (inline JSON longer than a file name may be,
    which the system refuses to look up)."""
    try:
        return Path(value).exists()
    except OSError:
        return False


def check_not_an_input(
    output: str | Path, inputs: Mapping[str, object], option: str = "--output_dir"
) -> None:
    """Refuse to write to `output` when it is one of `inputs` (option name -> value) or holds one, symlinks
    resolved, `--overwrite` or not: replacing it would delete what the command reads. An output inside an
    input folder (`--run_dir R --output_dir R/averaged`) is fine."""
    target = Path(output).resolve()
    for name, value in inputs.items():
        for path in local_paths(value):
            places = {path.resolve()}
            if path.is_symlink():  # replacing the folder that the link sits in deletes the link too
                places.add(path.absolute().parent.resolve() / path.name)
            if target in places:
                raise UsageError(
                    f"{option} {output} is the --{name} being read: writing there would replace it; give "
                    f"another {option}."
                )
            if any(target in place.parents for place in places):
                raise UsageError(
                    f"{option} {output} holds the --{name} being read ({path}): writing there would replace "
                    f"it; give another {option}."
                )


def check_writable(path: str | Path, option: str = "--output_dir") -> None:
    """Refuse an output that cannot be made: a path under a file (`out.txt/run`), or under a folder this
    process cannot write into. Checked before any work, so that minutes of it are not lost to a `mkdir` at
    the end. Writability is tried, not read off the permission bits (which do not bind root): an unnamed
    temporary file, made and dropped in the nearest folder that exists, leaves nothing behind."""
    path = Path(path)
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing != path and not existing.is_dir():
        raise UsageError(
            f"{option} {path} lies under {existing}, which is a file: give a path under a folder."
        )
    folder = existing if existing.is_dir() else existing.parent
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as error:
        raise UsageError(
            f"{option} {path} cannot be written ({folder}: {error.strerror}): give a place you can write to."
        ) from error


def check_output_options(options: Mapping[str, object]) -> None:
    """For each of a command's `OUTPUT_OPTIONS`, given its options as a mapping of names to values: it can be
    written (`check_writable`) and it is none of its `INPUT_OPTIONS` (`check_not_an_input`)."""
    inputs = {name: options[name] for name in INPUT_OPTIONS if options.get(name) is not None}
    for name in OUTPUT_OPTIONS:
        if isinstance(options.get(name), str | Path) and str(options[name]):
            check_writable(options[name], f"--{name}")
            check_not_an_input(options[name], inputs, f"--{name}")
