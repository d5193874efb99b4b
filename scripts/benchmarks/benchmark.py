"""Benchmark this model against MarianMTModel at identical sizes (random weights, float32 or bf16 autocast),
interleaved in one run on one device (--device: cuda where there is one, else cpu); prints a table of
our/Marian ratios and writes JSON that names the device. The measurements live in
`scripts/benchmarks/harness.py`.

    python scripts/benchmarks/benchmark.py --shapes S base --repeats 3 --ctranslate2 --compile

writes outputs/benchmark.json; an existing --output_file is replaced only with --overwrite.

--profile S prints torch.profiler tables (operators by self CPU time, with the share in matrix products) of a
training step, of greedy decoding at batch 1 and 32 and of beam-4 decoding at batch 32 for both models at that
shape, instead of the benchmark.
--ctranslate2 also exports our model to CTranslate2 (float32 and int8) and times it on the same decoding tasks
in a separate process that does not load torch (needs `pip install ctranslate2`), with CTranslate2's default
GEMM library and with MKL; on the CPU only, as are the --profile tables.
--compile also times both models' greedy generate() with a static cache and the decoding step compiled by
torch.compile (inductor; needs a C++ compiler; the warm-up round compiles, which takes minutes).
The run ends with the tables of docs/benchmarks.md in Markdown; --markdown_from JSON prints them again from a
saved run.
"""

import sys
from dataclasses import dataclass, field
from pathlib import Path

from transformers.utils import logging as hf_logging

# Run from any folder: the `benchmarks` package is in scripts/, this folder's parent.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import (
    MIXED_PRECISIONS,
    SHAPES,
    benchmark_device,
    format_markdown,
    profile_shape,
    run_benchmark,
)
from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.outputs import check_output_location, write_json
from hf_vanilla_transformer.readers import read_json


@dataclass
class BenchmarkArguments(Options):
    shapes: list[str] = field(
        default_factory=lambda: ["S", "base"],
        metadata={
            "help": "Model sizes to compare: S (d_model 256, 3+3 layers), base (512, 6+6), multi30k-recipe "
            "(256, 3+3, d_ff 1024); tiny only checks that the harness runs.",
            "choices": sorted(SHAPES),
        },
    )
    repeats: int = field(
        default=3, metadata={"help": "Interleaved rounds; figures are medians.", "range": ">= 1"}
    )
    ctranslate2: bool = field(
        default=False, metadata={"help": "Also time our model exported to CTranslate2."}
    )
    compile: bool = field(
        default=False, metadata={"help": "Also time greedy generate() with a static cache + torch.compile."}
    )
    device: str | None = field(
        default=None,
        metadata={"help": "Where to run: cpu, cuda or cuda:N. Default: cuda where there is one, else cpu."},
    )
    mixed_precision: str = field(
        default="no",
        metadata={
            "help": "no (float32), or bf16: torch.autocast to bfloat16 around every forward pass (for GPUs: "
            "on the CPUs docs/benchmarks.md was measured on, bfloat16 matrix products were no faster). The "
            "matmul peak is measured in the same dtype.",
            "choices": list(MIXED_PRECISIONS),
        },
    )
    profile: str | None = field(
        default=None,
        metadata={
            "help": "Profile one shape on the CPU instead of benchmarking.",
            "choices": sorted(SHAPES),
        },
    )
    output_file: str = field(
        default="outputs/benchmark.json", metadata={"help": "JSON file for the results."}
    )
    overwrite: bool = field(
        default=False, metadata={"help": "Replace --output_file if it exists (an earlier run's results)."}
    )
    markdown_from: str | None = field(
        default=None,
        metadata={"help": "Print the tables of docs/benchmarks.md from an earlier run's JSON file and stop."},
    )


def main() -> None:
    (args,) = parse_arguments(BenchmarkArguments, description=__doc__)
    if args.markdown_from:
        results = read_json(args.markdown_from, "Run the benchmark again", "--markdown_from file")
        try:
            print(format_markdown(results))
        except (KeyError, TypeError, ValueError) as error:  # JSON of another shape
            raise UsageError(
                f"--markdown_from {args.markdown_from}: not this benchmark's results ({error})"
            ) from None
        return
    # generate() warns on every call that max_new_tokens overrides max_length.
    hf_logging.set_verbosity_error()
    if args.profile:
        if args.device not in (None, "cpu"):
            raise UsageError(
                f"--profile shows CPU operator time only, so --device {args.device} would not be profiled: "
                "leave out --device."
            )
        print(profile_shape(args.profile))
        return
    device = benchmark_device(args.device)  # a device this machine lacks is refused before any work
    check_output_location(args.output_file, args.overwrite, "--output_file")  # before minutes of timing
    results = run_benchmark(
        args.shapes,
        repeats=args.repeats,
        ctranslate2=args.ctranslate2,
        compile=args.compile,
        device=device,
        mixed_precision=args.mixed_precision,
    )
    Path(args.output_file).parent.mkdir(parents=True, exist_ok=True)
    write_json(args.output_file, results)
    print(f"\n{format_markdown(results)}\n\nWrote {args.output_file}")


if __name__ == "__main__":
    run_script(main)
