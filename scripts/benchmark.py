"""Benchmark this model against MarianMTModel at identical sizes (random weights, fp32), interleaved in one
run; prints a table of our/Marian ratios and writes JSON. The measurements live in `benchmarks/harness.py`.

    python scripts/benchmark.py --shapes S base --repeats 3 --ctranslate2 --compile  # outputs/benchmark.json

--profile S prints torch.profiler tables (operators by self CPU time, with the share in matrix products) of a
training step and of greedy decoding at batch 1 and 32 for both models at that shape, instead of the
benchmark.
--ctranslate2 also exports our model to CTranslate2 (float32 and int8) and times it on the same decoding tasks
in a separate process that does not load torch (needs `pip install ctranslate2`), with CTranslate2's default
GEMM library and with MKL.
--compile also times both models' greedy generate() with a static cache and the decoding step compiled by
torch.compile (inductor; needs a C++ compiler; the warm-up round compiles, which takes minutes).
The run ends with the tables of docs/benchmarks.md in Markdown; --markdown_from JSON prints them again from a
saved run.
"""

import argparse
import json
from pathlib import Path

from transformers.utils import logging as hf_logging

# benchmarks/ sits beside this script, and a script's folder is on sys.path.
from benchmarks.harness import SHAPES, format_markdown, profile_shape, run_benchmark
from hf_vanilla_transformer.cli import ArgumentParser, run_script


def main() -> None:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--shapes",
        nargs="+",
        default=["S", "base"],
        choices=sorted(SHAPES),
        help="Model sizes to compare: S (d_model 256, 3+3 layers), base (512, 6+6), multi30k-recipe (256, "
        "3+3, d_ff 1024); tiny only checks that the harness runs.",
    )
    parser.add_argument("--repeats", type=int, default=3, help="Interleaved rounds; figures are medians.")
    parser.add_argument(
        "--ctranslate2", action="store_true", help="Also time our model exported to CTranslate2."
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="Also time greedy generate() with a static cache + torch.compile.",
    )
    parser.add_argument(
        "--profile", choices=sorted(SHAPES), help="Profile one shape instead of benchmarking."
    )
    parser.add_argument("--output", default="outputs/benchmark.json", help="JSON file for the results.")
    parser.add_argument(
        "--markdown_from",
        metavar="JSON",
        help="Print the tables of docs/benchmarks.md from an earlier run's JSON and stop.",
    )
    args = parser.parse_args()
    if args.markdown_from:
        try:
            print(format_markdown(json.loads(Path(args.markdown_from).read_text())))
        except (OSError, ValueError) as error:  # json.JSONDecodeError is a ValueError
            parser.error(f"--markdown_from {args.markdown_from}: {error}")
        return
    # generate() warns on every call that max_new_tokens overrides max_length.
    hf_logging.set_verbosity_error()
    if args.profile:
        print(profile_shape(args.profile))
        return
    results = run_benchmark(
        args.shapes, repeats=args.repeats, ctranslate2=args.ctranslate2, compile=args.compile
    )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(results, indent=2))
    print(f"\n{format_markdown(results)}\n\nWrote {args.output}")


if __name__ == "__main__":
    run_script(main)
