"""The files a command is handed, read through one reader per format: text lines (`iter_text_lines`,
`count_text_lines`, `iter_stream_lines`), whole texts (`read_text`) and JSON (`read_json`). Each refuses, in
one line naming the file and the fix, what would otherwise end in a library's traceback or, worse, in output
made of the wrong bytes: a path that is not there, a folder where a file is wanted, text that is not UTF-8
(its line and byte offset), a compression it cannot read, a file cut short (a gzip stream without its end,
JSON that stops half way). It also tells a local path from a Hub id (`is_local_path`) and finds the entry a
mistyped path meant (`nearest_sibling`).

Compression is told by a file's first bytes, not its name: gzip (the package's own corpora are `.gz`), bzip2
and xz are read as the text they hold; a zip archive or a zstd file is refused, naming what it is.

Text is taken as the pipeline takes it (`sentences.normalize_text`: a byte-order mark dropped; CRLF, a lone
CR, NEL, U+2028 and U+2029 line ends). A file's lines end at "\n" only, as `wc -l` counts them; a line end of
another kind inside a line is a space, so that a command's output has a line for each line of its input.

A pipe or a FIFO (`--input <(zcat news.gz)`, `mkfifo`) or a character device is read once, as a stream
(`is_stream`): its compression is told as it is read, and it cannot be counted before it is read.

The data files of a data set (parquet, JSON Lines, CSV, Arrow) are `data.files`' (they need `datasets`); this
leaf imports nothing of ours but `errors` and `sentences` (leaves both), so that every layer may read through
it.
"""

from __future__ import annotations

import bz2
import codecs
import contextlib
import difflib
import gzip
import json
import lzma
import os
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .errors import CorruptFileError, MissingPathError, UsageError
from .sentences import normalize_line, normalize_text

# Magic bytes -> (name, opener) of the compressions read as the text they hold; an opener takes a path or an
# open binary stream.
_COMPRESSIONS = {
    b"\x1f\x8b": ("gzip", gzip.open),
    b"BZh": ("bzip2", bz2.open),
    b"\xfd7zXZ\x00": ("xz", lzma.open),
}
# Magic bytes -> what a file is, for those refused: a text reader would hand on their bytes as text.
_REFUSED = {b"PK\x03\x04": "a zip archive", b"\x28\xb5\x2f\xfd": "zstd-compressed"}
_MAGIC_BYTES = max(len(magic) for magic in (*_COMPRESSIONS, *_REFUSED))
# What a decompressor raises on a stream cut short or damaged: EOFError for a gzip or xz stream without its
# end, gzip.BadGzipFile/OSError, zlib.error and lzma.LZMAError for damaged bytes.
_DECOMPRESSION_ERRORS = (EOFError, OSError, zlib.error, lzma.LZMAError)
_CHUNK = 1 << 20


def check_file(path: str | os.PathLike, what: str = "text file") -> Path:
    """`path` as a `Path`, if it is a file or a stream (`is_stream`): else `MissingPathError` (nothing there)
    or `UsageError` (a folder), naming it as `what` ("text file", "--input file", ...)."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise UsageError(f"{what} {path} is a folder: give a file.")
    if not path.is_file() and not is_stream(path):
        raise MissingPathError(f"No {what} {path}: check the path (and the file's extension).")
    return path


def is_stream(path: str | os.PathLike) -> bool:
    """Whether `path` is a pipe or a FIFO (`<(zcat news.gz)`, `mkfifo`) or a character device (`/dev/stdin`
    at a terminal): read once, its bytes gone as they are read, so that it is neither probed nor counted
    first."""
    try:
        mode = os.stat(Path(path).expanduser()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def compression_of(path: str | os.PathLike) -> str | None:
    """The compression a regular file's first bytes announce ("gzip", "bzip2", "xz"), None for none; a zip
    archive or a zstd file is refused, naming what it is. (A stream's is told as it is read: probing it here
    would consume the bytes.)"""
    with open(path, "rb") as probe:
        return _compression(probe.read(_MAGIC_BYTES), f"'{path}'")


def _compression(head: bytes, name: str) -> str | None:
    for magic, what in _REFUSED.items():
        if head.startswith(magic):
            raise UsageError(f"{name} is {what}, not text: unpack it and give the text file it holds.")
    for magic, (compression, _) in _COMPRESSIONS.items():
        if head.startswith(magic):
            return compression
    return None


def open_binary(path: str | os.PathLike) -> BinaryIO:
    """A regular file's bytes, decompressed when its first bytes say it is compressed (`compression_of`)."""
    compression = compression_of(path)
    return open(path, "rb") if compression is None else _opener(compression)(path, "rb")


