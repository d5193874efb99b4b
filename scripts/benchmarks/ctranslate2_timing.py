"""Time CTranslate2 models on the benchmark's decoding tasks, in a process that never imports torch, one
decoding at a time when asked, so that the benchmark interleaves these timings with its own rounds.

Run as a script by `harness.CTranslate2Timers`, never imported: torch and CTranslate2 each bring an OpenMP
runtime, and with both in one process CTranslate2's float32 decoding runs nearly 2x slower, so the timing must
not share a process with torch. Reads one JSON job line on stdin ({"models": {name: folder}, "threads",
"tasks": [{"name", "sources", "new_tokens", "num_beams"}]}), loads every model, prints "ready"; then, for each
line "MODEL TASK" it reads, decodes once and prints the seconds it took. Standard library + ctranslate2 only.
"""

import json
import sys
import time

import ctranslate2


def main() -> None:
    job = json.loads(sys.stdin.readline())
    translators = {
        name: ctranslate2.Translator(folder, device="cpu", intra_threads=job["threads"])
        for name, folder in job["models"].items()
    }
    tasks = {task["name"]: task for task in job["tasks"]}
    print("ready", flush=True)
    for line in sys.stdin:
        model, task_name = line.split()
        task = tasks[task_name]
        length = task["new_tokens"]
        start = time.perf_counter()
        # min = max length: every output is `length` tokens long, like min_new_tokens in generate().
        translators[model].translate_batch(
            task["sources"],
            beam_size=task["num_beams"],
            min_decoding_length=length,
            max_decoding_length=length,
            length_penalty=1.0,
        )
        print(time.perf_counter() - start, flush=True)


if __name__ == "__main__":
    main()
