r"""Check this package on a machine with two or more CUDA GPUs: what the tests, on CPUs, cannot. Four checks
(meant to take about ten minutes; not yet timed on GPUs), a line each (PASS or FAIL, and why), then a summary;
each check's runs and logs stay in its folder under --output_dir.

  bf16_sdpa  the shipped Multi30k model on one GPU: its logits in bfloat16 through SDPA against float32
             through the eager kernel (under autocast, as training runs, and with bfloat16 weights), within
             the tolerances below; and generate() (beam 4, with its cache) in bfloat16.
  ddp        scripts/train.py on 2 GPUs under the shipped multi_gpu.yaml: the paper's Multi30k recipe shrunk
             to the tests' fixture and a tiny model (20 steps, validation by BLEU at the end).
  fsdp       the same under fsdp.yaml (FSDP2); the final folder and the last checkpoint load with
             from_pretrained, with one embedding matrix.
  wmt14      bash scripts/recipes/wmt14_en_de.sh base on 2 GPUs: the base model, 30 steps, on a slice of the
             Hub's wmt/wmt14 (the tests' fixture in its layout when the Hub cannot be reached), through
             averaging and both BLEU figures of newstest2013 and newstest2014 (slices too).

    python scripts/benchmarks/check_gpus.py
    python scripts/benchmarks/check_gpus.py --checks ddp,fsdp --output_dir outputs/check_gpus-2 --overwrite

Tolerances of bf16_sdpa, against float32 and the eager kernel: float32 through SDPA within 1e-3 of a logit;
bfloat16, a mean difference of at most 0.05, a largest one of at most 0.5, and the same most likely token at
98 % of the positions or more: bounds some ten times what bfloat16 rounding gave on a CPU for the same model
and sentences, room for other kernels but not for a wrong mask. generate() passes if every translation is text
and at least 24 of the 32 equal float32's: bfloat16 may flip a close choice of the beam, a broken path changes
most of them. On GPUs without bfloat16 (before Ampere) the checks run in float16.

Exit status: 0 if every check passed, 1 if one failed, 2 without two GPUs (a one-line refusal).
"""

import gzip
import json
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.errors import ExistingPathError, UsageError
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.outputs import check_not_a_file, write_json

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_MODEL = ROOT / "model_cards" / "vanilla-transformer-multi30k-de-en"
FIXTURE = ROOT / "tests" / "fixtures" / "multi30k"  # 300 training pairs of Multi30k, 50 validation, 50 test
CONFIGS = ROOT / "scripts" / "accelerate_configs"
MULTI30K_RECIPE = ROOT / "scripts" / "recipes" / "multi30k_de_en_paper.yaml"
WMT14_SCRIPT = ROOT / "scripts" / "recipes" / "wmt14_en_de.sh"

FLOAT32_SDPA_TOLERANCE = 1e-3  # largest |difference| of a logit
LOW_PRECISION_TOLERANCE = {"mean": 0.05, "max": 0.5, "top1": 0.98}
SENTENCES = 32  # of the fixture's test split, for bf16_sdpa
SAME_TRANSLATIONS = 24  # of SENTENCES
WMT14_EVAL_SENTENCES = 64  # of newstest2013 and newstest2014 in the slice: evaluate_model.py decodes them


@dataclass
class CheckArguments(Options):
    output_dir: str = field(
        default="outputs/check_gpus",
        metadata={"help": "Where each check keeps its runs and log (a subfolder)."},
    )
    checks: str = field(
        default="bf16_sdpa,ddp,fsdp,wmt14",
        metadata={"help": "The checks to run, comma-separated: bf16_sdpa, ddp, fsdp, wmt14."},
    )
    wmt14_train_pairs: int = field(
        default=20_000,
        metadata={
            "help": "Training pairs of the Hub's wmt/wmt14 de-en to stream for the wmt14 check.",
            "range": ">= 1",
        },
    )
    hub_timeout: int = field(
        default=180,
        metadata={
            "help": "Seconds to wait for the Hub's slice before using the local fixture instead.",
            "range": "> 0",
        },
    )
    overwrite: bool = field(
        default=False, metadata={"help": "Replace the folders of earlier checks under --output_dir."}
    )


