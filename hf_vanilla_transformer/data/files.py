"""The data files of a data set, read through `datasets` with their faults named: a folder of parquet, JSON
Lines or CSV files (`load_data_folder`, streamed or not) and a `save_to_disk` folder (`load_saved_dataset`).

pyarrow's and the JSON parser's answers to a file cut short name no file ("Parquet magic bytes not found in
footer", "JSON parse error: Missing a closing quotation mark in string. in row 1020"), and a streamed corpus
meets them hours into training. So:

- before loading, every JSON Lines, JSON and CSV file is read once through, in chunks, to check that it is
  UTF-8 (`check_utf8`): `datasets` hands a JSON Lines file's bytes to pyarrow unchecked, so a Latin-1 file
  loads, is saved, and fails only in the next command to read its text;
- every data file gets the checks that cost a few bytes each (`check_data_files`): a parquet file must end
  in its footer, a JSON Lines file in a line that parses, and none may be empty; a download cut short fails
  here, at once, streamed or not;
- when `datasets` fails while reading the files anyway (a line damaged in the middle of a file), each file is
  read in full until the one that fails is found (`find_unreadable_data_file`), and the error names it. A
  stream gets the same answer while it is read (`name_stream_read_errors`).

Every refusal names the file and what is wrong with it: a `CorruptFileError`, or, for text in another
encoding, a `UsageError` that also gives the line, the byte and the fix (`readers.count_text_lines`).
"""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import datasets

from ..caches import check_datasets_cache
from ..errors import CorruptFileError, MissingPathError, UsageError
from ..readers import count_text_lines, read_json

# Files a Hub dataset repository (or a local copy of one) keeps its splits in.
DATA_FILE_SUFFIXES = (".parquet", ".jsonl", ".json", ".csv")
# Those of them that are text, which `datasets` reads as UTF-8 unless told another `encoding`.
TEXT_DATA_SUFFIXES = (".jsonl", ".json", ".csv")
# What the JSON files of a `save_to_disk` folder hold: the splits (dataset_dict.json), each split's Arrow
# files (state.json) and its features (dataset_info.json).
_SAVED_JSON_FILES = ("dataset_dict.json", "state.json", "dataset_info.json")
# A JSON Lines file's last line is read back this far at most (a longer last line is left to the full read).
_LAST_LINE_LIMIT = 1 << 24
# What readers raise for bytes they cannot read: pyarrow's ArrowInvalid is a ValueError (JSON, CSV, parquet
# data), ArrowIOError an OSError; a JSON or UTF-8 error is a ValueError too.
_READ_ERRORS = (ValueError, OSError, EOFError)

FIX = "Download or make it again"


def data_files_in(folder: str | os.PathLike) -> list[Path]:
    """The data files (`DATA_FILE_SUFFIXES`) anywhere under `folder`, in name order."""
    return sorted(
        path for path in Path(folder).rglob("*") if path.suffix in DATA_FILE_SUFFIXES and path.is_file()
    )


def corrupt(path: Path, problem: str, fix: str = FIX) -> CorruptFileError:
    """The error for a data file that cannot be read: `path`, `problem` and the fix."""
    return CorruptFileError(f"{path} is truncated or corrupt: {problem}. {fix}.")


# The checks that cost a few bytes: the end of each file.


def _last_line(path: Path) -> bytes | None:
    """A file's last non-blank line (read backwards from its end), or None where it is longer than
    `_LAST_LINE_LIMIT`."""
    with open(path, "rb") as file:
        end = file.seek(0, os.SEEK_END)
        tail, block = b"", 1 << 12
        while True:
            start = max(0, end - len(tail) - block)
            file.seek(start)
            tail = file.read(end - start)
            stripped = tail.rstrip()
            if b"\n" in stripped or start == 0:
                return stripped.rsplit(b"\n", 1)[-1]
            if len(tail) > _LAST_LINE_LIMIT:
                return None
            block *= 2


