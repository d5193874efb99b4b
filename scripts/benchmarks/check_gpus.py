r"""Check this package on a machine with CUDA GPUs, from one GPU up: what the tests, on CPUs, cannot. Each
check has a time limit and prints one line (PASS or FAIL, and why, with its figures), then a summary; the
figures go to <output_dir>/report.json and each check's logs to its folder under --output_dir.

On one GPU (the limits sum to under 8 minutes):
  bf16_sdpa          the shipped Multi30k model's logits in bfloat16 through SDPA (under autocast, as training
                     runs, and with bfloat16 weights) against float32 through the eager kernel, within the
                     tolerances below; which SDPA kernel torch picks (read off the profiler's operators), and
                     each of flash, memory-efficient, cuDNN and math forced alone: whether it runs, how close.
  decoding           the shipped model's greedy and beam search (its saved generation config) on the tests'
                     Multi30k sentences in float32 and in bfloat16 weights: sentences/s, and how many
                     translations agree.
  train_base         a training step of the paper's base model at WMT14's shape (d_model 512, 6 + 6 layers,
                     d_ff 2048, 8 heads, 37,000 tokens) under bf16 autocast, on the recipe's 3,500 tokens a
                     GPU: tokens/s, peak memory, a finite loss that falls on its batch.
  marian             the same shape against transformers' MarianMTModel (scripts/benchmarks/harness.py),
                     interleaved: training tokens/s and greedy and beam-4 new tokens/s, as ratios.
  compiled_decoding  greedy decoding of the shipped model with a static cache and its decoding step compiled
                     by torch.compile, against eager: the compile's time, the speed-up, the same translations.
With two or more GPUs, also (each on 2 processes through `accelerate launch` and a shipped config):
  ddp                scripts/train.py under multi_gpu.yaml: the paper's Multi30k recipe shrunk to the tests'
                     fixture and a tiny model (20 steps, validation by BLEU at the end); then the run resumed
                     from its checkpoint-10 in a folder of its own, which must log the losses the run logged;
                     the final folders and the last checkpoint load with from_pretrained, one embedding
                     matrix each.
  fsdp               the same under fsdp.yaml (FSDP2).
  deepspeed_zero2    the same under deepspeed_zero2.yaml (needs `pip install -e ".[deepspeed]"`).
  deepspeed_zero3    the same under deepspeed_zero3.yaml, the model widened so that ZeRO-3 shards its weights.
  wmt14              bash scripts/recipes/wmt14_en_de.sh base: the base model, 30 steps, on the tests' fixture
                     in wmt14's layout, through averaging and both BLEU figures of the validation and test
                     splits.

The Hub is never contacted: HF_HUB_OFFLINE=1 is set for this command and every command it starts, and every
input is a file of this repository (the shipped model, the tests' fixture).

    python scripts/benchmarks/check_gpus.py --dry_run            # the plan for the GPUs seen, nothing run
    python scripts/benchmarks/check_gpus.py --dry_run --gpus 2   # the plan for 2 GPUs, on any machine
    python scripts/benchmarks/check_gpus.py
    python scripts/benchmarks/check_gpus.py --gpus 1             # the one-GPU plan on a bigger machine
    python scripts/benchmarks/check_gpus.py --checks ddp,fsdp --output_dir outputs/check_gpus-2 --overwrite

Tolerances, against float32 and the eager kernel: float32 through SDPA within 1e-3 of a logit; bfloat16 (and
each SDPA kernel that runs alone), a mean difference of at most 0.05, a largest one of at most 0.5, and the
same most likely token at 98 % of the positions or more: bounds some ten times what bfloat16 rounding gave on
a CPU for the same model and sentences, room for other kernels but not for a wrong mask. Decoding passes if
every translation is text and at least 75 % equal float32's (bfloat16 may flip a close choice of the beam, a
broken path changes most of them); compiled decoding, if at least 90 % equal eager's. Our model passes
against Marian if each ratio is at least 0.75. A resumed run's losses must be within 2 % of the run's (bf16
on GPUs is not bitwise reproducible; a resume that lost the optimizer's state or the batch order moves them
further). On GPUs without bfloat16 (before Ampere) the checks run in float16, and the harness's in float32.

Exit status: 0 if every check passed, 1 if one failed, 2 without a CUDA GPU (or fewer than --gpus or a
check asks for), in a one-line refusal. --dry_run exits 0 having run nothing.
"""

import contextlib
import gc
import gzip
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

# Never the Hub: huggingface_hub reads this once, when the imports below load it, and every command this one
# starts inherits it.
os.environ["HF_HUB_OFFLINE"] = "1"
# Run from any folder: the `benchmarks` package (the harness) is in scripts/, this folder's parent.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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
REPORT_NAME = "report.json"

FLOAT32_SDPA_TOLERANCE = 1e-3  # largest |difference| of a logit
LOW_PRECISION_TOLERANCE = {"mean": 0.05, "max": 0.5, "top1": 0.98}
SAME_TRANSLATIONS = 0.75  # share of bfloat16's translations equal to float32's
SAME_COMPILED = 0.9  # share of compiled greedy translations equal to eager's
MARIAN_RATIO_FLOOR = 0.75  # ours / Marian, for each of training, greedy and beam
RESUME_TOLERANCE = 0.02  # relative difference of a resumed run's logged losses from the run's
# The model of the deepspeed_zero3 check: transformer-tiny widened so that every weight matrix holds more than
# DeepSpeed's stage3_param_persistence_threshold (100,000 numbers), below which ZeRO-3 keeps it whole.
ZERO3_MODEL = {"d_model": 320, "encoder_ffn_dim": 320, "decoder_ffn_dim": 320}
# The aten operators behind torch's scaled_dot_product_attention, by the SDPBackend that runs them.
SDPA_OPERATORS = {
    "aten::_scaled_dot_product_flash_attention": "FLASH_ATTENTION",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "FLASH_ATTENTION",
    "aten::_scaled_dot_product_efficient_attention": "EFFICIENT_ATTENTION",
    "aten::_scaled_dot_product_cudnn_attention": "CUDNN_ATTENTION",
    "aten::_scaled_dot_product_attention_math": "MATH",
    "aten::_scaled_dot_product_fused_attention_overrideable": "OVERRIDEABLE",
}
SDPA_BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")
# Words of torch's warnings that say why an SDPA kernel would not run ("Flash attention kernel not used
# because:", "Both fused kernels do not support non-null attn_mask.").
SDPA_WORDS = ("kernel", "attention", "attn_mask", "sdp")


