"""Time a CTranslate2 model on the benchmark's decoding tasks, in a process that never imports torch.

Run as a script by `benchmarking.ctranslate2_throughput` (running the file does not execute the package's
__init__, which would load torch: with two OpenMP runtimes in one process CTranslate2's float32 decoding ran
~1.85x slower here). Reads a JSON job on stdin, prints a JSON result on stdout. Standard library + ctranslate2.
"""

import json
import statistics
import sys
import time

import ctranslate2


def main() -> None:
    job = json.load(sys.stdin)
    translator = ctranslate2.Translator(job["model_dir"], device="cpu", intra_threads=job["threads"])
    results = {}
    for task in job["tasks"]:
        sources = task["sources"]
        length = task["new_tokens"]

        def run(sources=sources, beams=task["num_beams"], length=length) -> float:
            start = time.perf_counter()
            # min = max length: every output has exactly `length` tokens, as min_new_tokens does for generate().
            translator.translate_batch(
                sources, beam_size=beams, min_decoding_length=length, max_decoding_length=length, length_penalty=1.0
            )
            return time.perf_counter() - start

        run()  # warm-up
        seconds = statistics.median(run() for _ in range(job["repeats"]))
        results[task["name"]] = len(sources) * length / seconds
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
