"""How the WMT14 recipe's data path grows with the corpus: each stage run as a user runs it, on a synthetic
corpus in the Hub's `wmt14` schema, timed, with its peak memory and its time to the first training step.

The corpus: parquet files with one `translation` column of `{"de", "en"}`, each line 1 to 4 Multi30k sentences
joined (2.5 on average: about 30 words a side, WMT14's length), drawn with a seed; validation and test splits
of newstest's size (3,000 and 3,003 lines). No download: Multi30k's files are read from a local folder.

Each stage is a separate command in a process of its own (`accelerate launch` for two processes); while it
runs, its processes (the command and everything it starts) are read every 0.2 s from `/proc` (Linux only):
- peak RSS: the largest sum over the processes of their resident memory. It counts memory-mapped Arrow pages,
  which the kernel can drop and read again from the data files;
- peak anonymous memory: the same for `RssAnon`, the memory the machine cannot page back to a file, the one
  that grows into an out-of-memory kill;
- disk: the size of everything the stages wrote so far (corpus, data, tokenized caches, runs);
- time to the first step: when the run's `loss_log.jsonl` (written at every logging step, here every step)
  first appears, from the command's start.

`scripts/benchmarks/benchmark_corpus.py` is the command line.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
# Sentences joined into one line, and how often: 2.5 Multi30k sentences (12 words each) make a WMT14 line.
SENTENCES_PER_LINE = (1, 2, 3, 4)
SENTENCE_WEIGHTS = (0.15, 0.35, 0.35, 0.15)
SHARD_ROWS = 500_000
HELD_OUT = {"validation": ("val", 3000), "test": ("test_2016_flickr", 3003)}
POLL_SECONDS = 0.2


def _lines(multi30k: Path, prefix: str, language: str) -> list[str]:
    with gzip.open(multi30k / f"{prefix}.{language}.gz", "rt", encoding="utf-8") as f:
        return [line.strip() for line in f]


def make_corpus(multi30k: str | Path, output_dir: str | Path, num_pairs: int, seed: int = 0) -> Path:
    """A corpus of `num_pairs` training pairs (and newstest-sized validation and test splits) in
    `output_dir/data/<split>-NNNNN-of-NNNNN.parquet`, written a shard at a time (bounded memory)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    multi30k, output_dir = Path(multi30k), Path(output_dir)
    (output_dir / "data").mkdir(parents=True, exist_ok=True)
    splits = {"train": ("train", num_pairs), **HELD_OUT}
    for offset, (split, (prefix, rows)) in enumerate(splits.items()):
        german, english = _lines(multi30k, prefix, "de"), _lines(multi30k, prefix, "en")
        rng = random.Random(seed + offset)
        shards = max(1, -(-rows // SHARD_ROWS))
        for shard in range(shards):
            pairs = []
            for _ in range(min(SHARD_ROWS, rows - shard * SHARD_ROWS)):
                (count,) = rng.choices(SENTENCES_PER_LINE, SENTENCE_WEIGHTS)
                picked = [rng.randrange(len(german)) for _ in range(count)]
                pairs.append(
                    {"de": " ".join(german[i] for i in picked), "en": " ".join(english[i] for i in picked)}
                )
            table = pa.table({"translation": pairs})
            pq.write_table(table, output_dir / "data" / f"{split}-{shard:05d}-of-{shards:05d}.parquet")
    return output_dir


def folder_size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def _children(pid: int) -> list[int]:
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            pass
    return children


def _tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        todo += _children(current)
    return pids


def _memory_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, RssAnon) of a process in KiB; (0, 0) once it is gone."""
    values = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon"):
                values[name] = int(value.split()[0])
    except OSError:
        return 0, 0
    return values.get("VmRSS", 0), values.get("RssAnon", 0)


@dataclass
class StageResult:
    stage: str
    pairs: int
    seconds: float
    peak_rss_mib: float
    peak_anon_mib: float
    first_step_seconds: float | None
    command: str
    disk_mib: float | None = None  # the size's whole folder after the stage: corpus, data, caches, runs


def run_stage(
    stage: str, pairs: int, command: list[str], log: Path, first_step_file: Path | None = None, env=None
) -> StageResult:
    """Run `command` to its end, its output into `log`, measuring it as the module says; a failing command
    raises with the end of its log."""
    start = time.perf_counter()
    first_step = None
    peak_rss = peak_anon = 0
    with log.open("w") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
        while process.poll() is None:
            sizes = [_memory_kib(pid) for pid in _tree(process.pid)]
            peak_rss = max(peak_rss, sum(rss for rss, _ in sizes))
            peak_anon = max(peak_anon, sum(anon for _, anon in sizes))
            if first_step is None and first_step_file is not None and first_step_file.exists():
                first_step = time.perf_counter() - start
            time.sleep(POLL_SECONDS)
    seconds = time.perf_counter() - start
    if process.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"stage {stage} failed ({process.returncode}): {' '.join(command)}\n{tail}")
    return StageResult(
        stage, pairs, round(seconds, 1), round(peak_rss / 1024), round(peak_anon / 1024),
        None if first_step is None else round(first_step, 1), " ".join(command),
    )  # fmt: skip


# The WMT14 base recipe, shrunk to its first steps on a CPU: a tiny model, 4 updates, a checkpoint every 2
# (for averaging), no evaluation during training, no dataloader workers (their memory would add to the
# process's without being the data path's).
TRAIN_OPTIONS = [
    "--preset", "transformer-tiny", "--max_steps", "4", "--save_steps", "2", "--save_total_limit", "3",
    "--logging_steps", "1", "--eval_strategy", "no", "--bf16", "false", "--use_cpu", "true",
    "--dataloader_num_workers", "0", "--num_proc", "2",
]  # fmt: skip


def _python(script: str, *args: str) -> list[str]:
    return [sys.executable, str(SCRIPTS / script), *args]


def _launch(script: str, *args: str) -> list[str]:
    return [
        sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
        str(SCRIPTS / script), *args,
    ]  # fmt: skip


def run_size(
    work_dir: Path, multi30k: Path, pairs: int, vocab_size: int, stages: list[str], translate_lines: int
) -> list[StageResult]:
    """Every stage of `stages` at one corpus size, in the recipe's order, in `work_dir/<pairs>/`."""
    folder = work_dir / str(pairs)
    folder.mkdir(parents=True, exist_ok=True)
    corpus, data, tokenizer = folder / "corpus", folder / "data", folder / "tokenizer"
    recipe = str(SCRIPTS / "recipes" / "wmt14_en_de_base.yaml")
    data_options = ["--dataset", str(data), "--tokenizer", str(tokenizer)]
    results = []

    def stage(name, command, first_step_file=None, env=None):
        print(f"[{pairs} pairs] {name} ...", flush=True)
        result = run_stage(name, pairs, command, folder / f"{name}.log", first_step_file, env)
        result.disk_mib = round(folder_size(folder) / 2**20)
        print(f"    {json.dumps(asdict(result))}", flush=True)
        results.append(result)

    start = time.perf_counter()
    make_corpus(multi30k, corpus, pairs)
    print(f"[{pairs} pairs] corpus made in {time.perf_counter() - start:.0f} s", flush=True)
    lang = ["--source_lang", "en", "--target_lang", "de"]
    stage(
        "prepare",
        _python("prepare_translation.py", "--dataset", str(corpus), *lang, "--output_dir", str(data)),
    )
    stage(
        "tokenizer",
        _python("train_tokenizer.py", "--task", "translation", "--vocab_size", str(vocab_size), "--dataset",
                str(data), "--output_dir", str(tokenizer)),
    )  # fmt: skip
    run = folder / "run-first"
    stage(
        "train: tokenize + 4 steps",
        _python("train.py", recipe, *data_options, *TRAIN_OPTIONS, "--output_dir", str(run)),
        run / "loss_log.jsonl",
    )
    run = folder / "run"
    stage(
        "train: 4 steps, data tokenized",
        _python("train.py", recipe, *data_options, *TRAIN_OPTIONS, "--output_dir", str(run)),
        run / "loss_log.jsonl",
    )
    if "two_processes" in stages:
        two = folder / "run-2proc"
        stage(
            "train: 2 processes, data tokenized",
            _launch("train.py", recipe, *data_options, *TRAIN_OPTIONS, "--output_dir", str(two)),
            two / "loss_log.jsonl",
            env={"OMP_NUM_THREADS": "1"},
        )
    if "streaming" in stages:
        streamed = folder / "run-streaming"
        stage(
            "train: streaming the parquet files",
            _python("train.py", recipe, "--dataset", str(corpus), "--tokenizer", str(tokenizer),
                    "--streaming", "true", *TRAIN_OPTIONS, "--output_dir", str(streamed)),
            streamed / "loss_log.jsonl",
        )  # fmt: skip
    averaged = run / "averaged"
    stage("average", _python("average_checkpoints.py", "--run_dir", str(run), "--last", "2", "--output_dir",
                             str(averaged)))  # fmt: skip
    stage(
        "evaluate: test, greedy",
        _python("evaluate_model.py", "--model", str(averaged), "--task", "translation", "--dataset",
                str(data), *lang, "--split", "test", "--num_beams", "1", "--output_file",
                str(folder / "eval.json")),
    )  # fmt: skip
    if "translate" in stages:
        source = folder / "test.en"
        with source.open("w", encoding="utf-8") as f:
            import pyarrow.parquet as pq

            rows = pq.read_table(next((corpus / "data").glob("test-*.parquet")))["translation"].to_pylist()
            lines = [row["en"] for row in rows]
            for index in range(translate_lines):
                f.write(lines[index % len(lines)] + "\n")
        stage(
            "translate: file, greedy",
            _python("translate.py", "--model", str(averaged), "--input", str(source), "--output",
                    str(folder / "test.de"), "--num_beams", "1"),
        )  # fmt: skip
    return results


STAGES = ("two_processes", "streaming", "translate")

# Decoders compared by `translate_speed`, each through scripts/translate.py: (name, folder, extra options).
NEW_TOKENS = 30


def translate_speed(work_dir: Path, shape_name: str = "S", lines: int = 2000, rounds: int = 2) -> list[dict]:
    """Sentences per second of scripts/translate.py on one file, for our model, `MarianMTModel` of the same
    size and our model's CTranslate2 export (float32 and int8), interleaved over `rounds`, medians kept.
    Random weights (`harness.build_models`), so every decoder writes exactly 30 new tokens a line
    (`--min_new_tokens` = `--max_new_tokens`), greedy, 32 lines a batch: equal work. The figure is the
    command's own (lines over the seconds it reports for translating, loading aside)."""
    import re
    import statistics

    import torch

    from benchmarks.harness import SHAPES, build_models, synthetic_tokenizer
    from hf_vanilla_transformer.interop.ctranslate2_export import convert_to_ctranslate2
    from hf_vanilla_transformer.saving import save_model_folder

    folder = work_dir / f"translate-speed-{shape_name}"
    folder.mkdir(parents=True, exist_ok=True)
    shape = SHAPES[shape_name]
    models = build_models(shape)
    tokenizer = synthetic_tokenizer(shape.vocab_size)
    save_model_folder(models["ours"].eval(), tokenizer, folder / "ours")
    models["marian"].eval().save_pretrained(folder / "marian")
    tokenizer.save_pretrained(folder / "marian")
    decoders = {"ours": (folder / "ours", []), "marian": (folder / "marian", [])}
    if _importable("ctranslate2"):
        for quantization in ("float32", "int8"):
            exported = convert_to_ctranslate2(folder / "ours", folder / f"ct2-{quantization}", quantization)
            decoders[f"ctranslate2 {quantization}"] = (exported, ["--backend", "ctranslate2"])
    generator = torch.Generator().manual_seed(0)
    words = torch.randint(4, shape.vocab_size, (lines, 24), generator=generator).tolist()
    source = folder / "source.txt"
    source.write_text("".join(" ".join(f"w{i}" for i in row) + "\n" for row in words))
    options = ["--num_beams", "1", "--min_new_tokens", str(NEW_TOKENS), "--max_new_tokens", str(NEW_TOKENS),
               "--batch_size", "32", "--progress", "false", "--overwrite"]  # fmt: skip
    rates: dict[str, list[float]] = {name: [] for name in decoders}
    for round_number in range(rounds):
        for name, (model, extra) in decoders.items():
            log = folder / f"{name.replace(' ', '-')}-{round_number}.log"
            output = folder / f"{name.replace(' ', '-')}.out"
            command = _python("translate.py", "--model", str(model), "--input", str(source), "--output",
                              str(output), *options, *extra)  # fmt: skip
            run_stage(f"translate {name}", lines, command, log)
            seconds = float(re.search(r"Translated \d+ lines in ([\d.]+) s", log.read_text())[1])
            rates[name].append(lines / seconds)
    return [
        {
            "decoder": name,
            "shape": shape_name,
            "lines": lines,
            "lines_per_second": round(statistics.median(r), 1),
        }
        for name, r in rates.items()
    ]


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def markdown_table(results: list[StageResult]) -> str:
    """One row per stage: each size's time, time to the first step and peak memories, and the ratios of the
    largest size to the smallest."""
    sizes = sorted({result.pairs for result in results})
    by = {(result.stage, result.pairs): result for result in results}
    stages = list(dict.fromkeys(result.stage for result in results))
    header = ["stage"]
    for size in sizes:
        header += [f"{size:,}: s", "first step s", "peak RSS MiB", "peak anon MiB"]
    if len(sizes) > 1:
        header += ["time ×", "anon ×"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for stage in stages:
        row = [stage]
        for size in sizes:
            result = by.get((stage, size))
            if result is None:
                row += ["", "", "", ""]
                continue
            first = "" if result.first_step_seconds is None else f"{result.first_step_seconds:.0f}"
            row += [
                f"{result.seconds:.0f}",
                first,
                f"{result.peak_rss_mib:,.0f}",
                f"{result.peak_anon_mib:,.0f}",
            ]
        if len(sizes) > 1:
            small, large = by.get((stage, sizes[0])), by.get((stage, sizes[-1]))
            if small and large:
                row += [
                    f"{large.seconds / small.seconds:.1f}",
                    f"{large.peak_anon_mib / small.peak_anon_mib:.2f}",
                ]
            else:
                row += ["", ""]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def disk_table(results: list[StageResult]) -> str:
    """The disk used after each stage (everything written so far), per size."""
    sizes = sorted({result.pairs for result in results})
    by = {(result.stage, result.pairs): result for result in results}
    lines = ["| after stage | " + " | ".join(f"{size:,} pairs: disk MiB" for size in sizes) + " |"]
    lines.append("|" + "---|" * (len(sizes) + 1))
    for stage in dict.fromkeys(result.stage for result in results):
        cells = [by[(stage, size)].disk_mib if (stage, size) in by else None for size in sizes]
        lines.append(f"| {stage} | " + " | ".join("" if c is None else f"{c:,.0f}" for c in cells) + " |")
    return "\n".join(lines)


def speed_table(rows: list[dict]) -> str:
    ours = next(row["lines_per_second"] for row in rows if row["decoder"] == "ours")
    lines = ["| decoder (through translate.py) | lines/s | ÷ ours |", "|---|---|---|"]
    for row in rows:
        lines.append(
            f"| {row['decoder']} | {row['lines_per_second']:.1f} | {row['lines_per_second'] / ours:.2f} |"
        )
    return "\n".join(lines)


def tokenizer_library_speed(tokenizer_dir: Path, data_dir: Path, pairs: int = 200_000) -> dict:
    """Sentences per second of the `tokenizers` library alone (`Tokenizer.encode_batch`, its own threads, one
    per core) on the first `pairs` training pairs of a prepared data set, both sides: the speed the
    tokenization stage is compared with."""
    from tokenizers import Tokenizer

    from hf_vanilla_transformer.data.files import load_saved_dataset
    from hf_vanilla_transformer.saving import check_files_parse

    check_files_parse(tokenizer_dir)  # a tokenizer.json cut short is named
    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    train = load_saved_dataset(data_dir)["train"]
    rows = train.select(range(min(pairs, train.num_rows)))["translation"]
    texts = [pair[language] for pair in rows for language in ("en", "de")]
    start = time.perf_counter()
    for begin in range(0, len(texts), 10_000):
        tokenizer.encode_batch(texts[begin : begin + 10_000])
    seconds = time.perf_counter() - start
    return {
        "sentences": len(texts),
        "seconds": round(seconds, 1),
        "sentences_per_second": round(len(texts) / seconds),
    }
