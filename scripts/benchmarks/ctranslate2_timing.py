"""Time a CTranslate2 model on the benchmark's decoding tasks, in a process that never imports torch.

Run as a script by `harness.ctranslate2_throughput`, never imported: torch and CTranslate2 each bring an
OpenMP runtime, and with both in one process CTranslate2's float32 decoding runs nearly 2x slower, so the
timing must not share a process with torch. Reads a JSON job on stdin, prints a JSON result on stdout.
Standard library + ctranslate2 only.
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
            # min = max length: every output is `length` tokens long, like min_new_tokens in generate().
            translator.translate_batch(
                sources,
                beam_size=beams,
                min_decoding_length=length,
                max_decoding_length=length,
                length_penalty=1.0,
            )
            return time.perf_counter() - start

        run()  # warm-up
        seconds = statistics.median(run() for _ in range(job["repeats"]))
        results[task["name"]] = len(sources) * length / seconds
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