@dataclass
class Machine:
    """Where the checks run: a device, the mixed precision (bf16, fp16, or no), and options appended to every
    training command."""

    device: str = "cuda:0"
    precision: str = "bf16"
    train_options: tuple[str, ...] = ()

    @property
    def dtype(self) -> torch.dtype:
        return torch.float16 if self.precision == "fp16" else torch.bfloat16

    def launcher(self, config: str) -> list[str]:
        """`accelerate launch` on 2 processes with a shipped config, on a port of its own."""
        return [sys.executable, "-m", "accelerate.commands.launch",
                "--config_file", str(CONFIGS / f"{config}.yaml"), "--num_processes", "2",
                "--mixed_precision", self.precision, "--main_process_port", str(free_port())]  # fmt: skip

    def precision_options(self) -> list[str]:
        if self.precision == "no":
            return []
        return ["--bf16", "false", "--fp16", "true"] if self.precision == "fp16" else ["--bf16", "true"]


class CheckFailed(Exception):
    """What a check found wrong, in one line."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def require_gpus() -> str:
    """The GPUs' description, or the one-line refusal when there are fewer than two."""
    count = torch.cuda.device_count()
    if count < 2:
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        raise UsageError(
            f"check_gpus.py needs 2 or more CUDA GPUs; torch {torch.__version__} ({build}) sees {count}."
        )
    name = torch.cuda.get_device_name(0)
    return f"{count} x {name}, torch {torch.__version__}, CUDA {torch.version.cuda}"


def run_logged(command: list[str], log: Path, timeout: int, **kwargs) -> subprocess.CompletedProcess:
    """Run `command`, appending it and its output to `log`; a timeout or a failure is a `CheckFailed`
    naming the command's last error line. The command runs in a session of its own, so that a timeout ends
    the training processes the launcher started too, and none is left holding a GPU."""
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
        **kwargs,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        with log.open("a") as out:
            out.write(f"$ {' '.join(command)}\n(timed out after {timeout} s)\n{stdout}\n{stderr}\n")
        raise CheckFailed(f"timed out after {timeout} s (see {log})") from None
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n{stdout}\n{stderr}\n")
    if process.returncode != 0:
        raise CheckFailed(f"exit status {process.returncode}: {last_error(stderr)} (see {log})")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def last_error(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line or line.startswith("error:")]
    return ((errors or lines or ["no output"])[-1])[:300]


def fixture_lines(split: str, language: str, count: int) -> list[str]:
    with gzip.open(FIXTURE / f"{split}.{language}.gz", "rt", encoding="utf-8") as lines:
        return [line.rstrip("\n") for line in lines][:count]


def logit_differences(logits: torch.Tensor, reference: torch.Tensor, keep: torch.Tensor) -> dict:
    difference = (logits - reference)[keep].abs()
    top1 = (logits.argmax(-1) == reference.argmax(-1))[keep].float().mean()
    return {"mean": float(difference.mean()), "max": float(difference.max()), "top1": float(top1)}


