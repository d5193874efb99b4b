"""How long a user waits: every command's `--help` and its refusal of a mistyped option, and optionally a file
translated by translate.py through each backend and by CTranslate2 alone, each timed as a whole process (its
start-up included): the median of --runs rounds, each command once a round, with the fastest and slowest.

    python scripts/benchmarks/startup.py --runs 5
    # the files: the first line, 100 and 1,000 lines of --input, with the model and its CTranslate2 export
    python scripts/benchmarks/startup.py --only_files --model model_cards/vanilla-transformer-multi30k-de-en \
        --input test_2016_flickr.de

The file rows decode with the model's saved settings (the shipped Multi30k model: beam 6), 32 lines a batch.
The CTranslate2 export (float32) is made from --model by export_ctranslate2.py into a temporary folder, where
CTranslate2 is installed. "CTranslate2 alone" is `ctranslate2_alone.py`: the export's own `CTranslate2Seq2Seq`
in a process with nothing else (no torch, no transformers) decoding the same lines 32 at a time, the floor for
`translate.py --backend ctranslate2`. To compare with an earlier commit, run this file in a worktree of it.
"""

import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.outputs import check_output_location, write_json
from hf_vanilla_transformer.readers import iter_text_lines
from hf_vanilla_transformer.saving import check_model_location

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
# They parse transformers' Seq2SeqTrainingArguments, whose module imports torch: their options cannot be
# read without it.
TRAINING_ARGUMENT_COMMANDS = ("quickstart.py", "train.py", "train_accelerate.py")
FILE_SIZES = (1, 100, 1000)
BATCH_SIZE = 32  # translate.py's default, for CTranslate2 alone too


def commands() -> list[str]:
    """The user commands at the top of `scripts/` but the three that parse training arguments."""
    return sorted(path.name for path in SCRIPTS.glob("*.py") if path.name not in TRAINING_ARGUMENT_COMMANDS)


def run_seconds(command: list[str], expect: int = 0) -> float:
    """Wall seconds of one whole process; one that ends otherwise than with `expect` stops the benchmark
    with its last line (a command's own error names what was wrong)."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != expect:
        last = next((line for line in reversed(done.stderr.splitlines()) if line.strip()), "(nothing)")
        raise UsageError(
            f"{Path(command[1]).name} ended with status {done.returncode}, not {expect}, so it cannot be "
            f"timed: {last.removeprefix('error: ')}"
        )
    return seconds


def start_up_rows() -> dict[str, tuple[list[str], int]]:
    rows = {}
    for name in commands():
        script = str(SCRIPTS / name)
        rows[f"{name} --help"] = ([sys.executable, script, "--help"], 0)
        rows[f"{name} --mistyped_option"] = ([sys.executable, script, "--mistyped_option", "1"], 2)
    return rows


def file_rows(model: str, lines: list[str], folder: Path) -> dict[str, tuple[list[str], int]]:
    """The rows of translating the first 1, 100 and 1,000 of `lines` (as many as there are), by each backend
    and by CTranslate2 alone; the export is made here, into `folder`."""
    translate = str(SCRIPTS / "translate.py")
    export = None
    if importlib.util.find_spec("ctranslate2") is not None:
        export = folder / "ct2"
        run_seconds([sys.executable, str(SCRIPTS / "export_ctranslate2.py"), "--model", model,
                     "--output_dir", str(export)])  # fmt: skip
    rows = {}
    for size in sorted({min(size, len(lines)) for size in FILE_SIZES}):
        label = f"{size:,} line{'s' if size > 1 else ''}"
        source = folder / f"{size}.txt"
        source.write_text("".join(line + "\n" for line in lines[:size]), encoding="utf-8")
        output = folder / f"{size}.out"
        common = ["--input", str(source), "--output", str(output), "--overwrite", "true"]
        rows[f"{label}, translate.py"] = ([sys.executable, translate, "--model", model, *common], 0)
        if export is not None:
            rows[f"{label}, translate.py --backend ctranslate2"] = (
                [sys.executable, translate, "--backend", "ctranslate2", "--model", str(export), *common],
                0,
            )
            alone = [str(export), str(source), str(folder / f"{size}.alone"), str(BATCH_SIZE)]
            rows[f"{label}, CTranslate2 alone"] = (
                [sys.executable, str(Path(__file__).with_name("ctranslate2_alone.py")), *alone],
                0,
            )
    return rows


@dataclass
class StartupArguments(Options):
    runs: int = field(default=5, metadata={"help": "Timed rounds after a warm-up round.", "range": ">= 1"})
    model: str | None = field(
        default=None, metadata={"help": "A saved model folder: also time translating --input with it."}
    )
    input: str | None = field(
        default=None,
        metadata={
            "help": f"A text file, {max(FILE_SIZES):,} lines or more, for the file rows (with --model)."
        },
    )
    only_files: bool = field(
        default=False, metadata={"help": "Leave out the --help and mistyped-option rows."}
    )
    output_file: str | None = field(default=None, metadata={"help": "Also write every timing here, as JSON."})
    overwrite: bool = field(default=False, metadata={"help": "Replace --output_file if it exists."})


def main() -> None:
    (args,) = parse_arguments(StartupArguments, description=__doc__)
    if bool(args.model) != bool(args.input):
        raise UsageError("The file rows need both --model and --input: give both, or neither.")
    if args.output_file:
        check_output_location(args.output_file, args.overwrite, "--output_file")  # before minutes of timing
    lines = []
    if args.input:
        check_model_location(args.model)
        lines = list(iter_text_lines(args.input, "--input file"))  # empty: no lines, so no file rows
    with tempfile.TemporaryDirectory() as folder:
        rows = {} if args.only_files else start_up_rows()
        if lines:
            rows.update(file_rows(args.model, lines, Path(folder)))
        samples = {name: [] for name in rows}
        for round_number in range(args.runs + 1):  # the first round warms the file cache, uncounted
            for name, (command, expect) in rows.items():
                seconds = run_seconds(command, expect)
                if round_number:
                    samples[name].append(seconds)
    print("| command | median (fastest-slowest) s |\n|---|---|")
    for name, values in samples.items():
        print(f"| {name} | {statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f}) |")
    if args.output_file:
        write_json(args.output_file, {"runs": args.runs, "seconds": samples})


if __name__ == "__main__":
    run_script(main)
