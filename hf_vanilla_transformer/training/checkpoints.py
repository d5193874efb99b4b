"""Checkpoints (and final folders) that are whole or absent to every reader, and the checkpoint a run
resumes from.

A checkpoint folder is written in place, by the Trainer (or Accelerate's `save_state`) and, under FSDP and
DeepSpeed, by every process; once all of them are done, the main process writes `checkpoint_complete.json`,
the size of every file the folder holds, after flushing them to the disk. A folder without that record, or
whose files no longer have the sizes it gives, is not a checkpoint: resuming, averaging and loading the best
model skip it and say so. A record rather than a temporary folder renamed when complete: several processes
(several nodes, on a shared filesystem or not) write into one checkpoint, and one small file written by one
process after a barrier needs no cross-process rename (docs/training.md, "Faults and resuming").
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import socket
from pathlib import Path

from ..errors import MissingPathError, UsageError
from ..outputs import fsync, staged

logger = logging.getLogger(__name__)

COMPLETE_NAME = "checkpoint_complete.json"
# What a save wrote last before checkpoints carried records (the Trainer's state; Accelerate's RNG states):
# a folder of an earlier version holding it is taken, unchecked, where such folders are taken at all.
LAST_WRITTEN = {"checkpoint": "trainer_state.json", "state": "random_states_0.pkl"}


def write_complete_record(folder: str | Path, step: int) -> Path:
    """Flush every file of `folder` to the disk and record their sizes in `checkpoint_complete.json`, written
    under a temporary name of this process's and renamed, so that the record itself is whole or absent. Call
    it on one process per folder, after every process has written its part."""
    folder = Path(folder)
    files = flush_folder(folder)
    record = folder / COMPLETE_NAME
    temporary = folder / f"{COMPLETE_NAME}.{socket.gethostname()}.{os.getpid()}.tmp"
    temporary.write_text(json.dumps({"step": step, "files": files}, indent=1) + "\n", encoding="utf-8")
    fsync(temporary)
    os.replace(temporary, record)
    fsync(folder)
    return record


def forget_complete_record(folder: str | Path) -> None:
    """Before saving again into a folder that may hold a record (a run resumed from an earlier step): the
    record goes first, so that a save cut short is not taken for whole (its files keep their sizes)."""
    record = Path(folder) / COMPLETE_NAME
    if record.exists():
        record.unlink(missing_ok=True)
        fsync(record.parent)


def flush_folder(folder: Path) -> dict[str, int]:
    """Flush every file of `folder` and its folders to the disk; the size of each file (but records)."""
    files = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.name.startswith(COMPLETE_NAME):
            fsync(path)
            files[path.relative_to(folder).as_posix()] = path.stat().st_size
    for directory in {folder, *(path for path in folder.rglob("*") if path.is_dir())}:
        fsync(directory)
    return files


def checkpoint_problem(folder: str | Path) -> str | None:
    """Why `folder` is not a whole checkpoint (its save never finished, a file is missing or has another size
    than when it was saved), or None when it is whole."""
    folder = Path(folder)
    record_path = folder / COMPLETE_NAME
    if not record_path.is_file():
        return f"its save did not finish (no {COMPLETE_NAME})"
    try:
        files = json.loads(record_path.read_text(encoding="utf-8"))["files"]
    except (ValueError, KeyError, TypeError):
        return f"its {COMPLETE_NAME} does not parse"
    for name, size in files.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        actual = path.stat().st_size
        if actual != size:
            return f"{name} is {actual} bytes, not the {size} it was saved with (truncated or grown)"
    return None


def numbered_folders(run_dir: str | Path, prefix: str = "checkpoint") -> list[Path]:
    """The `<prefix>-<step>` folders of a run, in step order."""
    found = [
        path for path in Path(run_dir).glob(f"{prefix}-*") if is_numbered(path, prefix) and path.is_dir()
    ]
    return sorted(found, key=step_of)


def is_numbered(folder: Path, prefix: str) -> bool:
    return re.fullmatch(rf"{re.escape(prefix)}-\d+", Path(folder).name) is not None


def step_of(folder: Path) -> int:
    return int(Path(folder).name.rsplit("-", 1)[1])


def taken_unchecked(folder: Path, prefix: str) -> bool:
    """Whether `folder`, which carries no record, is a checkpoint of an earlier version: it holds what a save
    wrote last, and comes before every checkpoint of its run that carries a record (a folder after one is a
    save of this version that did not finish)."""
    if (folder / COMPLETE_NAME).exists() or not (folder / LAST_WRITTEN[prefix]).is_file():
        return False
    recorded = [
        step_of(path) for path in numbered_folders(folder.parent, prefix) if (path / COMPLETE_NAME).exists()
    ]
    return not recorded or step_of(folder) < min(recorded)


def complete_checkpoints(
    run_dir: str | Path, prefix: str = "checkpoint", unrecorded: bool = False
) -> list[Path]:
    """The whole `<prefix>-<step>` folders of a run, in step order; each one skipped is named in one line.
    With `unrecorded`, the checkpoints of an earlier version (`taken_unchecked`) are taken too, which is
    said."""
    complete, unchecked = [], []
    for folder in numbered_folders(run_dir, prefix):
        problem = checkpoint_problem(folder)
        if problem is None:
            complete.append(folder)
        elif unrecorded and taken_unchecked(folder, prefix):
            complete.append(folder)
            unchecked.append(folder.name)
        else:
            logger.warning("Skipping %s: %s.", folder, problem)
    if unchecked:
        logger.warning(
            "%s carry no %s (saved by an earlier version): taken unchecked.",
            ", ".join(unchecked),
            COMPLETE_NAME,
        )
    return complete


def not_whole(run_dir: str | Path, prefix: str = "checkpoint") -> str:
    """The `<prefix>-<step>` folders of a run that are not whole, each with why, for an error that found too
    few whole ones: `" (not whole: checkpoint-1: its checkpoint_complete.json does not parse)"` or ""."""
    skipped = [
        f"{folder.name}: {problem}"
        for folder in numbered_folders(run_dir, prefix)
        if (problem := checkpoint_problem(folder)) is not None and not taken_unchecked(folder, prefix)
    ]
    return f" (not whole: {'; '.join(skipped)})" if skipped else ""


def check_checkpoint(
    folder: str | Path, prefix: str = "checkpoint", option: str = "--resume_from_checkpoint"
) -> None:
    """Refuse a checkpoint that is not whole, naming why and the checkpoint to take instead. One of an earlier
    version, named explicitly, is taken unchecked (`taken_unchecked`)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MissingPathError(f"{option} {folder}: no such folder.")
    if not is_numbered(folder, prefix):
        raise UsageError(
            f"{option} {folder} is not a {prefix}-<step> folder: give one of a run's, the run's folder, or "
            "true for the newest whole checkpoint of --output_dir."
        )
    problem = checkpoint_problem(folder)
    if problem is None:
        return
    if taken_unchecked(folder, prefix):
        logger.warning(
            "%s carries no %s (saved by an earlier version): taken unchecked.", folder, COMPLETE_NAME
        )
        return
    earlier = [path for path in numbered_folders(folder.parent, prefix) if checkpoint_problem(path) is None]
    earlier = [path for path in earlier if step_of(path) < step_of(folder)]
    instead = (
        f"Resume from {earlier[-1]}, the newest whole one before it (`{option} true` takes the newest of all)"
        if earlier
        else "No whole checkpoint comes before it: start the run again"
    )
    raise UsageError(f"{folder} cannot be resumed from: {problem}. {instead}.")


