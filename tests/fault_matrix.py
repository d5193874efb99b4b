"""The fault matrix: every command, every file or folder it reads and every place it writes, each given the
faults a user's files have, generated from the commands' own tables rather than listed case by case.

Where the cases come from:
- the commands: every script the tests of the scripts find (`test_script_help.CLI_SCRIPTS`, the research
  commands beside them);
- what each reads and writes: its options that are in `outputs.INPUT_OPTIONS` or `outputs.OUTPUT_OPTIONS` (and
  the paths that table leaves out with a reason, `test_script_help.PATHS_LEFT_OUT`), a recipe file in front of
  the options, and a task file named by `--task`;
- what a file or folder of each kind is made of: `KINDS` below, by option name;
- the faults: for a file, missing, a folder, empty, not UTF-8, gzip-compressed and, in each format it is read
  in, cut short; for a folder, missing, a file, empty, and each of its files cut short (and, for JSON, not
  UTF-8; for weights, unreadable bytes of the right size); for an output, under a path that is a file, not
  writable, one of the command's inputs, and a link to nothing.
- around a command (`test_fault_matrix`, second part): for each output, a second instance of the command
  started while another holds it; for each call of the one write helper (`outputs.staged`) a command
  makes, a SIGTERM as the write begins and as it is about to be published; and, for each command, caches
  that cannot be used.

What each case must give (`check_outcome`): one `error:` line naming the file, exit status 2, no traceback;
or a
success the docs state (`DOCUMENTED_SUCCESSES`). In both, nothing that existed before changes (every file
under the case's folder and the shared inputs is hashed before and after).

The commands run in the test's process (`script_runner.run_script_file`): a case costs what the command does
before it meets the fault, not an interpreter's start.
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path

# What an input option reads, by its name (a command may override: `Command.kinds`).
KINDS = {
    "model": "model folder",
    "tokenizer": "tokenizer folder",
    "dataset": "save_to_disk folder",
    "run_dir": "run folder",
    "compare": "JSON file",
    "resume_from_checkpoint": "checkpoint folder",
    "text_files": "text file",
    "input": "text file",
    "card": "text file",
    "recipe": "recipe file",
    "config_overrides": "JSON file",
    "markdown_from": "JSON file",
    "multi30k": "text corpus folder",
    "library_speed_of": "text corpus folder",
    "task": "task file",
    "held_out_from": "save_to_disk folder",
    "baseline": "JSON file",
    "other": "JSON file",
}
# A recipe file given in front of the options (`train.py recipe.yaml --option ...`), as if it were an option.
RECIPE = "(recipe in front)"
KINDS[RECIPE] = "recipe file"

# The formats the files inside a folder are read in, by suffix: which ways of being cut short apply.
FORMATS = {
    ".json": "JSON",
    ".jsonl": "JSON Lines",
    ".parquet": "parquet",
    ".arrow": "Arrow",
    ".safetensors": "safetensors",
    ".bin": "CTranslate2 model",
    ".gz": "gzip",
    ".yaml": "YAML",
    ".txt": "text",
    ".de": "text",
    ".en": "text",
}
TEXT_FORMATS = {"JSON", "JSON Lines", "YAML", "text"}

FILE_FAULTS = ("missing", "a folder", "empty", "not UTF-8", "gzip-compressed", "gzip cut short", "cut short")
FOLDER_FAULTS = ("missing", "a file", "empty")
OUTPUT_FAULTS = ("under a file", "not writable", "an input", "a dangling link")

# Faults that a command takes as the docs say, not as errors (docs/data.md, "Files the commands read"), by the
# option that reads the file: text and JSON are read through one reader, which reads a compressed file as the
# text it holds; an empty file of lines to translate is no lines.
DOCUMENTED_SUCCESSES = {
    *((option, "gzip-compressed") for option in ("input", "text_files", "card", "recipe", RECIPE)),
    *((option, "gzip-compressed") for option in ("config_overrides", "markdown_from", "compare")),
    *((option, "gzip-compressed") for option in ("baseline", "other")),
    # Text with no end marker: cut at a line's end it is a shorter text (a recipe cut so is a shorter recipe,
    # whose options then take their defaults; cut inside a line it names the key or the YAML it breaks).
    *((option, "cut short") for option in ("input", "text_files", "card", "recipe", RECIPE)),
    ("input", "empty"),
}


@dataclass
class Command:
    """A valid command line of a script, built from the shared inputs (`World`): `args(world, out)` gives it,
    writing to the folder `out`. `reads` maps each input option it has to its value in that line (a fault
    replaces it), `writes` each output option; `kinds` overrides `KINDS` for this command."""

    script: str
    args: callable
    reads: callable
    writes: dict[str, str] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    name: str = ""
    # A command whose success runs training in processes of its own (minutes, not a step in this one): its
    # documented successes are `slow` cases; its refusals stay in the default suite.
    trains: bool = False

    def __post_init__(self):
        self.name = self.name or self.script

    def kind(self, option: str) -> str:
        return self.kinds.get(option, KINDS[option])


def sha(path: Path) -> dict[str, str]:
    """Every file under `path` (or `path` itself) and the hash of its bytes."""
    path = Path(path)
    if path.is_file():
        return {str(path): hashlib.sha256(path.read_bytes()).hexdigest()}
    if not path.is_dir():
        return {}
    return {
        str(item): hashlib.sha256(item.read_bytes()).hexdigest()
        for item in sorted(path.rglob("*"))
        if item.is_file() and not item.is_symlink()
    }


def files_of_format(folder: Path) -> dict[str, list[Path]]:
    """The files of `folder` (not under a checkpoint's optimizer state) by the format they are read in."""
    found: dict[str, list[Path]] = {}
    for path in sorted(folder.rglob("*")):
        fmt = FORMATS.get(path.suffix)
        if path.is_file() and fmt:
            found.setdefault(fmt, []).append(path)
    return found


def cut_short(path: Path) -> None:
    """Keep the first half of the bytes: a download or copy stopped half way (a JSON Lines file ends in half a
    line, a gzip stream with no end)."""
    data = path.read_bytes()
    path.write_bytes(data[: max(1, len(data) // 2)])


def not_utf8(path: Path) -> None:
    """The same text in Latin-1 with a byte no UTF-8 text has: a file saved in another encoding."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    path.write_bytes(("\u00e4\u00f6 " + text).encode("latin-1", errors="replace"))


def unreadable(path: Path) -> None:
    """Bytes of the same size that are no weights (a disk's fault, a file overwritten)."""
    size = path.stat().st_size
    path.write_bytes(bytes((index * 131 + 7) % 256 for index in range(size)))


# The formats of the files a folder of each kind holds: each file's faults (`fault_matrix.folder_faults`).
FORMATS_OF_KIND = {
    "model folder": ("JSON", "safetensors"),
    "tokenizer folder": ("JSON",),
    "run folder": ("JSON", "safetensors"),
    "checkpoint folder": ("JSON", "safetensors"),
    "loop checkpoint": ("JSON", "safetensors"),
    "CTranslate2 folder": ("JSON", "CTranslate2 model"),
    "text corpus folder": ("gzip",),
    "Marian folder": ("JSON", "safetensors"),
    "corpus size folder": ("JSON", "Arrow"),
    "save_to_disk folder": ("JSON", "Arrow"),
    "JSON Lines folder": ("JSON Lines",),
    "parquet folder": ("parquet",),
}


def folder_faults(kind: str) -> list[str]:
    """The faults of a folder of `kind`: its own, and each of its files' by format."""
    faults = list(FOLDER_FAULTS)
    for fmt in FORMATS_OF_KIND[kind]:
        faults.append(f"{fmt} cut short")
        if fmt in ("JSON", "JSON Lines"):
            faults.append(f"{fmt} not UTF-8")
        if fmt == "safetensors":
            faults.append(f"{fmt} unreadable")
    return faults


def make_fault(valid: Path, fault: str, where: Path) -> tuple[Path, list[Path]]:
    """A copy of `valid` (a file or folder) under `where` with `fault`: the path to pass and the files the
    error may name (the path itself, or the files inside it that were spoilt)."""
    where.mkdir(parents=True, exist_ok=True)
    target = where / valid.name
    if fault == "missing":
        return where / f"no-{valid.name}", [where / f"no-{valid.name}"]
    if fault == "a folder":
        target.mkdir()
        return target, [target]
    if fault == "a file":
        target.write_text("not a folder\n", encoding="utf-8")
        return target, [target]
    if fault == "empty" and valid.is_dir():
        target.mkdir()
        return target, [target]
    if valid.is_file():
        data = valid.read_bytes()
        if fault == "empty":
            target.write_bytes(b"")
        elif fault == "not UTF-8":
            target.write_bytes(data)
            not_utf8(target)
        elif fault == "gzip-compressed":
            target.write_bytes(gzip.compress(data, mtime=0))
        elif fault == "gzip cut short":
            packed = gzip.compress(data * 20, mtime=0)
            target.write_bytes(packed[: len(packed) // 2])
        elif fault == "cut short":  # at a line's end: cut inside a line is a format's own case
            lines = data.splitlines(keepends=True)
            target.write_bytes(b"".join(lines[: len(lines) // 2]))
        else:
            raise ValueError(fault)
        return target, [target]
    shutil.copytree(valid, target, symlinks=True)
    if fault.endswith(" cut short"):
        fmt, spoil = fault[: -len(" cut short")], cut_short
    elif fault.endswith(" not UTF-8"):
        fmt, spoil = fault[: -len(" not UTF-8")], not_utf8
    elif fault.endswith(" unreadable"):
        fmt, spoil = fault[: -len(" unreadable")], unreadable
    else:
        raise ValueError(fault)
    spoilt = files_of_format(target)[fmt]
    for path in spoilt:
        spoil(path)
    return target, spoilt


def unwritable_folder(where: Path) -> Path:
    """A folder this process cannot write into: made read-only, or, where permissions do not bind (root), a
    place of the system's that refuses every writer."""
    folder = where / "read-only"
    folder.mkdir(exist_ok=True)
    folder.chmod(0o555)
    try:
        probe = folder / ".probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError:
        return folder
    folder.chmod(0o755)
    for candidate in (Path("/sys/fs"), Path("/proc/self")):
        try:
            (candidate / ".hf-vanilla-transformer-probe").write_bytes(b"")
        except OSError:
            return candidate
    raise RuntimeError("No folder here refuses writes: the not-writable case cannot be made.")


def names_a_file(line: str, paths: list[Path]) -> bool:
    """Whether an error line names one of `paths`: as given, or by its name beside its folder's
    (`final/config.json`, `.../checkpoint-1 cannot be resumed from: its checkpoint_complete.json ...`)."""
    return any(
        str(path) in line
        or f"{path.parent.name}/{path.name}" in line
        or ((f"{path.parent.name}: " in line or str(path.parent) in line) and path.name in line)
        for path in paths
    )


def check_outcome(result, case: str, expect: str, named: list[Path]) -> None:
    """`expect` "error": one `error:` line naming one of `named`, exit status 2, no traceback; "success": exit
    status 0 and no traceback."""
    shown = f"{case}\nstatus {result.returncode}\nstderr:\n{result.stderr[-4000:]}"
    assert "Traceback" not in result.stderr, shown
    if expect == "success":
        assert result.returncode == 0, shown
        return
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2 and len(errors) == 1, shown
    assert names_a_file(errors[0], named), f"the error names none of {[str(p) for p in named]}\n{shown}"


def with_value(args: list[str], option: str, value) -> list[str]:
    """`args` with `--option`'s value replaced by `value` (the recipe in front, for `RECIPE`)."""
    args = [str(item) for item in args]
    if option == RECIPE:
        return [str(value), *args[1:]]
    index = args.index(f"--{option}")
    end = index + 1
    while end < len(args) and not args[end].startswith("--"):
        end += 1
    return [*args[:index], f"--{option}", str(value), *args[end:]]


def environment() -> dict[str, str]:
    return {"OMP_NUM_THREADS": "1"}
