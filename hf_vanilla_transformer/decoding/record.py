"""What an output of the file translator translates, and whether a rerun continues it.

Beside an output being written lies a record of what it translates (`<output>.translating.json`): its input,
model, backend and decoding. A rerun whose record is the same continues after the output's last complete
line; the record goes when the output is complete. An output with no record is not the command's to replace,
unless asked (`--overwrite`).
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import ExistingPathError, UsageError
from ..readers import is_stream
from .arguments import TranslateArguments

# Beside the output while it is being written: what it translates, so that a rerun may continue it.
RECORD_SUFFIX = ".translating.json"


def record_path(output: Path) -> Path:
    return output.with_name(output.name + RECORD_SUFFIX)


def output_record(args: TranslateArguments, paths: list[Path], generation: dict) -> dict:
    """The record of an output: the command, its inputs (`input_record`), the model, the backend and its
    decoding (`generation`: generate()'s settings), and what else changes the lines written. An output is
    continued only by a run whose record is the same, the command aside."""
    return {
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "input": input_record(paths),
        "model": _model_id(args.model),
        "backend": args.backend,
        "generation": generation,
        "split_sentences": args.split_sentences,
        "source_lang": args.source_lang,
        **({"seed": args.seed} if args.do_sample else {}),
        **({"dtype": args.dtype} if args.dtype != "auto" else {}),  # lines of another dtype are not continued
    }


def _model_id(name: str) -> str:
    path = Path(name).expanduser()
    return str(path.resolve()) if path.exists() else name


def input_record(paths: list[Path]) -> list[dict] | str:
    """The inputs as a record names them: each file's path, size and time of change (a changed file is
    another input), a stream's path as given (`readers.is_stream`), or standard input."""
    if not paths:
        return "<stdin>"
    return [_file_record(path) for path in paths]


def _file_record(path: Path) -> dict:
    if is_stream(path):  # its size and time say nothing of what it will hold
        return {"path": str(path), "stream": True}
    return {"path": str(path.resolve()), "bytes": path.stat().st_size, "modified_ns": path.stat().st_mtime_ns}


def _streams(inputs: list[dict] | str) -> list[str]:
    """The inputs of an `input_record` that are read once (standard input, a pipe, a FIFO), by name."""
    if inputs == "<stdin>":
        return ["standard input"]
    return [item["path"] for item in inputs if item.get("stream")]


def complete_lines(path: Path) -> tuple[int, int]:
    """(complete lines, bytes they take) of an output, by a scan of its bytes for newlines (no decoding): what
    follows its last newline is a line without its end (an output cut short)."""
    lines = end = offset = 0
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            if count := chunk.count(b"\n"):
                lines += count
                end = offset + chunk.rindex(b"\n") + 1
            offset += len(chunk)
    return lines, end


@dataclass
class OutputPlan:
    """Where a run starts: after `first_line` complete lines of an output `keep_bytes` long."""

    first_line: int = 0
    keep_bytes: int = 0


def plan_output(output: Path, record: dict, overwrite: bool, total_lines: int | None) -> OutputPlan:
    """Whether `output` is new, replaced (`overwrite`) or continued: continued only when its record says it
    is an unfinished translation of what `record` describes. Reads, never writes (every process plans)."""
    if not output.exists() or overwrite:
        return OutputPlan()
    saved_path = record_path(output)
    if not saved_path.is_file():
        raise ExistingPathError(
            f"{output} exists and is no unfinished translation (no {saved_path.name} beside it): pass "
            "--overwrite to replace it, or give another --output."
        )
    try:
        saved = json.loads(saved_path.read_text(encoding="utf-8"))
    except ValueError:
        saved = {}
    streams = _streams(record["input"])
    if streams and saved.get("input") == record["input"]:
        raise ExistingPathError(
            f"{output} is an unfinished translation of {streams[0]}, a stream, which cannot be checked to be "
            "the same input nor read again from where it stopped: pass --overwrite to start again (give the "
            "input as a regular --input FILE to be resumable)."
        )
    differing = [key for key in record if key != "command" and saved.get(key) != record[key]]
    if differing:
        raise ExistingPathError(
            f"{output} is an unfinished translation of another {', '.join(differing)} ({saved_path.name}): "
            "run its command again to continue it, or pass --overwrite to start again."
        )
    lines, keep = complete_lines(output)
    if total_lines is not None and lines > total_lines:
        raise UsageError(
            f"{output} holds {lines} lines, more than the {total_lines} of the input: pass --overwrite to "
            "start again."
        )
    return OutputPlan(lines, keep)


def start_output(output: Path, plan: OutputPlan, record: dict) -> None:
    """Cut `output` to its complete lines (empty when new or replaced) and write its record beside it."""
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "ab") as file:
        file.truncate(plan.keep_bytes)
    saved_path = record_path(output)
    temporary = saved_path.with_name(saved_path.name + ".tmp")
    temporary.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    temporary.replace(saved_path)