NEWEST = ("true", "latest")


def resolve_resume(
    value: str | bool | None, output_dir: str | Path, prefix: str = "checkpoint"
) -> str | None:
    """The checkpoint `--resume_from_checkpoint value` names: `true` or `latest` (as `Trainer.train` takes
    True) or a run folder is the newest whole checkpoint of that run; a checkpoint folder must be whole
    (`check_checkpoint`). Says in one line which checkpoint the run resumes from."""
    if isinstance(value, bool):  # a recipe's `resume_from_checkpoint: true`
        value = "true" if value else None
    if not value:
        return None
    option = "--resume_from_checkpoint"
    newest = value.lower() in NEWEST
    run_dir = Path(output_dir) if newest else Path(value)
    if not newest and (is_numbered(run_dir, prefix) or not numbered_folders(run_dir, prefix)):
        check_checkpoint(value, prefix, option)
        logger.info("Resuming from %s.", value)
        return value
    found = numbered_folders(run_dir, prefix)
    problems = {folder: checkpoint_problem(folder) for folder in found}
    complete = [folder for folder in found if problems[folder] is None]
    if not complete:
        names = ", ".join(path.name for path in found) or "none"
        raise MissingPathError(
            f"{option} {value}: {run_dir} holds no whole {prefix}-<step> folder to resume from (found: "
            f"{names}; one saved by an earlier version carries no {COMPLETE_NAME}, and is taken when named: "
            f"{option} <folder>). Start the run again without it (with --overwrite to replace what is there)."
        )
    later = [
        f"{folder.name}: {problems[folder]}" for folder in found if step_of(folder) > step_of(complete[-1])
    ]
    passed = f" (passed over: {'; '.join(later)})" if later else ""
    logger.info("Resuming from %s, the newest whole checkpoint of %s%s.", complete[-1], run_dir, passed)
    return str(complete[-1])


def save_whole_folder(model, tokenizer, folder: str | Path) -> Path:
    """`saving.save_model_folder` through the one write helper (`outputs.staged`): the final folder of a run
    is whole or absent, and `final.unfinished`, marked, while it is written."""
    from ..saving import save_model_folder

    with staged(folder) as staging:
        save_model_folder(model, tokenizer, staging)
    return Path(folder)


def remove_unfinished(run_dir: str | Path, after_step: int, prefix: str = "checkpoint") -> None:
    """Delete the folders of `run_dir` after `after_step` (where a run resumes) whose save never finished (no
    record), each named in one line: the resumed run saves at those steps again, and stale files would mix
    with the new ones. Folders whose record disagrees with their files are left for the user to look at.
    Call it on one process."""
    for folder in numbered_folders(run_dir, prefix):
        if step_of(folder) > after_step and not (folder / COMPLETE_NAME).exists():
            logger.warning("Removing %s: its save did not finish.", folder)
            shutil.rmtree(folder, ignore_errors=True)
