"""Where a command writes: never over what it did not make. A folder option never names a user's file, and a
location that holds something is replaced only when the user asked (`--overwrite`). The library's writers
and the scripts both check here."""

from __future__ import annotations

from pathlib import Path

from .errors import ExistingPathError


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