def check_bf16_sdpa(folder: Path, machine: Machine, args: CheckArguments) -> str:
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from hf_vanilla_transformer.saving import check_files_parse

    check_files_parse(SHIPPED_MODEL)  # a checkout's file cut short is named, not a library's traceback

    def load(attention: str, dtype: torch.dtype = torch.float32):
        model = AutoModelForSeq2SeqLM.from_pretrained(
            SHIPPED_MODEL, attn_implementation=attention, dtype=dtype
        )
        return model.to(machine.device).eval()

    sources = fixture_lines("test_2016_flickr", "de", SENTENCES)
    references = fixture_lines("test_2016_flickr", "en", SENTENCES)
    tokenizer = AutoTokenizer.from_pretrained(SHIPPED_MODEL)
    batch = tokenizer(sources, text_target=references, return_tensors="pt", padding=True).to(machine.device)
    keep = batch["labels"].ne(tokenizer.pad_token_id)  # teacher-forced positions that are not padding
    batch["labels"] = batch["labels"].masked_fill(~keep, -100)
    eager, sdpa, low = load("eager"), load("sdpa"), load("sdpa", machine.dtype)
    device_type = torch.device(machine.device).type
    with torch.no_grad():
        reference = eager(**batch).logits.float()
        float32_sdpa = sdpa(**batch).logits.float()
        with torch.autocast(device_type, dtype=machine.dtype):
            autocast = sdpa(**batch).logits.float()
        low_weights = low(**batch).logits.float()
        inputs = tokenizer(sources, return_tensors="pt", padding=True).to(machine.device)
        float32_text = tokenizer.batch_decode(eager.generate(**inputs), skip_special_tokens=True)
        low_text = tokenizer.batch_decode(low.generate(**inputs), skip_special_tokens=True)

    report = {
        "float32 sdpa": logit_differences(float32_sdpa, reference, keep),
        f"{machine.precision} autocast sdpa": logit_differences(autocast, reference, keep),
        f"{machine.precision} weights sdpa": logit_differences(low_weights, reference, keep),
        "translations": {"float32 eager": float32_text, f"{machine.precision} sdpa": low_text},
    }
    write_json(folder / "report.json", report, indent=1)
    if report["float32 sdpa"]["max"] > FLOAT32_SDPA_TOLERANCE:
        raise CheckFailed(
            f"float32 through SDPA differs from eager by {report['float32 sdpa']['max']:.2e} of a logit "
            f"(tolerance {FLOAT32_SDPA_TOLERANCE:g})"
        )
    for name in (f"{machine.precision} autocast sdpa", f"{machine.precision} weights sdpa"):
        found, bound = report[name], LOW_PRECISION_TOLERANCE
        if found["mean"] > bound["mean"] or found["max"] > bound["max"] or found["top1"] < bound["top1"]:
            raise CheckFailed(
                f"{name}: mean |difference| {found['mean']:.3f}, max {found['max']:.3f}, same top token "
                f"{found['top1']:.1%} (tolerance {bound['mean']}, {bound['max']}, {bound['top1']:.0%})"
            )
    same = sum(ours == theirs for ours, theirs in zip(low_text, float32_text, strict=True))
    if not all(text.strip() for text in low_text) or same < SAME_TRANSLATIONS:
        raise CheckFailed(
            f"generate() in {machine.precision}: {same} of {SENTENCES} translations equal float32's (at "
            f"least {SAME_TRANSLATIONS} expected), empty ones: {sum(not text.strip() for text in low_text)}"
        )
    autocast_found, weights_found = (
        report[f"{machine.precision} {kind} sdpa"] for kind in ("autocast", "weights")
    )
    top1 = min(autocast_found["top1"], weights_found["top1"])
    return (
        f"largest logit difference {report['float32 sdpa']['max']:.0e} (float32), "
        f"{autocast_found['max']:.3f} (autocast), {weights_found['max']:.3f} ({machine.precision} weights); "
        f"same top token {top1:.1%}; generate() {same}/{SENTENCES} translations as float32's"
    )


def tiny_data(folder: Path) -> Path:
    """The tests' tiny translation data (tests/conftest.py): the fixture as a DatasetDict and a joint BPE
    tokenizer of 400 tokens trained on it; made once for the ddp and fsdp checks."""
    from hf_vanilla_transformer.tasks.translation.data import load_parallel_text
    from hf_vanilla_transformer.tokenization import train_bpe_tokenizer

    if not (folder / "tokenizer" / "tokenizer.json").exists():
        shutil.rmtree(folder, ignore_errors=True)
        load_parallel_text(FIXTURE, "de", "en").save_to_disk(folder / "data")
        train_bpe_tokenizer(
            [FIXTURE / "train.de.gz", FIXTURE / "train.en.gz"],
            vocab_size=400,
            show_progress=False,
            model_max_length=128,
            output_dir=folder / "tokenizer",
        )
    return folder


