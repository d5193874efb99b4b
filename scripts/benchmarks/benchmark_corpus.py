"""How the WMT14 recipe's data path grows with the corpus: every stage (prepare, tokenizer, tokenization and
the first training steps, two processes, streaming, averaging, evaluation, translating a file) run as a user
runs it on a synthetic corpus of WMT14's schema and length, at each size given, timed, with its peak RSS, peak
anonymous memory and time to the first training step. The measurements live in
`scripts/benchmarks/corpus_scale.py`; docs/benchmarks.md has the table.

    python scripts/benchmarks/benchmark_corpus.py --multi30k path/to/multi30k --sizes 450000 4500000

(25 minutes on 2 cores). --multi30k is a folder of Multi30k's raw files (train.de.gz, ...), whose sentences
the corpus is made of. Run it alone on the machine: stages run beside other work measure that work too.
"""

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

# Run from any folder: the `benchmarks` package is in scripts/, this folder's parent.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.corpus_scale import (
    STAGES,
    StageResult,
    disk_table,
    markdown_table,
    run_size,
    speed_table,
    tokenizer_library_speed,
    translate_speed,
)
from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.errors import MissingPathError, UsageError
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.outputs import check_output_location, write_json
from hf_vanilla_transformer.readers import count_text_lines, read_json


@dataclass
class CorpusBenchmarkArguments(Options):
    multi30k: str | None = field(
        default=None, metadata={"help": "Folder of Multi30k's raw files, e.g. train.de.gz (the sentences)."}
    )
    sizes: list[int] = field(
        default_factory=lambda: [450_000, 4_500_000],
        metadata={"help": "Training pairs of each corpus.", "range": ">= 1"},
    )
    vocab_size: int = field(
        default=37_000, metadata={"help": "The recipe's joint BPE vocabulary.", "range": ">= 1"}
    )
    stages: list[str] = field(
        default_factory=lambda: list(STAGES),
        metadata={"help": "Stages beyond the recipe's own.", "choices": list(STAGES)},
    )
    translate_lines: int = field(
        default=3003, metadata={"help": "Lines of the file the translate stage reads.", "range": ">= 1"}
    )
    output_dir: str = field(
        default="outputs/corpus_benchmark",
        metadata={"help": "Where the corpora, data, runs and logs go, and results.json."},
    )
    overwrite: bool = field(default=False, metadata={"help": "Replace --output_dir (an earlier run's)."})
    translate_speed: bool = field(
        default=True,
        metadata={
            "help": "Also time translate.py on one file: our model, MarianMTModel of the same size and the "
            "CTranslate2 export (shape S, random weights, 30 new tokens a line)."
        },
    )
    library_speed_of: str | None = field(
        default=None,
        metadata={
            "help": "Print the tokenizers library's own sentences/s on an earlier run's folder of one size "
            "(e.g. outputs/corpus_benchmark/4500000), what the tokenization stage compares with, and stop."
        },
    )
    markdown_from: str | None = field(
        default=None, metadata={"help": "Print the table from an earlier run's results.json and stop."}
    )


def main() -> None:
    (args,) = parse_arguments(CorpusBenchmarkArguments, description=__doc__)
    if args.markdown_from:
        rows = read_json(args.markdown_from, "Run the benchmark again", "--markdown_from file")
        try:
            results = [StageResult(**row) for row in rows]
        except (ValueError, TypeError) as error:  # JSON of another shape
            raise UsageError(
                f"--markdown_from {args.markdown_from}: not this benchmark's results ({error})"
            ) from None
        print(f"{markdown_table(results)}\n\n{disk_table(results)}")
        return
    if args.library_speed_of:
        folder = Path(args.library_speed_of)
        if not (folder / "tokenizer" / "tokenizer.json").is_file():
            raise MissingPathError(f"--library_speed_of {folder} holds no tokenizer/: give a size's folder.")
        print(json.dumps(tokenizer_library_speed(folder / "tokenizer", folder / "data")))
        return
    if args.multi30k is None:
        raise UsageError(
            "--multi30k is needed: a folder of Multi30k's raw files (train.de.gz, val.de.gz, ...)."
        )
    if not (Path(args.multi30k) / "train.de.gz").is_file():
        raise MissingPathError(f"--multi30k {args.multi30k} has no train.de.gz: give Multi30k's raw files.")
    for path in sorted(Path(args.multi30k).glob("*.gz")):  # each read whole before minutes of work
        count_text_lines(path, "--multi30k file")
    check_output_location(args.output_dir, args.overwrite)
    output_dir = Path(args.output_dir)
    if args.overwrite and output_dir.exists():
        import shutil

        shutil.rmtree(output_dir)
    results = []
    for size in args.sizes:
        results += run_size(
            output_dir, Path(args.multi30k), size, args.vocab_size, args.stages, args.translate_lines
        )
        write_json(output_dir / "results.json", [asdict(r) for r in results])
    print(f"\n{markdown_table(results)}\n\n{disk_table(results)}\n\nWrote {output_dir / 'results.json'}")
    if args.translate_speed:
        rows = translate_speed(output_dir)
        write_json(output_dir / "translate_speed.json", rows)
        print(f"\n{speed_table(rows)}\n\nWrote {output_dir / 'translate_speed.json'}")


if __name__ == "__main__":
    run_script(main)