def _opener(compression: str):
    return next(opener for name, opener in _COMPRESSIONS.values() if name == compression)


def _decompressing(stream: BinaryIO, name: str) -> tuple[BinaryIO, str | None]:
    """An open stream's bytes, decompressed where its first bytes, seen without consuming them (`peek`, as an
    open file's and standard input's buffers can), say it is compressed; and its compression."""
    head = stream.peek(_MAGIC_BYTES)[:_MAGIC_BYTES] if hasattr(stream, "peek") else b""
    compression = _compression(head, name)
    if compression is not None:
        stream = _opener(compression)(stream, "rb")
    return stream, compression


@contextlib.contextmanager
def _opened(path: Path, name: str) -> Iterator[tuple[BinaryIO, str | None]]:
    """A file's bytes, decompressed, and its compression: a regular file probed, then opened; a stream
    (`is_stream`) opened once, its compression told from the bytes it holds back (`_decompressing`)."""
    if not is_stream(path):
        compression = compression_of(path)
        with open_binary(path) as file:
            yield file, compression
        return
    with open(path, "rb") as raw:
        stream, compression = _decompressing(raw, name)
        yield stream, compression


def _cut_short(name: str, compression: str, error: BaseException, lines: int | None) -> CorruptFileError:
    cause = str(error) or type(error).__name__
    where = f" after line {lines}" if lines is not None else ""
    return CorruptFileError(
        f"{name} is {compression} data cut short or damaged{where} ({cause}): download or make it again."
    )


def _not_utf8(name: str, line_number: int, raw: bytes, error: UnicodeDecodeError, at_end: bool) -> Exception:
    if at_end and error.reason == "unexpected end of data":
        return CorruptFileError(
            f"{name} is cut short: its last line (line {line_number}) ends inside a UTF-8 character. "
            "Download or make it again."
        )
    return UsageError(
        f"{name} is not valid UTF-8: line {line_number} has byte {raw[error.start]:#04x} at byte offset "
        f"{error.start}. Re-encode the file as UTF-8, e.g. `iconv -f latin1 -t utf-8`."
    )


def _decoded_lines(raw_lines: Iterator[bytes], name: str, compression: str | None) -> Iterator[str]:
    """Each of `raw_lines` decoded as UTF-8 without its line end ("\\n" or "\\r\\n") and normalized
    (`sentences.normalize_line`: without a byte-order mark, another line end inside it a space); bytes that
    are not UTF-8, or a compressed stream cut short, refused naming `name`."""
    line_number = 0
    raw_lines = iter(raw_lines)
    while True:
        try:
            raw = next(raw_lines, None)
        except _DECOMPRESSION_ERRORS as error:
            if compression is None:  # a plain file's read error (a disk's) is no decompressor's
                raise
            raise _cut_short(name, compression, error, line_number) from None
        if raw is None:
            return
        line_number += 1
        # Decoded line by line (rather than in text mode) so that an error can say which line is bad.
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise _not_utf8(name, line_number, raw, error, not raw.endswith(b"\n")) from None
        yield normalize_line(line.removesuffix("\n").removesuffix("\r"))


def iter_text_lines(path: str | os.PathLike, what: str = "text file") -> Iterator[str]:
    """The lines of a UTF-8 text file, read lazily, without their line ends, normalized
    (`sentences.normalize_line`); gzip-, bzip2- or xz-compressed or not (told by its first bytes). A line ends
    at "\\n" only, as `count_text_lines` and `wc -l` count them. A pipe or a FIFO is read once, as
    `iter_stream_lines` reads standard input. A missing file or a folder (named as `what`), bytes that are
    not UTF-8 (line and byte offset), and a compressed file cut short are refused in one line naming the
    file."""
    path = check_file(path, what)
    name = f"'{path}'"
    with _opened(path, name) as (file, compression):
        yield from _decoded_lines(file, name, compression)


def iter_stream_lines(stream: BinaryIO, name: str = "standard input") -> Iterator[str]:
    """`iter_text_lines` for an open binary stream (standard input's `buffer`, a FIFO), called `name` in
    errors; a gzip, bzip2 or xz stream is decompressed where the stream can show its first bytes without
    consuming them (`peek`, as standard input's buffer and an open file can)."""
    stream, compression = _decompressing(stream, name)
    yield from _decoded_lines(stream, name, compression)