def tiny_training(data: Path, out: Path, machine: Machine) -> list[str]:
    """scripts/train.py on the paper's Multi30k recipe shrunk to the fixture, as tests/test_scale_out.py runs
    it (20 updates, no dropout, a loss every 5 steps, a checkpoint every 10), with validation (greedy BLEU on
    8 pairs) at the end: generation under the engine is part of what is checked."""
    return [str(ROOT / "scripts" / "train.py"), str(MULTI30K_RECIPE),
            "--dataset", str(data / "data"), "--tokenizer", str(data / "tokenizer"),
            "--preset", "transformer-tiny", "--max_source_length", "96", "--max_target_length", "96",
            "--config_overrides", '{"dropout": 0.0}',
            "--max_tokens", "200", "--max_steps", "20", "--warmup_steps", "10", "--lr_scale", "0.2",
            "--logging_steps", "5", "--save_steps", "10", "--eval_strategy", "steps", "--eval_steps", "20",
            "--max_eval_examples", "8", "--generation_max_length", "12", "--load_best_model_at_end", "false",
            "--dataloader_num_workers", "0", *machine.precision_options(), "--output_dir", str(out),
            *machine.train_options]  # fmt: skip


def loss_log(run: Path) -> list[dict]:
    path = run / "loss_log.jsonl"
    if not path.exists():
        raise CheckFailed(f"no loss log in {run}")
    return [json.loads(line) for line in path.read_text().splitlines()]


def check_loaded_folder(folder: Path, machine: Machine) -> tuple[int, int]:
    """Load a saved folder with from_pretrained and translate two sentences with it on the GPU; returns the
    vocabulary size and width, for the caller's checks of the weights."""
    from hf_vanilla_transformer.saving import load_model_folder

    model, tokenizer = load_model_folder(folder)
    model.to(machine.device)
    inputs = tokenizer(fixture_lines("val", "de", 2), return_tensors="pt", padding=True).to(machine.device)
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=8)
    if output.shape[0] != 2:
        raise CheckFailed(f"generate() with {folder} returned {output.shape[0]} sequences for 2 sentences")
    return model.config.vocab_size, model.config.d_model