@dataclass
class CheckArguments(Options):
    output_dir: str = field(
        default="outputs/check_gpus",
        metadata={"help": "Where the report (report.json) and each check's folder of runs and logs go."},
    )
    checks: str = field(
        default="all",
        metadata={
            "help": "The checks to run, comma-separated (bf16_sdpa, decoding, train_base, marian, "
            "compiled_decoding, ddp, fsdp, deepspeed_zero2, deepspeed_zero3, wmt14), or all: every check the "
            "GPUs allow."
        },
    )
    gpus: int | None = field(
        default=None,
        metadata={
            "help": "Plan for this many GPUs: all the machine has unless given; with --dry_run, any number, "
            "on any machine.",
            "range": ">= 1",
        },
    )
    dry_run: bool = field(
        default=False,
        metadata={"help": "Print the plan (each check and its time limit, and their total) and run nothing."},
    )
    overwrite: bool = field(
        default=False,
        metadata={"help": "Replace the report and folders of earlier checks under --output_dir."},
    )


@dataclass
class Machine:
    """Where the checks run: the device of the one-GPU checks, the mixed precision (bf16, fp16 or no), the
    GPUs to plan for, what they are (for the report), and options appended to every training command."""

    device: str = "cuda:0"
    precision: str = "bf16"
    gpus: int = 1
    description: str = ""
    train_options: tuple[str, ...] = ()

    @property
    def dtype(self):
        import torch

        return torch.float16 if self.precision == "fp16" else torch.bfloat16

    @property
    def dtype_name(self) -> str:
        return "float16" if self.precision == "fp16" else "bfloat16"

    @property
    def harness_precision(self) -> str:
        """The harness's mixed precision (its `MIXED_PRECISIONS`): bf16 autocast, or none (float32) where
        the GPU has no bfloat16."""
        return "bf16" if self.precision == "bf16" else "no"

    @property
    def harness_text(self) -> str:
        return "bf16 autocast" if self.harness_precision == "bf16" else "float32"

    def torch_device(self):
        import torch

        return torch.device(self.device)

    def launcher(self, config: str, precision: bool = True) -> list[str]:
        """`accelerate launch` on 2 processes with a shipped config, on a port of its own; with `precision`
        false, no --mixed_precision (the training options choose)."""
        chosen = ["--mixed_precision", self.precision] if precision else []
        return [sys.executable, "-m", "accelerate.commands.launch",
                "--config_file", str(CONFIGS / f"{config}.yaml"), "--num_processes", "2", *chosen,
                "--main_process_port", str(free_port())]  # fmt: skip

    def precision_options(self) -> list[str]:
        if self.precision == "no":
            return []
        return ["--bf16", "false", "--fp16", "true"] if self.precision == "fp16" else ["--bf16", "true"]


@dataclass(frozen=True)
class Sizes:
    """How much the one-GPU checks do: a GPU's run by default; the tests pass small ones."""

    shape: str = "base"  # of the harness's SHAPES: the paper's base model with WMT14's vocabulary
    train_batch: tuple[int, int] = (100, 35)  # sentences x tokens: the WMT14 base recipe's 3,500 tokens a GPU
    steps: int = 5  # timed training steps, after one to warm up
    decode_batch: int = 32  # the harness's generation batches
    new_tokens: int = 30
    repeats: int = 3  # interleaved rounds of the Marian comparison, medians taken
    sentences: int = 50  # of the fixture's test split (all of it), for the shipped model


SIZES = Sizes()


@dataclass(frozen=True)
class Check:
    """A check: its title, the fewest GPUs it needs, its time limit in seconds, and the function that runs it
    (folder, machine, sizes) -> (one-line summary, figures for the report)."""

    title: str
    gpus: int
    limit: int
    run: Callable[..., tuple[str, dict]]


class CheckFailed(Exception):
    """What a check found wrong, in one line, and the figures it measured before (for the report)."""

    def __init__(self, message: str, figures: dict | None = None):
        super().__init__(message)
        self.figures = figures or {}


class TimeLimitReached(BaseException):
    """A check ran past its time limit. A BaseException, as KeyboardInterrupt is, so that no library's
    `except Exception` swallows it."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise `TimeLimitReached` in the main thread once `seconds` have passed (SIGALRM): a check that runs in
    this process is stopped between two of its Python operations, a launched one by `run_logged`."""

    def reached(signum, frame):
        raise TimeLimitReached

    previous = signal.signal(signal.SIGALRM, reached)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
        finally:
            signal.signal(signal.SIGALRM, previous)


def child_environment(**extra: str) -> dict[str, str]:
    """The environment of every command a check starts: this one's, offline, the repository importable."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), **extra}


def run_logged(command: list[str], log: Path, **kwargs) -> subprocess.CompletedProcess:
    """Run `command`, appending it and its output to `log`; a failure is a `CheckFailed` naming the command's
    last error line. The command runs in a session of its own, so that when the check is stopped (its time
    limit, Ctrl-C) the training processes the launcher started end too, and none is left holding a GPU."""
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
        stdout, stderr = process.communicate()
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        with log.open("a") as out:
            out.write(f"$ {' '.join(command)}\n(stopped)\n{stdout}\n{stderr}\n")
        raise
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


def load_shipped(machine: Machine, attention: str = "sdpa", low_precision: bool = False):
    """The shipped Multi30k model on the machine's device, in eval mode, and its tokenizer; float32 weights,
    or the machine's low precision. A checkout's file cut short is named, not a library's traceback."""
    import torch

    from hf_vanilla_transformer.saving import load_model_folder

    dtype = machine.dtype if low_precision else torch.float32
    model, tokenizer = load_model_folder(SHIPPED_MODEL, attn_implementation=attention, dtype=dtype)
    return model.to(machine.device).eval(), tokenizer


