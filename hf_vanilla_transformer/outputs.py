"""Where and how a command writes: never over what it did not make, and whole or visibly unfinished.

Where: a folder option never names a user's file, a location that holds something is replaced only when the
user asked (`--overwrite`), an output is never one of the command's own inputs, `--overwrite` or not, and an
output that is a link to nothing is refused. The library's writers and the scripts both check here.

How: every output of every command is written through `staged`, the one write helper. It holds the output's
lock (`locks.hold`: a second command writing it is refused), writes into a sibling `<output>.unfinished`
(a folder carries `UNFINISHED_MARK`, naming the command), and publishes it by a rename once it is whole and
flushed to the disk. A command stopped half way (`stopping.Stopped`, an error) removes what it staged; one
killed outright leaves `<output>.unfinished`, which every command refuses as an input
(`check_finished`), naming the command that makes it, and which that command, run again, replaces.
Checkpoints are the exception: several processes, on several machines, write into one, so they are written
in place and carry a record that they are complete (`training.checkpoints`); `translate.py`'s output grows
line by line beside a record of how far it got, so that a rerun continues it (`decoding.translating`).
Folders from elsewhere (the Hub, Marian, a shipped model) carry no marks and are read as they are.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from pathlib import Path

from . import locks, stopping
from .errors import ExistingPathError, UsageError, UserError

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


def check_not_dangling(path: str | Path, option: str = "--output_dir") -> None:
    """Refuse an output that is a symbolic link to nothing: replacing the link would lose where it points,
    and writing through it would make a path the user never named."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise UsageError(
            f"{option} {path} is a link to {os.readlink(path)}, which does not exist: make what it points "
            f"to, or give another {option}."
        )


def check_output_options(options: Mapping[str, object]) -> None:
    """For each of a command's `OUTPUT_OPTIONS`, given its options as a mapping of names to values: it is no
    link to nothing (`check_not_dangling`), it can be written (`check_writable`), it is none of its
    `INPUT_OPTIONS` (`check_not_an_input`), and no other command is writing it (its lock is taken here and
    held until the command ends: `locks.hold`). Each input must be finished (`check_finished`)."""
    inputs = {name: options[name] for name in INPUT_OPTIONS if options.get(name) is not None}
    for name, value in inputs.items():
        check_finished(value, f"--{name}")
    outputs = [
        name for name in OUTPUT_OPTIONS if isinstance(options.get(name), str | Path) and str(options[name])
    ]
    outputs = [name for name in outputs if str(options[name]) != "-"]  # standard output
    for name in outputs:
        check_not_dangling(options[name], f"--{name}")
        check_writable(options[name], f"--{name}")
        check_not_an_input(options[name], inputs, f"--{name}")
    for name in outputs:
        locks.hold(options[name])


# Staged writing.

UNFINISHED_SUFFIX = ".unfinished"
# In a staging folder, from its first moment to the rename: who writes it. A folder that holds it is no
# command's output yet, under whatever name it is found.
UNFINISHED_MARK = ".unfinished.json"


class UnfinishedOutputError(UserError):
    """An input is an output that its command never finished."""


# What this command has published, what it is writing now, and what it writes in place and keeps when it stops
# (`growing`): what a stop keeps and loses (`stop_summary`).
_PUBLISHED: list[Path] = []
_WRITING: list[Path] = []
_GROWING: dict[Path, str] = {}


def write_hook(point: str, output: Path) -> None:
    """Called by `staged` as it starts writing `output` (`point` "begin") and before it publishes it ("end"):
    where the fault matrix sends a signal to every write of every command (tests/test_fault_matrix.py)."""


@contextlib.contextmanager
def staged(output: str | Path, option: str = "--output_dir", folder: bool = True) -> Iterator[Path]:
    """Write `output` (a folder, or a file with `folder=False`) whole or not at all: yields the staging path
    to write into, `<output>.unfinished`, and publishes it as `output` by a rename once the body is done,
    its files flushed to the disk, replacing what `output` held (the caller checked that it may:
    `check_output_location`). Holds the output's lock meanwhile (`locks.holding`; a command holds it until
    it ends). A body that raises, or a signal (`stopping.Stopped`), removes the staging and leaves `output`
    as it was. A folder's staging carries `UNFINISHED_MARK` until the rename."""
    output = Path(os.path.abspath(output))
    check_not_dangling(output, option)
    with locks.holding(output):
        yield from _staged(output, folder)


def _staged(output: Path, folder: bool) -> Iterator[Path]:
    staging = output.with_name(output.name + UNFINISHED_SUFFIX)
    _remove(staging)  # left by a command killed outright: the lock says that no one writes it now
    staging.parent.mkdir(parents=True, exist_ok=True)
    if folder:
        staging.mkdir()
        mark_unfinished(staging)
    _WRITING.append(output)
    try:
        write_hook("begin", output)
        stopping.check()
        yield staging
        write_hook("end", output)
        stopping.check()  # a stop swallowed while the body ran: what it wrote is not published
        _publish(staging, output, folder)
    except BaseException:
        _remove(staging)
        raise
    finally:
        _WRITING.remove(output)
    _PUBLISHED.append(output)


