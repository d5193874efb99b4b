"""The file translator's lines: the inputs checked before a model loads, counted, read lazily and cut into
windows, and each output made one line."""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import MissingPathError, UsageError
from ..readers import compression_of, count_text_lines, is_stream, iter_stream_lines, iter_text_lines
from ..sentences import normalize_line

# Standard input (or output), as `--input` and `--output` name it.
STDIN = "-"
# How the text reader names an input file in its errors.
INPUT_FILE = "--input file"


def input_paths(names: list[str] | None) -> list[Path]:
    """The `--input` files, each checked to be one before the model loads (a folder, a missing file, a
    compression the reader refuses); none for standard input."""
    names = [name for name in names or [] if name != STDIN]
    paths = [Path(name).expanduser() for name in names]
    for path in paths:
        if path.is_dir():
            raise UsageError(f"--input {path} is a folder: give text files, one input a line.")
        if is_stream(path):
            continue  # read once, when its lines are: its first bytes are told then
        if not path.is_file():
            raise MissingPathError(
                f"No --input file {path}: give text files, one input a line, or - for stdin."
            )
        compression_of(path)  # a zip archive or a zstd file, refused before the model is loaded
    if len(paths) != len(names or []) and paths:
        raise UsageError("--input mixes files and - (stdin): give files only, or - alone.")
    return paths


def count_lines(path: Path) -> int:
    """The lines of an input, as `read_lines` reads them: counted, and checked to be UTF-8 (decompressed
    where compressed) in the same pass, before the model is loaded (`readers.count_text_lines`)."""
    return count_text_lines(path, INPUT_FILE)


def read_lines(paths: list[Path], stdin=None) -> Iterator[str]:
    """The lines of `paths` in turn (of `stdin` when there are none), without their line ends, read lazily
    through the text reader (`readers.iter_text_lines`: gzip, bzip2 or xz told by the first bytes; what is
    not UTF-8 refused naming the file, the line and the byte; the text normalized). A line ends at "\\n"
    only, as `count_lines` and `wc -l` count them."""
    if not paths:
        stream = stdin if stdin is not None else sys.stdin
        buffer = getattr(stream, "buffer", None)
        if buffer is not None:
            yield from iter_stream_lines(buffer, "standard input")
        else:
            for text in stream:
                yield normalize_line(text.removesuffix("\n").removesuffix("\r"))
        return
    for path in paths:
        yield from iter_text_lines(path, INPUT_FILE)


def line_windows(lines: Iterable[str], first_line: int, window: int) -> Iterator[tuple[int, list[str]]]:
    """(number of its first line, its lines) for each window of `lines`, which start at `first_line`: windows
    end at multiples of `window` (counted from the input's first line), so that a resumed run cuts the rest
    of the input as the uninterrupted one did. Each window is read only when asked for."""
    lines = iter(lines)
    start = first_line
    while True:
        end = (start // window + 1) * window
        chunk = list(itertools.islice(lines, end - start))
        if not chunk:
            return
        yield start, chunk
        start += len(chunk)


_LINE_BREAKS = re.compile(r"[\r\n]+")


def one_line(text: str) -> str:
    """An output as one line: a line break it holds would shift every later line."""
    return _LINE_BREAKS.sub(" ", text).strip()