def same_count(texts: list[str], reference: list[str]) -> int:
    return sum(ours == theirs for ours, theirs in zip(texts, reference, strict=True))


def logit_differences(logits, reference, keep) -> dict:
    difference = (logits - reference)[keep].abs()
    top1 = (logits.argmax(-1) == reference.argmax(-1))[keep].float().mean()
    return {"mean": float(difference.mean()), "max": float(difference.max()), "top1": float(top1)}


def outside_tolerance(found: dict) -> bool:
    bound = LOW_PRECISION_TOLERANCE
    return found["mean"] > bound["mean"] or found["max"] > bound["max"] or found["top1"] < bound["top1"]


def describe_differences(name: str, found: dict) -> str:
    bound = LOW_PRECISION_TOLERANCE
    return (
        f"{name}: mean |difference| {found['mean']:.3f}, max {found['max']:.3f}, same top token "
        f"{found['top1']:.1%} (tolerance {bound['mean']}, {bound['max']}, {bound['top1']:.0%})"
    )


def sdpa_kernels(model, batch: dict, reference, keep) -> dict:
    """Which SDPA kernels run `model`'s attention on `batch`: those torch picks by itself, read off the
    profiler's operators, and for each backend forced alone (`sdpa_kernel`), whether it runs (else why not:
    torch's warnings, or its error) and its logits' differences from `reference`."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as profiler:
        model(**batch)
    picked = sorted({SDPA_OPERATORS[e.key] for e in profiler.key_averages() if e.key in SDPA_OPERATORS})
    alone = {}
    for name in SDPA_BACKENDS:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with torch.no_grad(), sdpa_kernel([getattr(SDPBackend, name)]):
                    logits = model(**batch).logits.float()
            except RuntimeError as error:
                messages = [str(w.message).strip() for w in caught]
                reasons = dict.fromkeys(m for m in messages if any(word in m.lower() for word in SDPA_WORDS))
                why = " ".join([*reasons, str(error).splitlines()[0]])
                alone[name] = {"runs": False, "why": why[:400]}
                continue
        alone[name] = {"runs": True, **logit_differences(logits, reference, keep)}
    return {"picked": picked, "alone": alone}


def check_bf16_sdpa(folder: Path, machine: Machine, sizes: Sizes) -> tuple[str, dict]:
    import torch

    eager, tokenizer = load_shipped(machine, "eager")
    sdpa, _ = load_shipped(machine, "sdpa")
    low, _ = load_shipped(machine, "sdpa", low_precision=True)
    sources = fixture_lines("test_2016_flickr", "de", sizes.sentences)
    references = fixture_lines("test_2016_flickr", "en", sizes.sentences)
    batch = tokenizer(sources, text_target=references, return_tensors="pt", padding=True).to(machine.device)
    keep = batch["labels"].ne(tokenizer.pad_token_id)  # teacher-forced positions that are not padding
    batch["labels"] = batch["labels"].masked_fill(~keep, -100)
    low_name = machine.dtype_name
    with torch.no_grad():
        reference = eager(**batch).logits.float()
        float32_sdpa = sdpa(**batch).logits.float()
        with torch.autocast(machine.torch_device().type, dtype=machine.dtype):
            autocast = sdpa(**batch).logits.float()
        low_weights = low(**batch).logits.float()
    figures = {
        "float32 sdpa": logit_differences(float32_sdpa, reference, keep),
        f"{low_name} autocast sdpa": logit_differences(autocast, reference, keep),
        f"{low_name} weights sdpa": logit_differences(low_weights, reference, keep),
        f"{low_name} kernels": sdpa_kernels(low, batch, reference, keep),
    }
    if figures["float32 sdpa"]["max"] > FLOAT32_SDPA_TOLERANCE:
        raise CheckFailed(
            f"float32 through SDPA differs from eager by {figures['float32 sdpa']['max']:.2e} of a logit "
            f"(tolerance {FLOAT32_SDPA_TOLERANCE:g})",
            figures,
        )
    for name in (f"{low_name} autocast sdpa", f"{low_name} weights sdpa"):
        if outside_tolerance(figures[name]):
            raise CheckFailed(describe_differences(name, figures[name]), figures)
    kernels = figures[f"{low_name} kernels"]
    if not kernels["picked"]:
        raise CheckFailed(
            f"no SDPA kernel ran in {low_name}: the model's attention did not reach SDPA", figures
        )
    for name, found in kernels["alone"].items():
        if found["runs"] and outside_tolerance(found):
            raise CheckFailed(describe_differences(f"{name} alone, {low_name}", found), figures)
    autocast_found, weights_found = figures[f"{low_name} autocast sdpa"], figures[f"{low_name} weights sdpa"]
    alone = ", ".join(
        f"{name.lower()} {'runs' if found['runs'] else 'refused'}" for name, found in kernels["alone"].items()
    )
    summary = (
        f"largest logit difference {figures['float32 sdpa']['max']:.0e} (float32), "
        f"{autocast_found['max']:.3f} (autocast), {weights_found['max']:.3f} ({low_name} weights); same top "
        f"token {min(autocast_found['top1'], weights_found['top1']):.1%}; SDPA picks "
        f"{' + '.join(name.lower() for name in kernels['picked'])}; alone: {alone}"
    )
    return summary, figures


def timed_generate(model, tokenizer, sources: list[str], device, settings: dict) -> tuple[list[str], float]:
    """The package's decoding of `sources` in one batch (`decoding.generate_batch`: each output ends by its
    source's length + 50, decided on the host), and the seconds it took, the device caught up at both ends."""
    from benchmarks.harness import clock
    from hf_vanilla_transformer.decoding.generation import generate_batch

    start = clock(device)
    texts = generate_batch(model, tokenizer, sources, settings)
    return texts, clock(device) - start