def _parses(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def _first_line(path: Path) -> bytes:
    with open(path, "rb") as file:
        for line in file:
            if line.strip():
                return line
    return b""


def _is_json_lines(path: Path) -> bool:
    """Whether a .json file is JSON Lines (its first line a value of its own, as `datasets` reads it), not one
    JSON document over many lines."""
    return path.suffix == ".jsonl" or _parses(_first_line(path))


def _end_problem(path: Path) -> str | None:
    """What the end of a data file shows to be wrong with it, if anything: empty, no parquet footer, a last
    JSON line that does not parse."""
    size = path.stat().st_size
    if size == 0 or (
        path.suffix in (".jsonl", ".json", ".csv") and size < 4096 and not path.read_bytes().strip()
    ):
        return "it is empty"
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            pq.read_metadata(path)
        except _READ_ERRORS as error:
            return f"it does not read as parquet ({error})"
    elif path.suffix in (".jsonl", ".json"):
        if _is_json_lines(path):
            last = _last_line(path)
            try:
                (last or b"").decode("utf-8")
            except UnicodeDecodeError as error:
                return f"its last line is not UTF-8 (byte {last[error.start]:#04x}; datasets read UTF-8)"
            if last is not None and not _parses(last):
                return f"its last line does not parse as JSON: {_quote(last)}"
        elif not (_last_line(path) or b"}").endswith((b"}", b"]")):
            return "its JSON document does not end in } or ]"
    return None


def _quote(line: bytes, limit: int = 60) -> str:
    text = line.decode("utf-8", errors="replace")
    return repr(text if len(text) <= limit else "..." + text[-limit:])


def check_data_files(paths: Iterable[str | os.PathLike]) -> None:
    """Refuse, naming it, a data file whose end shows it is cut short or empty: a parquet file without its
    footer, a JSON Lines file whose last line does not parse (the cut of a download stopped half way), a JSON
    document that does not close. Reads a few bytes of each file."""
    for path in map(Path, paths):
        problem = _end_problem(path)
        if problem is not None:
            raise corrupt(path, problem)


def check_utf8(paths: Iterable[str | os.PathLike]) -> None:
    """Refuse a JSON Lines, JSON or CSV data file that is not UTF-8 (naming it, the line and byte offset of
    its first bad byte, and the fix: `iconv`), or that ends inside a UTF-8 character (cut short). One pass
    over each file's bytes, 1 MB at a time through an incremental decoder (`readers.count_text_lines`): about
    as fast as the disk reads them, in constant memory."""
    for path in map(Path, paths):
        if path.suffix in TEXT_DATA_SUFFIXES:
            count_text_lines(path, "data file")


def _decoded_as_utf8(load_kwargs: dict[str, Any]) -> bool:
    """Whether `datasets` reads the text files as UTF-8: unless the caller names another `encoding` (the JSON
    and CSV builders both take one), which `datasets` then decodes."""
    encoding = load_kwargs.get("encoding")
    return encoding is None or codecs.lookup(encoding).name.startswith("utf-8")


# The full read, when `datasets` has failed: which file, and where in it.


def _parquet_read_problem(path: Path) -> str | None:
    import pyarrow.parquet as pq

    for _ in pq.ParquetFile(path).iter_batches():
        pass
    return None


def _json_read_problem(path: Path) -> str | None:
    if not _is_json_lines(path):
        json.loads(path.read_bytes())
        return None
    with open(path, "rb") as file:
        for number, line in enumerate(file, start=1):
            try:
                if line.strip():
                    json.loads(line)
            except ValueError as error:
                return f"line {number} does not parse as JSON ({error})"
    return None


def _csv_read_problem(path: Path) -> str | None:
    from pyarrow import csv

    for _ in csv.open_csv(path):
        pass
    return None


def _arrow_read_problem(path: Path) -> str | None:
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        pa.ipc.open_stream(source).read_all()  # `save_to_disk` writes Arrow's stream format
    return None


_FULL_READS = {
    ".parquet": ("parquet", _parquet_read_problem),
    ".jsonl": ("JSON Lines", _json_read_problem),
    ".json": ("JSON", _json_read_problem),
    ".csv": ("CSV", _csv_read_problem),
    ".arrow": ("Arrow", _arrow_read_problem),
}


def read_problem(path: str | os.PathLike) -> str | None:
    """What reading all of a data file (`.parquet`, `.jsonl`, `.json`, `.csv`, `.arrow`) finds wrong with it,
    or None where it reads."""
    path = Path(path)
    if path.suffix not in _FULL_READS:
        return None
    if (problem := _end_problem(path)) is not None:
        return problem
    kind, read = _FULL_READS[path.suffix]
    try:
        return read(path)
    except _READ_ERRORS as error:
        return f"it does not read as {kind} ({error})"


def find_unreadable_data_file(paths: Iterable[str | os.PathLike]) -> tuple[Path, str] | None:
    """The first of `paths` that does not read in full, and what is wrong with it; None where all read."""
    for path in map(Path, paths):
        if path.is_file() and (problem := read_problem(path)) is not None:
            return path, problem
    return None


def _named(paths: Iterable[str | os.PathLike], fix: str = FIX) -> CorruptFileError | None:
    """The `CorruptFileError` for an error raised while reading `paths`, naming the file that fails to read in
    full; None where every file reads (the error was no file's)."""
    found = find_unreadable_data_file(paths)
    return corrupt(*found, fix) if found is not None else None


# Loading.


class _ReadErrorsNamed:
    """A stream's table reader (`datasets`' `generate_tables_fn`) whose read errors name the file: it reads
    the files of its shard and, where they fail, the one that does not read in full is found and named."""

    def __init__(self, generate_tables, files: Sequence[Path]):
        self.generate_tables, self.files = generate_tables, list(files)

    def __call__(self, **shard):
        try:
            yield from self.generate_tables(**shard)
        except _READ_ERRORS as error:
            named = _named(_paths_in(shard) or self.files)
            if named is None:
                raise
            raise named from error


def _paths_in(value: Any) -> list[Path]:
    """The existing files named in a shard's arguments (`{"files": [...]}`, or lists of file lists)."""
    if isinstance(value, str | os.PathLike):
        return [Path(value)] if Path(value).is_file() else []
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, Iterable) and not isinstance(value, bytes):
        return list(dict.fromkeys(path for item in value for path in _paths_in(item)))
    return []