def count_text_lines(path: str | os.PathLike, what: str = "text file") -> int:
    """How many lines `iter_text_lines` yields for `path`, counted in one pass over its (decompressed) bytes
    that also checks them: a file that is not UTF-8 or is cut short is refused here, as `iter_text_lines`
    would refuse it, before any of it is used. A stream (`is_stream`) is refused: counted, it would be
    gone."""
    path = check_file(path, what)
    if is_stream(path):
        raise UsageError(
            f"{what} {path} is a pipe or a device, which can be read only once, so not counted before it is "
            "read: give a regular file."
        )
    decoder = codecs.getincrementaldecoder("utf-8")()
    lines, last = 0, b"\n"
    try:
        with open_binary(path) as file:
            while chunk := file.read(_CHUNK):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
                decoder.decode(chunk)
            decoder.decode(b"", final=True)
    except (UnicodeDecodeError, *_DECOMPRESSION_ERRORS):
        # Found in a chunk: read again line by line, whose error names the line.
        for _ in iter_text_lines(path, what):
            pass
        raise  # not reached: the lines refuse what the chunks did
    return lines + (last != b"\n")


def read_text(path: str | os.PathLike, what: str = "text file") -> str:
    """The whole text of a UTF-8 file (or of a stream, read once), decompressed as `iter_text_lines`
    decompresses, normalized (`sentences.normalize_text`: line ends kept, as "\\n"; a byte-order mark
    dropped); refused as it refuses (missing, a folder, not UTF-8 with its line and byte offset, cut
    short)."""
    path = check_file(path, what)
    compression = None
    try:
        with _opened(path, f"'{path}'") as (file, compression):
            data = file.read()
    except _DECOMPRESSION_ERRORS as error:
        if compression is None:
            raise
        raise _cut_short(f"'{path}'", compression, error, None) from None
    try:
        return normalize_text(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        start = data.rfind(b"\n", 0, error.start) + 1
        end = data.find(b"\n", error.start)
        line = data[start : end + 1 if end >= 0 else len(data)]
        located = UnicodeDecodeError(
            error.encoding, line, error.start - start, error.end - start, error.reason
        )
        raise _not_utf8(f"'{path}'", data.count(b"\n", 0, start) + 1, line, located, end < 0) from None


def read_json(path: str | os.PathLike, fix: str, what: str = "file", decompress: bool = True):
    """The JSON value in `path`, gzip-, bzip2- or xz-compressed or not (told by its first bytes; with
    `decompress=False`, as for the files another library reads after us, a compressed file is refused as one
    that does not parse); a pipe or a FIFO is read once. A file that is not there or a folder (named as
    `what`), or one that does not parse (cut short, not UTF-8, empty), is refused in one line naming the file
    and `fix` (e.g. "Download or save the model again")."""
    path = check_file(path, what)
    compression = None
    try:
        if decompress:
            with _opened(path, f"'{path}'") as (file, compression):
                data = file.read()
        else:
            with open(path, "rb") as file:
                data = file.read()
    except _DECOMPRESSION_ERRORS as error:
        if compression is None:
            raise
        raise _cut_short(str(path), compression, error, None) from None
    try:
        return json.loads(data)
    except ValueError as error:  # JSONDecodeError, or UnicodeDecodeError for bytes that are no text
        detail = "it is empty" if not data.strip() else str(error)
        raise CorruptFileError(
            f"{path} is truncated or corrupt: it does not parse as JSON ({detail}). {fix.rstrip('.')}."
        ) from error


__all__ = [
    "check_file",
    "compression_of",
    "count_text_lines",
    "is_stream",
    "iter_stream_lines",
    "iter_text_lines",
    "open_binary",
    "read_json",
    "read_text",
]


def is_local_path(name_or_path: str | Path) -> bool:
    """Whether a name can only mean a local path, not a Hub repository id (`name` or `owner/name`): it
    exists, starts with `.`, `/` or `~`, has more than one `/`, or its first component is a folder here (a
    mistyped `model_cards/<name>` is a missing folder, not a Hub repository)."""
    name = str(name_or_path)
    first = Path(name).parts[0] if Path(name).parts else ""
    return (
        Path(name).exists()
        or name.startswith((".", "/", "~"))
        or name.count("/") > 1
        or ("/" in name and Path(first).is_dir())
    )


def nearest_sibling(path: str | Path) -> Path | None:
    """The existing entry beside a missing `path` whose name is closest to its name, if any is close."""
    path = Path(path).expanduser()
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        return None
    names = [entry.name for entry in parent.iterdir()]
    close = difflib.get_close_matches(path.name, names, n=1, cutoff=0.7)
    return parent / close[0] if close else None