# The decoding checks' searches: greedy, and the model's own beam search (its saved generation config).
SEARCHES = {"greedy": {"num_beams": 1}, "beam": {}}


def check_decoding(folder: Path, machine: Machine, sizes: Sizes) -> tuple[str, dict]:
    float32, tokenizer = load_shipped(machine)
    models = {"float32": float32, machine.dtype_name: load_shipped(machine, low_precision=True)[0]}
    sources = fixture_lines("test_2016_flickr", "de", sizes.sentences)
    device = machine.torch_device()
    for model in models.values():  # warm-up: the device's libraries load their kernels once
        timed_generate(model, tokenizer, sources[:2], device, {"max_new_tokens": 4})
    figures, texts = {}, {}
    for search, settings in SEARCHES.items():
        for precision, model in models.items():
            found, seconds = timed_generate(model, tokenizer, sources, device, settings)
            texts[f"{search} {precision}"] = found
            figures[f"{search} {precision} sentences_per_s"] = len(sources) / seconds
        low = texts[f"{search} {machine.dtype_name}"]
        figures[f"{search} same translations"] = same_count(low, texts[f"{search} float32"])
        figures[f"{search} speed {machine.dtype_name}/float32"] = (
            figures[f"{search} {machine.dtype_name} sentences_per_s"]
            / figures[f"{search} float32 sentences_per_s"]
        )
    write_json(folder / "translations.json", {"sources": sources, **texts}, indent=1)
    for search in SEARCHES:
        same = figures[f"{search} same translations"]
        empty = sum(
            not text.strip() for key, found in texts.items() if key.startswith(search) for text in found
        )
        if empty or same < SAME_TRANSLATIONS * len(sources):
            raise CheckFailed(
                f"{search} search in {machine.dtype_name}: {same} of {len(sources)} translations equal "
                f"float32's (at least {SAME_TRANSLATIONS:.0%} expected), empty ones: {empty} (see {folder})",
                figures,
            )
    summary = "; ".join(
        f"{search}: {figures[f'{search} same translations']}/{len(sources)} as float32's, "
        f"{figures[f'{search} float32 sentences_per_s']:.0f} -> "
        f"{figures[f'{search} {machine.dtype_name} sentences_per_s']:.0f} sentences/s "
        f"({figures[f'{search} speed {machine.dtype_name}/float32']:.2f}x)"
        for search in SEARCHES
    )
    return summary, figures


def training_loss(model, batch: tuple, machine: Machine) -> float:
    """The model's loss on `batch` (inputs, labels) in the harness's precision, without training."""
    import torch

    from benchmarks.harness import autocast

    model.train()  # dropout on, as in the timed steps
    with torch.no_grad(), autocast(machine.torch_device(), machine.harness_precision):
        return float(model(input_ids=batch[0], labels=batch[1]).loss)


def random_batch(vocab: int, sentences: int, length: int, device) -> tuple:
    import torch

    generator = torch.Generator().manual_seed(1)  # the harness's training batch: its steps learn this one
    inputs = torch.randint(4, vocab, (sentences, length), generator=generator)
    labels = torch.randint(4, vocab, (sentences, length), generator=generator)
    return inputs.to(device), labels.to(device)


def check_train_base(folder: Path, machine: Machine, sizes: Sizes) -> tuple[str, dict]:
    import torch

    from benchmarks.harness import SHAPES, build_models, peak_memory_mb, time_training_step

    shape, device = SHAPES[sizes.shape], machine.torch_device()
    model = build_models(shape)["ours"].to(device)
    sentences, length = sizes.train_batch
    batch = random_batch(shape.vocab_size, sentences, length, device)
    torch.manual_seed(0)
    before = training_loss(model, batch, machine)
    step = time_training_step(model, sentences, length, shape.vocab_size, device, machine.harness_precision)
    step()  # warm-up: the device's kernels, the allocator's blocks, Adam's state
    median = statistics.median(step() for _ in range(sizes.steps))
    # What stays allocated between steps (the weights and Adam's state), and a step's peak above it.
    held = torch.cuda.memory_allocated(device) / 2**20 if device.type == "cuda" else None
    peak = peak_memory_mb(step, device)
    torch.manual_seed(0)
    after = training_loss(model, batch, machine)
    tokens = sentences * length
    figures = {
        "shape": asdict(shape),
        "mixed_precision": machine.harness_precision,
        "batch": [sentences, length],
        "target_tokens_per_s": tokens / median,
        "step_s": median,
        "held_memory_mib": held,
        "peak_memory_mib": peak,
        "loss_before": before,
        "loss_after": after,
    }
    if not (math.isfinite(before) and math.isfinite(after)):
        raise CheckFailed(
            f"the loss is not finite: {before} before {sizes.steps + 2} steps, {after} after", figures
        )
    broken = [name for name, weight in model.named_parameters() if not torch.isfinite(weight).all()]
    if broken:
        raise CheckFailed(
            f"{len(broken)} weights are not finite after {sizes.steps + 2} steps, {broken[0]} first", figures
        )
    if not after < before:
        raise CheckFailed(
            f"the loss did not fall on its batch in {sizes.steps + 2} steps: {before:.3f} -> {after:.3f}",
            figures,
        )
    memory = f"a step's peak memory {peak:,.0f} MiB"
    if held is not None:
        memory += f" above the {held:,.0f} MiB of weights and Adam's state"
    return (
        f"{tokens / median:,.0f} target tokens/s ({sentences} x {length} tokens, {machine.harness_text}), "
        f"{memory}, loss {before:.2f} -> {after:.2f} in {sizes.steps + 2} steps"
    ), figures