def name_stream_read_errors(
    stream: datasets.IterableDataset, files: Sequence[Path]
) -> datasets.IterableDataset:
    """`stream` (read from local data `files`), its read errors naming the file that fails, however it is
    later mapped, shuffled or split among processes: its table reader (`datasets`' private
    `ArrowExamplesIterable.generate_tables_fn`, which every shard of the stream takes along) is wrapped. A
    `datasets` release without it leaves the stream as it is (its errors then name no file)."""
    examples = getattr(stream, "_ex_iterable", None)
    generate_tables = getattr(examples, "generate_tables_fn", None)
    if generate_tables is not None and not isinstance(generate_tables, _ReadErrorsNamed):
        examples.generate_tables_fn = _ReadErrorsNamed(generate_tables, files)
    return stream


def load_data_folder(folder: str | os.PathLike, **load_kwargs: Any):
    """`datasets.load_dataset(folder, **load_kwargs)` for a folder of data files (`DATA_FILE_SUFFIXES`),
    streamed (`streaming=True`) or not: each file checked first (`check_data_files`), and a failure to read
    them named by its file (streamed: as it is read, `name_stream_read_errors`). Before those checks, text
    files are checked to be UTF-8 (`check_utf8`, one read of each), streamed or not: `datasets` would take a
    JSON Lines file's bytes as they are, to fail in whatever reads the text."""
    files = data_files_in(folder)
    if _decoded_as_utf8(load_kwargs):
        check_utf8(files)
    check_data_files(files)
    check_datasets_cache()
    try:
        loaded = datasets.load_dataset(str(folder), **load_kwargs)
    except (datasets.exceptions.DatasetGenerationError, *_READ_ERRORS) as error:
        named = _named(files)
        if named is None:
            raise
        raise named from error
    if load_kwargs.get("streaming"):
        for split in loaded.values():
            name_stream_read_errors(split, files)
    return loaded


def load_saved_dataset(folder: str | os.PathLike):
    """`datasets.load_from_disk(folder)`: a `save_to_disk` folder (a `DatasetDict` or a `Dataset`), its JSON
    files read first (`readers.read_json`) and a cut or missing Arrow file named."""
    folder = Path(folder)
    fix = f"Make the data set {folder} again"
    if folder.is_file():
        raise UsageError(f"{folder} is a file, not a folder written by `save_to_disk`: give the folder.")
    if not (folder / "dataset_dict.json").is_file() and not (folder / "state.json").is_file():
        state = "is empty" if folder.is_dir() and not any(folder.iterdir()) else "holds no saved data set"
        state = state if folder.is_dir() else "does not exist"
        raise MissingPathError(
            f"{folder} {state}: give a folder written by `save_to_disk` (dataset_dict.json in it)."
        )
    for name in _SAVED_JSON_FILES:
        for path in (folder / name, *folder.glob(f"*/{name}")):
            if path.is_file():
                read_json(path, fix, decompress=False)  # as `datasets` reads them next
    try:
        return datasets.load_from_disk(str(folder))
    except FileNotFoundError as error:
        if not error.filename or Path(error.filename).exists():
            raise
        raise MissingPathError(
            f"{error.filename} is missing from the saved data set {folder}. {fix}."
        ) from error
    except _READ_ERRORS as error:
        named = _named(sorted(folder.rglob("*.arrow")), fix)
        if named is None:
            raise
        raise named from error


__all__ = [
    "DATA_FILE_SUFFIXES",
    "check_data_files",
    "check_utf8",
    "data_files_in",
    "find_unreadable_data_file",
    "load_data_folder",
    "load_saved_dataset",
    "name_stream_read_errors",
    "read_problem",
]