def mark_unfinished(staging: Path) -> None:
    """Write `UNFINISHED_MARK` into a staging folder: again where a library wrote the folder anew."""
    holder = asdict(locks.Holder.this_process())
    (staging / UNFINISHED_MARK).write_text(json.dumps(holder) + "\n", encoding="utf-8")


def write_text(output: str | Path, text: str, option: str = "--output_file") -> Path:
    """`text` into the file `output`, whole or not at all (`staged`)."""
    with staged(output, option, folder=False) as staging:
        staging.write_text(text, encoding="utf-8")
    return Path(output)


def write_json(output: str | Path, value, option: str = "--output_file", **dump_options) -> Path:
    """`value` as JSON (indented by 2, non-ASCII kept, unless `dump_options` say otherwise) into `output`,
    whole or not at all."""
    options = {"indent": 2, "ensure_ascii": False, **dump_options}
    return write_text(output, json.dumps(value, **options) + "\n", option)


def _publish(staging: Path, output: Path, folder: bool) -> None:
    if folder:
        (staging / UNFINISHED_MARK).unlink(missing_ok=True)
        for path in sorted(staging.rglob("*")):
            if path.is_file() and not path.is_symlink():
                fsync(path)
    else:
        fsync(staging)
    if output.is_dir() and not output.is_symlink():
        shutil.rmtree(output)
    elif output.exists() or output.is_symlink():
        output.unlink()
    os.replace(staging, output)
    fsync(output.parent)


def fsync(path: Path) -> None:
    """Flush a file or a folder to the disk: a machine lost after a rename (or a checkpoint's record) must not
    find a published output whose bytes were only in its page cache."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink(missing_ok=True)


def growing(output: str | Path, kept: str) -> None:
    """Say that `output` is written in place, by a writer of its own that a rerun continues (`translate.py`),
    and what a stop keeps of it (`kept`), until `grown`."""
    _GROWING[Path(output)] = kept


def grown(output: str | Path) -> None:
    _GROWING.pop(Path(output), None)


def stop_summary() -> str:
    """What a stopped command kept and lost, and how to go on, for its one last line: `kept out/data, whole
    (run again, the command replaces it with --overwrite); out/data-tokenized was not finished and is not
    kept`."""
    parts = []
    if _PUBLISHED:
        kept = ", ".join(str(path) for path in _PUBLISHED)
        parts.append(f"kept {kept}, whole (run again, the command replaces it with --overwrite)")
    if _WRITING:
        parts.append(", ".join(str(path) for path in _WRITING) + " was not finished and is not kept")
    parts.extend(f"{path} is {kept}" for path, kept in _GROWING.items())
    return "; ".join(parts) if parts else "nothing written: run the command again"


def forget_written() -> None:
    """Start a new command's account of what it wrote (an in-process caller running several)."""
    _PUBLISHED.clear()
    _WRITING.clear()
    _GROWING.clear()


def check_finished(value, option: str = "--model") -> None:
    """Refuse an input that is an output its command never finished: a folder that carries
    `UNFINISHED_MARK`, a path named `<output>.unfinished`, or a missing path beside which its staging lies.
    The line names the command that was writing it and how to finish it."""
    values = value if isinstance(value, list | tuple) else [value]
    for item in values:
        if not isinstance(item, str | Path) or not str(item):
            continue
        path = Path(item).expanduser()
        try:
            staging = path if path.name.endswith(UNFINISHED_SUFFIX) else None
            if staging is None and path.is_dir() and (path / UNFINISHED_MARK).is_file():
                staging = path
            if staging is None and not path.exists():
                sibling = path.with_name(path.name + UNFINISHED_SUFFIX) if path.name else None
                staging = sibling if sibling is not None and sibling.exists() else None
        except OSError:  # a value no file can be named by (inline JSON)
            continue
        if staging is None:
            continue
        output = staging.with_name(staging.name.removesuffix(UNFINISHED_SUFFIX))
        writer = locks.read_holder(locks.lock_path(output))
        if writer is not None and locks.stale_because(locks.lock_path(output), writer) is None:
            raise UnfinishedOutputError(
                f"{option} {item} is being written by {writer.describe()}: wait for it to finish."
            )
        holder = None
        if (staging / UNFINISHED_MARK).is_file():
            holder = locks.read_holder(staging / UNFINISHED_MARK)
        who = holder.describe() if holder is not None else "the command that writes it"
        again = f"run `{holder.command}` again" if holder is not None else "run that command again"
        raise UnfinishedOutputError(
            f"{option} {item} is unfinished: {who} was stopped while writing {staging.name}. To make it "
            f"whole, {again} (it replaces what was left)."
        )