def check_marian(folder: Path, machine: Machine, sizes: Sizes) -> tuple[str, dict]:
    from benchmarks.harness import (
        SHAPES,
        SOURCE_LENGTH,
        build_models,
        interleaved_samples,
        time_generation,
        time_training_step,
    )

    shape, device, mixed = SHAPES[sizes.shape], machine.torch_device(), machine.harness_precision
    models = {name: model.to(device) for name, model in build_models(shape).items()}
    sentences, length = sizes.train_batch
    new_tokens = sizes.decode_batch * sizes.new_tokens
    tokens = {"train_tok_s": sentences * length, "greedy_tok_s": new_tokens, "beam4_tok_s": new_tokens}
    timers = {}
    for name, model in models.items():
        timers[name, "train_tok_s"] = time_training_step(
            model, sentences, length, shape.vocab_size, device, mixed
        )
        for task, beams in (("greedy_tok_s", 1), ("beam4_tok_s", 4)):
            timers[name, task] = time_generation(
                model, sizes.decode_batch, SOURCE_LENGTH, sizes.new_tokens, beams, shape.vocab_size, device,
                mixed_precision=mixed,
            )  # fmt: skip
    samples, _ = interleaved_samples(timers, sizes.repeats)
    figures = {name: {} for name in models}
    for (name, task), times in samples.items():
        figures[name][task] = tokens[task] / statistics.median(times)
    ratios = {task: figures["ours"][task] / figures["marian"][task] for task in tokens}
    figures.update(shape=asdict(shape), mixed_precision=mixed, ratios=ratios)
    shown = ", ".join(f"{task.removesuffix('_tok_s')} {ratio:.2f}" for task, ratio in ratios.items())
    slow = [task for task, ratio in ratios.items() if ratio < MARIAN_RATIO_FLOOR]
    if slow:
        raise CheckFailed(
            f"ours / Marian at the {shape.name} shape: {shown}; {', '.join(slow)} below {MARIAN_RATIO_FLOOR}",
            figures,
        )
    return (
        f"ours / Marian at the {shape.name} shape ({machine.harness_text}): "
        f"{shown} (ours: {figures['ours']['train_tok_s']:,.0f} training tokens/s, "
        f"{figures['ours']['greedy_tok_s']:,.0f} greedy and {figures['ours']['beam4_tok_s']:,.0f} beam-4 new "
        "tokens/s)"
    ), figures


def check_compiled_decoding(folder: Path, machine: Machine, sizes: Sizes) -> tuple[str, dict]:
    import torch

    from benchmarks.harness import compiled_generation_settings

    model, tokenizer = load_shipped(machine)
    sources = fixture_lines("test_2016_flickr", "de", sizes.sentences)
    device = machine.torch_device()
    greedy = {"num_beams": 1}
    timed_generate(model, tokenizer, sources, device, greedy)  # warm-up
    eager = [timed_generate(model, tokenizer, sources, device, greedy) for _ in range(sizes.repeats)]
    compiled = {**greedy, **compiled_generation_settings()}
    try:
        _, compile_seconds = timed_generate(model, tokenizer, sources, device, compiled)  # it compiles
        runs = [timed_generate(model, tokenizer, sources, device, compiled) for _ in range(sizes.repeats)]
    finally:
        torch.compiler.reset()  # the compiled step's graphs and their memory, before the next check
    eager_texts, compiled_texts = eager[-1][0], runs[-1][0]
    eager_seconds = statistics.median(seconds for _, seconds in eager)
    compiled_seconds = statistics.median(seconds for _, seconds in runs)
    same = same_count(compiled_texts, eager_texts)
    figures = {
        "sentences": len(sources),
        "first_compiled_call_s": compile_seconds,
        "eager_sentences_per_s": len(sources) / eager_seconds,
        "compiled_sentences_per_s": len(sources) / compiled_seconds,
        "speed_compiled/eager": eager_seconds / compiled_seconds,
        "same translations": same,
    }
    write_json(folder / "translations.json", {"eager": eager_texts, "compiled": compiled_texts}, indent=1)
    if same < SAME_COMPILED * len(sources) or not all(text.strip() for text in compiled_texts):
        raise CheckFailed(
            f"compiled greedy decoding: {same} of {len(sources)} translations equal eager's (at least "
            f"{SAME_COMPILED:.0%} expected; see {folder})",
            figures,
        )
    return (
        f"the first call (it compiles) {compile_seconds:.0f} s; then {figures['speed_compiled/eager']:.2f}x "
        f"eager's speed ({len(sources) / compiled_seconds:.0f} sentences/s); {same}/{len(sources)} "
        "translations as eager's"
    ), figures


def tiny_data(folder: Path) -> Path:
    """The tests' tiny translation data (tests/conftest.py): the fixture as a DatasetDict and a joint BPE
    tokenizer of 400 tokens trained on it; made once for the training checks."""
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


def tiny_training(
    data: Path, out: Path, machine: Machine, model: dict, *options: str, precision: bool = True
) -> list[str]:
    """scripts/train.py on the paper's Multi30k recipe shrunk to the fixture, as tests/test_scale_out.py runs
    it (20 updates, no dropout, a loss every 5 steps, a checkpoint every 10), with validation (greedy BLEU on
    8 pairs) at the end: generation under the engine is part of what is checked. `model` overrides the tiny
    preset's configuration; with `precision` false, no --bf16 or --fp16 (the device's choice)."""
    return [str(ROOT / "scripts" / "train.py"), str(MULTI30K_RECIPE),
            "--dataset", str(data / "data"), "--tokenizer", str(data / "tokenizer"),
            "--preset", "transformer-tiny", "--max_source_length", "96", "--max_target_length", "96",
            "--config_overrides", json.dumps({**model, "dropout": 0.0}),
            "--max_tokens", "200", "--max_steps", "20", "--warmup_steps", "10", "--lr_scale", "0.2",
            "--logging_steps", "5", "--save_steps", "10", "--eval_strategy", "steps", "--eval_steps", "20",
            "--max_eval_examples", "8", "--generation_max_length", "12", "--load_best_model_at_end", "false",
            "--dataloader_num_workers", "0", *(machine.precision_options() if precision else []),
            "--output_dir", str(out),
            *machine.train_options, *options]  # fmt: skip