def check_training(config: str, folder: Path, machine: Machine, args: CheckArguments) -> str:
    from safetensors.torch import load_file

    data = tiny_data(Path(args.output_dir) / "tiny-data")
    run = folder / "run"
    result = run_logged(
        [*machine.launcher(config), *tiny_training(data, run, machine)],
        folder / "log.txt",
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    saved = result.stdout.count("Saved the trained model to")
    if saved != 1:
        raise CheckFailed(f"'Saved the trained model to' printed {saved} times: the main process saves, once")
    records = loss_log(run)
    losses = [(r["step"], r["loss"]) for r in records if "loss" in r]
    bleu = [r["eval_bleu"] for r in records if "eval_bleu" in r]
    if [step for step, _ in losses] != [5, 10, 15, 20]:
        raise CheckFailed(f"losses logged at steps {[step for step, _ in losses]}, not 5, 10, 15, 20")
    if not losses[-1][1] < losses[0][1] - 0.5:  # what the tests see on 2 CPU processes
        raise CheckFailed(f"the loss did not fall: {[round(loss, 3) for _, loss in losses]}")
    if len(bleu) != 1 or not 0 <= bleu[0] <= 100:
        raise CheckFailed(f"validation at step 20 logged BLEU {bleu}")
    folders = [run / "final"] + ([run / "checkpoint-20"] if config == "fsdp" else [])
    for saved_folder in folders:
        vocab_size, d_model = check_loaded_folder(saved_folder, machine)
        weights = load_file(saved_folder / "model.safetensors")
        embeddings = [
            name for name, tensor in weights.items() if tuple(tensor.shape) == (vocab_size, d_model)
        ]
        if len(embeddings) != 1:
            raise CheckFailed(
                f"{saved_folder} holds {len(embeddings)} embedding matrices, not one: {embeddings}"
            )
    return (
        f"loss {losses[0][1]:.2f} -> {losses[-1][1]:.2f} in 20 steps, BLEU at step 20 {bleu[0]:.1f}; "
        + " and ".join(f.name for f in folders)
        + " load and translate, one embedding matrix"
    )


def write_wmt14_layout(rows: dict[str, list[dict]], folder: Path) -> None:
    """Pairs in the Hub's wmt14 layout: `de-en/<split>-00000-of-00001.parquet`, a `translation` column of
    {de, en}, as tests/test_wmt14_recipe.py lays out its fixture."""
    from datasets import Dataset, Features, Translation

    features = Features({"translation": Translation(languages=["de", "en"])})
    (folder / "de-en").mkdir(parents=True, exist_ok=True)
    for split, pairs in rows.items():
        Dataset.from_dict({"translation": pairs}, features=features).to_parquet(
            folder / "de-en" / f"{split}-00000-of-00001.parquet"
        )


def fetch_wmt14_slice(folder: str, train_pairs: int, log: str) -> None:
    """The first pairs of the Hub's wmt/wmt14 de-en, streamed (nothing else is downloaded); run in a process
    of its own, its output into `log`, so that an unreachable Hub can be given up on."""
    from datasets import load_dataset

    with open(log, "a") as out:
        os.dup2(out.fileno(), sys.stdout.fileno())
        os.dup2(out.fileno(), sys.stderr.fileno())

    counts = {"train": train_pairs, "validation": WMT14_EVAL_SENTENCES, "test": WMT14_EVAL_SENTENCES}
    rows = {
        split: [
            row["translation"]
            for row in load_dataset("wmt/wmt14", "de-en", split=split, streaming=True).take(n)
        ]
        for split, n in counts.items()
    }
    write_wmt14_layout(rows, Path(folder))


def wmt14_data(folder: Path, args: CheckArguments, log: Path) -> tuple[str, str]:
    """A slice of the Hub's wmt14, or the fixture in its layout: what it is, and the BPE size to train."""
    offline = [
        name
        for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
        if os.environ.get(name, "0") not in ("", "0")
    ]
    reason = f"{offline[0] if offline else ''} is set"
    if not offline:
        fetch = multiprocessing.get_context("spawn").Process(
            target=fetch_wmt14_slice, args=(str(folder), args.wmt14_train_pairs, str(log))
        )
        fetch.start()
        fetch.join(args.hub_timeout)
        timed_out = fetch.is_alive()
        if timed_out:
            fetch.terminate()
            fetch.join()
        if fetch.exitcode == 0:
            return f"{args.wmt14_train_pairs:,} pairs of the Hub's wmt/wmt14", "8000"
        reason = "streaming the Hub's wmt/wmt14 " + (
            f"took over {args.hub_timeout} s" if timed_out else f"failed (see {log})"
        )
    shutil.rmtree(folder, ignore_errors=True)
    rows = {}
    for split, name in (("train", "train"), ("validation", "val"), ("test", "test_2016_flickr")):
        german, english = fixture_lines(name, "de", 10**6), fixture_lines(name, "en", 10**6)
        rows[split] = [{"de": de, "en": en} for de, en in zip(german, english, strict=True)]
    write_wmt14_layout(rows, folder)
    return f"the tests' Multi30k fixture in wmt14's layout ({reason})", "400"


def check_wmt14(folder: Path, machine: Machine, args: CheckArguments) -> str:
    data, vocab_size = wmt14_data(folder / "wmt14", args, folder / "log.txt")
    work = folder / "work"
    work.mkdir()
    (work / "scripts").symlink_to(ROOT / "scripts")  # the recipe's relative paths; its outputs/ stay here
    options = ["--max_steps", "30", "--warmup_steps", "10", "--save_steps", "6", "--logging_steps", "5",
               "--eval_steps", "30", "--max_eval_examples", "64", "--generation_max_length", "32",
               "--num_proc", "2", *machine.precision_options(), *machine.train_options]  # fmt: skip
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "DATASET": str(folder / "wmt14"),
        "VOCAB_SIZE": vocab_size,
        "LAUNCH": " ".join(machine.launcher("multi_gpu")),
        "TRAIN_OPTIONS": " ".join(options),
    }
    run_logged(["bash", str(WMT14_SCRIPT), "base"], folder / "log.txt", timeout=480, cwd=work, env=env)
    out = work / "outputs" / "wmt14-en-de-base"
    steps = [r["step"] for r in loss_log(out)]
    if max(steps, default=0) != 30:
        raise CheckFailed(f"training ended at step {max(steps, default=0)}, not 30")
    scores = []
    for split in ("validation", "test"):
        report = out / "averaged" / f"eval-{split}-beam4-lp0.6.json"
        if not report.exists():
            raise CheckFailed(f"no report {report}")
        metrics = json.loads(report.read_text())["metrics"]
        scores.append(f"{metrics['bleu']:.1f} / {metrics['bleu_paper_tokenized']:.1f}")
    return (
        f"30 steps of the base model on {data}, the last 5 checkpoints averaged; sacreBLEU / tokenized BLEU "
        f"{scores[0]} (newstest2013 slice), {scores[1]} (newstest2014 slice): the pipeline runs, the model "
        "is untrained"
    )