def loss_log(run: Path) -> list[dict]:
    path = run / "loss_log.jsonl"
    if not path.exists():
        raise CheckFailed(f"no loss log in {run}")
    return [json.loads(line) for line in path.read_text().splitlines()]


def check_loaded_folder(folder: Path, machine: Machine) -> None:
    """Load a saved folder with from_pretrained and translate two sentences with it on the GPU; its
    model.safetensors must hold the tied embedding matrix once."""
    import torch
    from safetensors.torch import load_file

    from hf_vanilla_transformer.saving import load_model_folder

    model, tokenizer = load_model_folder(folder)
    model.to(machine.device)
    inputs = tokenizer(fixture_lines("val", "de", 2), return_tensors="pt", padding=True).to(machine.device)
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=8)
    if output.shape[0] != 2:
        raise CheckFailed(f"generate() with {folder} returned {output.shape[0]} sequences for 2 sentences")
    shape = (model.config.vocab_size, model.config.d_model)
    weights = load_file(folder / "model.safetensors")
    embeddings = [name for name, tensor in weights.items() if tuple(tensor.shape) == shape]
    if len(embeddings) != 1:
        raise CheckFailed(f"{folder} holds {len(embeddings)} embedding matrices, not one: {embeddings}")


def check_training(
    config: str, folder: Path, machine: Machine, sizes: Sizes, model: dict, chosen: bool = False
) -> tuple[str, dict]:
    """20 steps under `accelerate launch` with the shipped `config`, then the run resumed from its
    checkpoint-10 in a folder of its own; the folders saved load. With `chosen`, neither the launch nor the
    options name a precision: the run must take the GPU's, and its resume contract record it."""
    data = tiny_data(folder.parent / "tiny-data")
    log = folder / "log.txt"
    run, resumed = folder / "run", folder / "resumed"
    told = not chosen
    result = run_logged(
        [*machine.launcher(config, told), *tiny_training(data, run, machine, model, precision=told)],
        log,
        cwd=ROOT,
        env=child_environment(),
    )
    saved = result.stdout.count("Saved the trained model to")
    if saved != 1:
        raise CheckFailed(f"'Saved the trained model to' printed {saved} times: the main process saves, once")
    records = loss_log(run)
    losses = {r["step"]: r["loss"] for r in records if "loss" in r}
    bleu = [r["eval_bleu"] for r in records if "eval_bleu" in r]
    if list(losses) != [5, 10, 15, 20]:
        raise CheckFailed(f"losses logged at steps {list(losses)}, not 5, 10, 15, 20")
    if not losses[20] < losses[5] - 0.5:  # what the tests see on 2 CPU processes
        raise CheckFailed(f"the loss did not fall: {[round(loss, 3) for loss in losses.values()]}")
    if len(bleu) != 1 or not 0 <= bleu[0] <= 100:
        raise CheckFailed(f"validation at step 20 logged BLEU {bleu}")
    recorded = json.loads((run / "checkpoint-10" / "resume_contract.json").read_text())["options"]
    ran = "bf16" if recorded["bf16"] else "fp16" if recorded["fp16"] else "no"
    if ran != machine.precision:
        raise CheckFailed(
            f"the run recorded mixed precision {ran}, not {machine.precision}"
            + (" (the GPU's, chosen when nothing names one)" if chosen else "")
        )

    resumed.mkdir()
    shutil.copytree(run / "checkpoint-10", resumed / "checkpoint-10")
    checkpoint = str(resumed / "checkpoint-10")
    options = ["--resume_from_checkpoint", checkpoint]
    run_logged(
        [
            *machine.launcher(config, told),
            *tiny_training(data, resumed, machine, model, *options, precision=told),
        ],
        log,
        cwd=ROOT,
        env=child_environment(),
    )
    again = {r["step"]: r["loss"] for r in loss_log(resumed) if "loss" in r and r["step"] > 10}
    if list(again) != [15, 20]:
        raise CheckFailed(f"the resumed run logged losses at steps {list(again)}, not 15, 20")
    apart = max(abs(again[step] - losses[step]) / losses[step] for step in again)
    if apart > RESUME_TOLERANCE:
        raise CheckFailed(
            f"the resumed run's losses {[round(loss, 4) for loss in again.values()]} differ from the run's "
            f"{[losses[step] for step in again]} by {apart:.1%} (at most {RESUME_TOLERANCE:.0%})"
        )

    folders = [run / "final", run / "checkpoint-20", resumed / "final"]
    for saved_folder in folders:
        check_loaded_folder(saved_folder, machine)
    figures = {"losses": losses, "resumed_losses": again, "bleu_step_20": bleu[0], "resumed_apart": apart}
    return (
        f"loss {losses[5]:.2f} -> {losses[20]:.2f} in 20 steps, BLEU at step 20 {bleu[0]:.1f}; resumed "
        f"from checkpoint-10 within {apart:.2%} of its losses; final, checkpoint-20 and the resumed final "
        "load and translate, one embedding matrix each"
    ), figures


def check_deepspeed(stage: int, folder: Path, machine: Machine, sizes: Sizes) -> tuple[str, dict]:
    import importlib.util

    if importlib.util.find_spec("deepspeed") is None:
        raise CheckFailed('DeepSpeed is not installed: pip install -e ".[deepspeed]"')
    model = ZERO3_MODEL if stage == 3 else {}
    return check_training(f"deepspeed_zero{stage}", folder, machine, sizes, model)


def write_wmt14_layout(folder: Path) -> None:
    """The fixture's pairs in the Hub's wmt14 layout: `de-en/<split>-00000-of-00001.parquet`, a `translation`
    column of {de, en}, as tests/test_wmt14_recipe.py lays out its fixture."""
    from datasets import Dataset, Features, Translation

    features = Features({"translation": Translation(languages=["de", "en"])})
    (folder / "de-en").mkdir(parents=True, exist_ok=True)
    for split, name in (("train", "train"), ("validation", "val"), ("test", "test_2016_flickr")):
        german, english = fixture_lines(name, "de", 10**6), fixture_lines(name, "en", 10**6)
        pairs = [{"de": de, "en": en} for de, en in zip(german, english, strict=True)]
        Dataset.from_dict({"translation": pairs}, features=features).to_parquet(
            folder / "de-en" / f"{split}-00000-of-00001.parquet"
        )


def check_wmt14(folder: Path, machine: Machine, sizes: Sizes) -> tuple[str, dict]:
    write_wmt14_layout(folder / "wmt14")
    work = folder / "work"
    work.mkdir()
    (work / "scripts").symlink_to(ROOT / "scripts")  # the recipe's relative paths; its outputs/ stay here
    options = ["--max_steps", "30", "--warmup_steps", "10", "--save_steps", "6", "--logging_steps", "5",
               "--eval_steps", "30", "--max_eval_examples", "50", "--generation_max_length", "32",
               "--num_proc", "2", *machine.precision_options(), *machine.train_options]  # fmt: skip
    env = child_environment(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        DATASET=str(folder / "wmt14"),
        VOCAB_SIZE="400",
        LAUNCH=" ".join(machine.launcher("multi_gpu")),
        TRAIN_OPTIONS=" ".join(options),
    )
    run_logged(["bash", str(WMT14_SCRIPT), "base"], folder / "log.txt", cwd=work, env=env)
    out = work / "outputs" / "wmt14-en-de-base"
    steps = [r["step"] for r in loss_log(out)]
    if max(steps, default=0) != 30:
        raise CheckFailed(f"training ended at step {max(steps, default=0)}, not 30")
    figures = {}
    for split in ("validation", "test"):
        report = out / "averaged" / f"eval-{split}-beam4-lp0.6.json"
        if not report.exists():
            raise CheckFailed(f"no report {report}")
        metrics = json.loads(report.read_text())["metrics"]
        figures[split] = {key: metrics[key] for key in ("bleu", "bleu_paper_tokenized")}
    scores = [
        f"{figures[split]['bleu']:.1f} / {figures[split]['bleu_paper_tokenized']:.1f}" for split in figures
    ]
    return (
        "30 steps of the base model on the tests' fixture in wmt14's layout, the last 5 checkpoints "
        f"averaged; sacreBLEU / tokenized BLEU {scores[0]} (validation), {scores[1]} (test): the pipeline "
        "runs, the model is untrained"
    ), figures


CHECKS = {
    "bf16_sdpa": Check("bf16 + SDPA against float32; the SDPA kernels", 1, 45, check_bf16_sdpa),
    "decoding": Check("greedy and beam decoding, float32 and bf16", 1, 60, check_decoding),
    "train_base": Check("a mixed-precision training step at the WMT14 base shape", 1, 60, check_train_base),
    "marian": Check("ours against MarianMT at the base shape", 1, 120, check_marian),
    "compiled_decoding": Check("static cache + torch.compile decoding", 1, 150, check_compiled_decoding),
    "ddp": Check(
        "DDP in the GPU's own precision: train, resume, load (multi_gpu.yaml)",
        2,
        180,
        lambda *a: check_training("multi_gpu", *a, model={}, chosen=True),
    ),
    "fsdp": Check(
        "FSDP2: train, resume, load (fsdp.yaml)", 2, 180, lambda *a: check_training("fsdp", *a, model={})
    ),
    "deepspeed_zero2": Check(
        "DeepSpeed ZeRO-2: train, resume, load", 2, 240, lambda *a: check_deepspeed(2, *a)
    ),
    "deepspeed_zero3": Check(
        "DeepSpeed ZeRO-3: train, resume, load", 2, 240, lambda *a: check_deepspeed(3, *a)
    ),
    "wmt14": Check("WMT14 base recipe on the fixture (wmt14_en_de.sh)", 2, 360, check_wmt14),
}


def plan(gpus: int, checks: str = "all") -> list[str]:
    """The checks to run on `gpus` GPUs: those `checks` names (comma-separated, or all: every one the GPUs
    allow), in the order of `CHECKS`; a name unknown, or of a check that needs more GPUs, is refused."""
    names = [name.strip() for name in checks.split(",") if name.strip()]
    if names == ["all"]:
        return [name for name, check in CHECKS.items() if check.gpus <= gpus]
    unknown = [name for name in names if name not in CHECKS]
    if unknown or not names:
        raise UsageError(f"--checks {checks}: choose among {', '.join(CHECKS)}, or all.")
    more = [name for name in names if CHECKS[name].gpus > gpus]
    if more:
        raise UsageError(
            f"--checks {checks}: {', '.join(more)} need {max(CHECKS[name].gpus for name in more)} or more "
            f"GPUs; the plan is for {gpus_text(gpus)}."
        )
    return [name for name in CHECKS if name in names]


def gpus_text(gpus: int) -> str:
    return f"{gpus} GPU" + ("" if gpus == 1 else "s")


def plan_table(names: list[str]) -> str:
    """Each check of a plan, its time limit and what it does, and the total."""
    total = sum(CHECKS[name].limit for name in names)
    lines = [f"  {name:<18}{CHECKS[name].limit:>5} s  {CHECKS[name].title}" for name in names]
    return "\n".join(
        [*lines, f"  {'total':<18}{total:>5} s  ({total / 60:.1f} min; start-up and imports apart)"]
    )