CHECKS = {
    "bf16_sdpa": ("bf16 + SDPA on 1 GPU", check_bf16_sdpa),
    "ddp": ("DDP on 2 GPUs (multi_gpu.yaml)", lambda *a: check_training("multi_gpu", *a)),
    "fsdp": ("FSDP2 on 2 GPUs (fsdp.yaml)", lambda *a: check_training("fsdp", *a)),
    "wmt14": ("WMT14 base recipe on 2 GPUs (wmt14_en_de.sh)", check_wmt14),
}


def run_checks(names: list[str], machine: Machine, args: CheckArguments) -> list[bool]:
    """Run the named checks, printing a line for each; a folder per check under --output_dir."""
    import datasets
    import transformers

    # A line per check: the libraries' progress bars and advice go to the checks' logs, not here.
    datasets.disable_progress_bars()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    outcomes = []
    for name in names:
        title, check = CHECKS[name]
        folder = Path(args.output_dir) / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        start = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:  # kept in the check's folder, not printed
            warnings.simplefilter("always")
            try:
                detail, passed = check(folder, machine, args), True
            except CheckFailed as failure:
                detail, passed = str(failure), False
            except Exception as error:  # a check's bug or an unforeseen failure: FAIL, the traceback kept
                (folder / "traceback.txt").write_text(traceback.format_exc())
                detail, passed = f"{type(error).__name__}: {error} (see {folder / 'traceback.txt'})", False
        if caught:
            (folder / "warnings.txt").write_text(
                "".join(f"{w.category.__name__}: {w.message}\n" for w in caught)
            )
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # what this process held on the first GPU, before the next launch
        status = "PASS" if passed else "FAIL"
        print(f"{status}  {title}: {detail} [{time.monotonic() - start:.0f} s]", flush=True)
        outcomes.append(passed)
    return outcomes


def main() -> None:
    (args,) = parse_arguments(CheckArguments, description=__doc__)
    names = [name.strip() for name in args.checks.split(",") if name.strip()]
    unknown = [name for name in names if name not in CHECKS]
    if unknown or not names:
        raise UsageError(f"--checks {args.checks}: choose among {', '.join(CHECKS)}.")
    gpus = require_gpus()
    check_not_a_file(args.output_dir)
    earlier = [name for name in names if (Path(args.output_dir) / name).exists()]
    if earlier and not args.overwrite:
        raise ExistingPathError(
            f"{args.output_dir} holds earlier checks ({', '.join(earlier)}): pass --overwrite to replace "
            "them, or another --output_dir."
        )
    precision = "bf16" if torch.cuda.is_bf16_supported(including_emulation=False) else "fp16"
    start = time.monotonic()
    outcomes = run_checks(names, Machine(device="cuda:0", precision=precision), args)
    minutes = (time.monotonic() - start) / 60
    print(
        f"{sum(outcomes)} of {len(outcomes)} checks passed in {minutes:.1f} min on {gpus}, {precision}; "
        f"runs and logs in {args.output_dir}"
    )
    if not all(outcomes):
        raise SystemExit(1)


if __name__ == "__main__":
    run_script(main)