def plans_help() -> str:
    """--help's plans, made from `CHECKS`, so that its limits are the ones a run keeps."""
    plans = {"1 GPU": plan(1), "2 or more GPUs": plan(2)}
    return "\n".join(
        f"The plan on {gpus} (check, time limit):\n{plan_table(names)}\n" for gpus, names in plans.items()
    )


def cuda_gpus() -> int:
    """The CUDA GPUs torch sees."""
    import torch

    return torch.cuda.device_count()


def gpu_machine(gpus: int) -> Machine:
    """The first GPU, its mixed precision (what a training run takes there), and what the machine is."""
    import torch

    from hf_vanilla_transformer.devices import default_mixed_precision

    precision = default_mixed_precision()
    description = (
        f"{gpus} x {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}"
    )
    return Machine(device="cuda:0", precision=precision, gpus=gpus, description=description)


def require_gpus(wanted: int | None) -> int:
    """The GPUs to plan for: `wanted`, or all torch sees; refused in one line where it sees none, or fewer."""
    seen = cuda_gpus()
    if seen < (wanted or 1):
        import torch

        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        needs = "1 or more CUDA GPUs" if wanted is None else f"{gpus_text(wanted)} (--gpus {wanted})"
        raise UsageError(f"check_gpus.py needs {needs}; torch {torch.__version__} ({build}) sees {seen}.")
    return wanted or seen


def check_earlier(output_dir: str, names: list[str], overwrite: bool) -> None:
    check_not_a_file(output_dir)
    earlier = [name for name in [*names, REPORT_NAME] if (Path(output_dir) / name).exists()]
    if earlier and not overwrite:
        raise ExistingPathError(
            f"{output_dir} holds earlier checks ({', '.join(earlier)}): pass --overwrite to replace "
            "them, or another --output_dir."
        )


@contextlib.contextmanager
def quiet_libraries():
    """A line per check: the libraries' progress bars and advice go to the checks' logs, not here; put back
    afterwards for a caller in the same process."""
    import datasets
    import transformers

    verbosity, bars = transformers.logging.get_verbosity(), datasets.is_progress_bar_enabled()
    transformers_bars = transformers.utils.logging.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    try:
        yield
    finally:
        transformers.logging.set_verbosity(verbosity)
        if transformers_bars:
            transformers.logging.enable_progress_bar()
        if bars:
            datasets.enable_progress_bars()


def run_check(name: str, folder: Path, machine: Machine, sizes: Sizes) -> dict:
    """Run one check within its time limit, in a fresh `folder`; its outcome (passed, a one-line detail,
    figures, seconds). A check's bug or an unforeseen failure is a FAIL too, its traceback kept in the folder;
    the libraries' warnings go to the folder, not to the output."""
    import torch

    check = CHECKS[name]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    start = time.monotonic()
    figures = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with time_limit(check.limit):
                detail, figures = check.run(folder, machine, sizes)
            passed = True
        except CheckFailed as failure:
            detail, passed, figures = str(failure), False, failure.figures
        except TimeLimitReached:
            detail, passed = f"stopped at its time limit of {check.limit} s", False
        except Exception as error:
            (folder / "traceback.txt").write_text(traceback.format_exc())
            detail, passed = f"{type(error).__name__}: {error} (see {folder / 'traceback.txt'})", False
    if caught:
        (folder / "warnings.txt").write_text("".join(f"{w.category.__name__}: {w.message}\n" for w in caught))
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()  # what this process held on the first GPU, before the next check or launch
    seconds = time.monotonic() - start
    return {
        "passed": passed,
        "detail": detail,
        "seconds": seconds,
        "limit_s": check.limit,
        "figures": figures,
    }


def run_checks(names: list[str], machine: Machine, sizes: Sizes, output_dir: str) -> dict:
    """Run the named checks, a line for each, the report rewritten after each: a run stopped half way keeps
    the checks it finished."""
    import torch

    report = {
        "machine": {**asdict(machine), "torch": torch.__version__, "cuda": torch.version.cuda},
        "plan": {name: CHECKS[name].limit for name in names},
        "checks": {},
    }
    for name in names:
        with quiet_libraries():
            outcome = run_check(name, Path(output_dir) / name, machine, sizes)
        report["checks"][name] = outcome
        status = "PASS" if outcome["passed"] else "FAIL"
        print(f"{status}  {name}: {outcome['detail']} [{outcome['seconds']:.0f} s]", flush=True)
        write_json(Path(output_dir) / REPORT_NAME, report)
    return report


def main(argv: list[str] | None = None) -> None:
    (args,) = parse_arguments(CheckArguments, description=f"{__doc__}\n{plans_help()}", args=argv)
    if args.dry_run:
        gpus = args.gpus or cuda_gpus()
        names = plan(max(gpus, 1), args.checks)
        seen = "" if gpus else " (no CUDA GPU seen here: a run refuses; --gpus N plans for N)"
        print(f"The plan on {gpus_text(max(gpus, 1))}{seen}; nothing is run:\n{plan_table(names)}")
        return
    gpus = require_gpus(args.gpus)
    names = plan(gpus, args.checks)
    check_earlier(args.output_dir, names, args.overwrite)
    machine = gpu_machine(gpus)
    start = time.monotonic()
    report = run_checks(names, machine, SIZES, args.output_dir)
    passed = sum(outcome["passed"] for outcome in report["checks"].values())
    print(
        f"{passed} of {len(names)} checks passed in {(time.monotonic() - start) / 60:.1f} min on "
        f"{machine.description}, {machine.precision}; report {Path(args.output_dir) / REPORT_NAME}"
    )
    if passed < len(names):
        raise SystemExit(1)


if __name__ == "__main__":
    run_script(main)
