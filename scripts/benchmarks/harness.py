"""Speed of this model against transformers' MarianMTModel, the same architecture (post-LN, sinusoidal
positions, tied embeddings), built at identical sizes with random weights and measured interleaved in one
process: only ratios measured in the same run mean anything on a shared machine.

Measured on one device, the CPU or a CUDA GPU (`run_benchmark(..., device=...)`; cuda where there is one):
training target tokens/s (forward + backward + Adam step) and model FLOP utilisation against a matmul peak
measured in the same run on the same device and in the same dtype; generate() new tokens/s for greedy and
beam-4 search at batch 32 and batch 1; time per new token as the prefix grows; peak tensor memory of a
training step and of beam search (the CPU profiler's allocation events on the CPU, the CUDA allocator's
counters on a GPU). Every clock read waits for the device first (`clock`), so that a GPU's queued kernels are
timed, not their launch. Each figure is the median of `repeats` runs after a warm-up, and every run records
the machine's load so that runs taken under load can be spotted; the results name the device, its model and
the mixed precision (no: float32, or bf16 autocast). Optionally, on the CPU, our model exported to
CTranslate2 (float32 and int8) is timed on the same decoding tasks in torch-free worker processes, in the same
interleaved rounds (`CTranslate2Timers`); and greedy generate() with a static cache and its decoding step
compiled by torch.compile, for both models.

`scripts/benchmarks/benchmark.py` is the command line.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from transformers import CompileConfig, LogitsProcessor, LogitsProcessorList, MarianConfig, MarianMTModel

from hf_vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.devices import check_device
from hf_vanilla_transformer.errors import UsageError


@dataclass(frozen=True)
class BenchmarkShape:
    name: str
    vocab_size: int
    d_model: int
    layers: int
    ffn_dim: int
    heads: int


SHAPES = {
    "S": BenchmarkShape("S", 8000, 256, 3, 512, 8),
    "base": BenchmarkShape("base", 37000, 512, 6, 2048, 8),
    "multi30k-recipe": BenchmarkShape("multi30k-recipe", 8000, 256, 3, 1024, 8),
    # Checks that the harness runs; its figures mean nothing.
    "tiny": BenchmarkShape("tiny", 100, 32, 1, 64, 4),
}


def benchmark_device(name: str | torch.device | None = None) -> torch.device:
    """The device `name` gives (None: cuda where there is one, else cpu), refused in one line where this
    machine lacks it or the harness cannot read its clock and memory (anything but cpu and cuda)."""
    if name is None:
        name = "cuda" if torch.cuda.is_available() else "cpu"
    device = check_device(str(name))
    if device.type not in ("cpu", "cuda"):
        raise UsageError(f"--device {name}: the benchmark runs on cpu or cuda (cuda:N).")
    if device.type == "cuda":
        count = torch.cuda.device_count()
        if device.index is None:  # recorded with its index, so that a reader knows which GPU ran
            device = torch.device("cuda", torch.cuda.current_device())
        if device.index >= count:
            raise UsageError(
                f"--device {name}: this machine has {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}."
            )
    return device


def device_name(device: torch.device) -> str:
    """What ran: the GPU's name, or the CPU's model name (Linux's /proc/cpuinfo, else `platform`'s)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def synchronize(device: torch.device) -> None:
    """Wait until `device` has run everything queued on it. A CUDA operator returns as soon as its kernel is
    queued, so a clock read without this would time the queueing; on the CPU an operator has finished when it
    returns."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def clock(device: torch.device) -> float:
    """`time.perf_counter()` once `device` has caught up: every timed region starts and ends with this."""
    synchronize(device)
    return time.perf_counter()


# accelerate's names: matrix products in float32, or under torch.autocast in bfloat16 (weights, optimiser and
# loss stay float32). The dtype is the matmul peak's.
MIXED_PRECISIONS = {"no": torch.float32, "bf16": torch.bfloat16}


def autocast(device: torch.device, mixed_precision: str):
    """The context of every timed forward pass: torch.autocast to bfloat16 for "bf16", none for "no"."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=mixed_precision == "bf16")


def build_models(shape: BenchmarkShape, seed: int = 0) -> dict[str, torch.nn.Module]:
    """Our model and MarianMTModel at the same size, both with dropout 0.1, eval/train toggled by the caller.

    Both train on plain cross-entropy: MarianMTModel's loss has no label smoothing, and ours with the paper's
    0.1 adds a second full-vocabulary gradient in the backward (an add over batch × length × vocabulary
    floats), work Marian would not be doing."""
    common = dict(
        vocab_size=shape.vocab_size,
        d_model=shape.d_model,
        encoder_layers=shape.layers,
        decoder_layers=shape.layers,
        encoder_attention_heads=shape.heads,
        decoder_attention_heads=shape.heads,
        encoder_ffn_dim=shape.ffn_dim,
        decoder_ffn_dim=shape.ffn_dim,
        max_position_embeddings=1024,
        pad_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=1,
        dropout=0.1,
    )
    torch.manual_seed(seed)
    ours = VanillaTransformerForConditionalGeneration(
        VanillaTransformerConfig(**common, bos_token_id=1, label_smoothing=0.0)
    )
    torch.manual_seed(seed)
    marian = MarianMTModel(
        MarianConfig(
            **common,
            activation_function="relu",
            scale_embedding=True,
            forced_eos_token_id=None,
            share_encoder_decoder_embeddings=True,
        )
    )
    for model in (ours, marian):
        # Decoding settings are part of the measurement: the same for both models.
        model.generation_config.forced_eos_token_id = None
        model.generation_config.bad_words_ids = None
    return {"ours": ours, "marian": marian}


def synthetic_tokenizer(vocab_size: int):
    """A word-level tokenizer "w4".."w{V-1}" with our special-token ids: what an export needs, no training."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: index for index, token in enumerate(["<pad>", "<s>", "</s>", "<unk>"])}
    vocab.update({f"w{index}": index for index in range(4, vocab_size)})
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )


def peak_memory_mb(fn: Callable[[], object], device: torch.device) -> float:
    """Peak memory in MiB of the tensors `fn` allocates on `device`, above what was allocated when it started.

    On a CUDA device, the caching allocator's own counters (`torch.cuda.max_memory_allocated`, reset before
    `fn`): live tensors, not the memory the allocator keeps cached.

    On the CPU, replays the profiler's allocation and free events (`profile_memory=True`) in time order: the
    allocator's own count, where the process's resident size would hide allocations that reuse freed heap
    memory. The events are read from `kineto_results`, the record `export_memory_timeline` is built on.
    Profiling slows `fn` down, so this is never combined with a timing.
    """
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device)
        fn()
        synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - start) / 2**20

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        fn()
    events = sorted(
        (event.start_ns(), event.nbytes())
        for event in profiler.profiler.kineto_results.events()
        if event.name() == "[memory]"
    )
    current = peak = 0
    for _, nbytes in events:  # frees are negative
        current += nbytes
        peak = max(peak, current)
    return peak / 2**20


SOURCE_LENGTH = 24  # source tokens of every generation measurement


def generation_inputs(batch_size: int, src_len: int, vocab: int) -> torch.Tensor:
    """The random source batch every generation measurement uses (ours, Marian's and CTranslate2's)."""
    return torch.randint(4, vocab, (batch_size, src_len), generator=torch.Generator().manual_seed(2))


# CTranslate2's GEMM library is chosen when it loads: MKL on Intel CPUs, oneDNN on other x86 CPUs,
# unless CT2_USE_MKL says otherwise. Which is faster depends on the model's size, so the benchmark times both.
CTRANSLATE2_BACKENDS = {"default": {}, "mkl": {"CT2_USE_MKL": "1"}}


class CTranslate2Timers:
    """Our `model` exported to CTranslate2 in float32 and int8, as timers of the decoding `tasks` {name:
    (batch, new_tokens, num_beams)} on the same source batches as `time_generation`, to be interleaved with
    the benchmark's own timers: {(engine, task): timer}, engine one of `CTRANSLATE2_ENGINES`. Each GEMM
    library in `backends` (keys of `CTRANSLATE2_BACKENDS`, chosen as CTranslate2 loads) has its own worker
    process that never imports torch (`ctranslate2_timing.py`); a timer asks it for one decoding and returns
    the seconds the worker measured. Use it as a context manager: leaving it ends the workers and removes
    the exports."""

    # Both OpenMP runtimes keep their threads spinning for a while after a parallel region (the one
    # CTranslate2's wheel brings for 200 ms): a pause before and after each decoding keeps one engine's
    # spinning threads out of the other's timing.
    PAUSE_SECONDS = 0.25

    def __init__(self, model, shape: BenchmarkShape, tasks: dict, backends: tuple[str, ...] = ("default",)):
        self.model, self.shape, self.tasks, self.backends = model, shape, tasks, backends
        self.workers: list[subprocess.Popen] = []

    def __enter__(self) -> dict:
        from hf_vanilla_transformer.interop.ctranslate2_export import convert_to_ctranslate2
        from hf_vanilla_transformer.saving import save_model_folder

        self.folder = tempfile.TemporaryDirectory()
        tmp = self.folder.name
        save_model_folder(self.model.eval(), synthetic_tokenizer(self.shape.vocab_size), f"{tmp}/model")
        models = {
            quantization or "float32": str(
                convert_to_ctranslate2(f"{tmp}/model", f"{tmp}/ct2-{quantization}", quantization=quantization)
            )
            for quantization in (None, "int8")
        }
        job = {
            "models": models,
            "threads": torch.get_num_threads(),
            "tasks": [
                {
                    "name": name,
                    "sources": [
                        [f"w{i}" for i in row]
                        for row in generation_inputs(batch, SOURCE_LENGTH, self.shape.vocab_size).tolist()
                    ],
                    "new_tokens": new_tokens,
                    "num_beams": beams,
                }
                for name, (batch, new_tokens, beams) in self.tasks.items()
            ],
        }
        # Run by its path, not imported: the timing process must never load torch.
        script = os.path.join(os.path.dirname(__file__), "ctranslate2_timing.py")
        timers = {}
        for backend in self.backends:
            worker = subprocess.Popen(
                [sys.executable, script],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=tempfile.TemporaryFile(mode="w+"),
                text=True,
                env={**os.environ, **CTRANSLATE2_BACKENDS[backend]},
            )
            self.workers.append(worker)
            worker.stdin.write(json.dumps(job) + "\n")
            worker.stdin.flush()
            self._answer(worker, backend)  # "ready"
            suffix = "" if backend == "default" else f"_{backend}"
            for model_name in models:
                for task in self.tasks:
                    timers[(f"ct2_{model_name}{suffix}", task)] = functools.partial(
                        self._time, worker, backend, model_name, task
                    )
        return timers

    def _answer(self, worker: subprocess.Popen, backend: str) -> str:
        line = worker.stdout.readline()
        if not line:
            worker.wait()
            worker.stderr.seek(0)
            raise RuntimeError(f"CTranslate2 timing ({backend} GEMM backend) failed:\n{worker.stderr.read()}")
        return line

    def _time(self, worker: subprocess.Popen, backend: str, model_name: str, task: str) -> float:
        time.sleep(self.PAUSE_SECONDS)
        worker.stdin.write(f"{model_name} {task}\n")
        worker.stdin.flush()
        seconds = float(self._answer(worker, backend))
        time.sleep(self.PAUSE_SECONDS)
        return seconds

    def __exit__(self, *exc_info) -> None:
        for worker in self.workers:
            worker.stdin.close()
            worker.wait()
        self.folder.cleanup()


def machine_load() -> float:
    """1-minute load average: about the number of threads when the benchmark has the machine to itself;
    more means other work shared the cores during that round."""
    return os.getloadavg()[0]


def matmul_peak_gflops(
    device: torch.device, mixed_precision: str = "no", size: int | None = None, repeats: int = 5
) -> float:
    """GFLOP/s of the fastest of `repeats` square matrix products on `device` in `mixed_precision`'s dtype."""
    if size is None:
        # A GPU finishes a 2048 product in well under a millisecond, where the launch and the clock would
        # count; 8192 keeps it busy for milliseconds.
        size = 2048 if device.type == "cpu" else 8192
    a, b = (torch.randn(size, size, device=device, dtype=MIXED_PRECISIONS[mixed_precision]) for _ in range(2))
    a @ b
    times = []
    for _ in range(repeats):
        start = clock(device)
        a @ b
        times.append(clock(device) - start)
    return 2 * size**3 / min(times) / 1e9


def training_flops_per_step(model, src_tokens: int, tgt_tokens: int) -> float:
    """6 × (encoder weights × source tokens + decoder and output-projection weights × target tokens):
    the matmul work of forward + backward, attention scores left out."""
    enc = sum(p.numel() for n, p in model.named_parameters() if ".encoder." in f".{n}" and "embed" not in n)
    dec = sum(p.numel() for n, p in model.named_parameters() if ".decoder." in f".{n}" and "embed" not in n)
    head = model.get_output_embeddings().weight.numel()
    return 6 * (enc * src_tokens + (dec + head) * tgt_tokens)


def time_training_step(
    model, batch_size: int, length: int, vocab: int, device: torch.device, mixed_precision: str = "no"
) -> Callable[[], float]:
    """A timer of one training step of `model` (already on `device`) on a fixed random batch."""
    generator = torch.Generator().manual_seed(1)  # drawn on the CPU: the same batch on every device
    inputs = torch.randint(4, vocab, (batch_size, length), generator=generator).to(device)
    labels = torch.randint(4, vocab, (batch_size, length), generator=generator).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

    def step() -> float:
        model.train()
        start = clock(device)
        with autocast(device, mixed_precision):
            loss = model(input_ids=inputs, labels=labels).loss
        loss.backward()  # outside autocast, as torch.autocast's documentation asks
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return clock(device) - start

    return step


def compiled_generation_settings() -> dict:
    """generate() arguments for a static cache and a decoding step compiled by torch.compile (inductor):
    what transformers does by itself on GPUs, asked for explicitly on CPU."""
    # mode "default": transformers' "reduce-overhead" means CUDA graphs. dynamic=False: one graph per batch
    # size, as a deployment with fixed batch sizes would have.
    config = CompileConfig(fullgraph=True, dynamic=False, mode="default")
    config._compile_all_devices = True  # transformers compiles on accelerators only unless told
    return {"cache_implementation": "static", "compile_config": config}


def time_generation(
    model,
    batch_size: int,
    src_len: int,
    new_tokens: int,
    num_beams: int,
    vocab: int,
    device: torch.device,
    generate_kwargs: dict | None = None,
    mixed_precision: str = "no",
) -> Callable[[], float]:
    """A timer of one generate() call of `model` (already on `device`) on `generation_inputs`."""
    inputs = generation_inputs(batch_size, src_len, vocab).to(device)

    def run() -> float:
        model.eval()
        start = clock(device)
        with torch.inference_mode(), autocast(device, mixed_precision):
            model.generate(
                input_ids=inputs,
                num_beams=num_beams,
                do_sample=False,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                length_penalty=1.0,
                early_stopping=False,
                **(generate_kwargs or {}),
            )
        return clock(device) - start

    return run


class _StepClock(LogitsProcessor):
    """Records the time at every decoding step (generate() calls logits processors once per new token)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.stamps: list[float] = []

    def __call__(self, input_ids, scores):
        self.stamps.append(clock(self.device))
        return scores


def per_token_ms_by_prefix(
    model,
    device: torch.device,
    prefixes=(32, 128, 512),
    vocab: int = 8000,
    window: int = 16,
    mixed_precision: str = "no",
) -> dict[int, float]:
    """Median milliseconds per new token (batch 1, greedy) around each prefix length, `model` on `device`."""
    step_clock = _StepClock(device)
    inputs = torch.randint(4, vocab, (1, 32), generator=torch.Generator().manual_seed(3)).to(device)
    model.eval()
    with torch.inference_mode(), autocast(device, mixed_precision):
        model.generate(
            input_ids=inputs,
            num_beams=1,
            do_sample=False,
            max_new_tokens=max(prefixes) + window,
            min_new_tokens=max(prefixes) + window,
            logits_processor=LogitsProcessorList([step_clock]),
        )
    steps = [b - a for a, b in zip(step_clock.stamps, step_clock.stamps[1:], strict=False)]
    return {p: 1000 * statistics.median(steps[p - window // 2 : p + window // 2]) for p in prefixes}


GENERATION_TASKS = {  # name: (batch size, new tokens, beams)
    "greedy_b32_tok_s": (32, 30, 1),
    "beam4_b32_tok_s": (32, 30, 4),
    "greedy_b1_tok_s": (1, 30, 1),
}


# transformers compiles the decoding step of greedy search and sampling only (beam search runs uncompiled).
COMPILED_GENERATION_TASKS = {  # name: (batch size, new tokens, beams)
    "greedy_b32_compiled_tok_s": (32, 30, 1),
    "greedy_b1_compiled_tok_s": (1, 30, 1),
}


# The CTranslate2 columns: float32 and int8 exports, each timed with the default GEMM library and with MKL.
CTRANSLATE2_ENGINES = ("ct2_float32", "ct2_int8", "ct2_float32_mkl", "ct2_int8_mkl")


def interleaved_samples(timers: dict, repeats: int) -> tuple[dict[object, list[float]], list[float]]:
    """Each timer's seconds over `repeats` rounds, after a warm-up round: every timer runs once a round
    (interleaved), so that both sides of a ratio see the same conditions. Also the machine's load after each
    round, so that rounds taken under load can be spotted."""
    for timer in timers.values():
        timer()
    samples: dict = {key: [] for key in timers}
    loads = []
    for _ in range(repeats):
        for key, timer in timers.items():
            samples[key].append(timer())
        loads.append(machine_load())
    return samples, loads


def run_benchmark(
    shapes: list[str],
    repeats: int = 3,
    ctranslate2: bool = False,
    compile: bool = False,
    print_fn=print,
    device: str | torch.device | None = None,
    mixed_precision: str = "no",
) -> dict:
    """Measure every shape in `shapes` (keys of `SHAPES`) on `device` (cpu, cuda or cuda:N; None: cuda where
    there is one, else cpu) with `mixed_precision` (a key of `MIXED_PRECISIONS`: "no", or "bf16" for
    torch.autocast to bfloat16 around every forward pass); with `ctranslate2` (CPU only), also our model
    exported to CTranslate2 in float32 and int8, each timed with CTranslate2's default GEMM library and with
    MKL in the same rounds; with `compile`, also both models' greedy generate() with a static cache and a
    compiled decoding step (the warm-up round compiles; the timed rounds reuse the compiled step). Returns the
    results as `benchmark.py` writes them to JSON: {"device", "device_name", "mixed_precision", "threads",
    "torch", "matmul_peak_gflops", "shapes": {shape: {"ours": {measure: value}, "marian": {...},
    "load_per_round": [...], "spread": {"engine/measure": [slowest, fastest]}, ...}}}."""
    device = benchmark_device(device)
    if mixed_precision not in MIXED_PRECISIONS:
        raise UsageError(f"--mixed_precision {mixed_precision!r}: give one of {', '.join(MIXED_PRECISIONS)}.")
    if ctranslate2 and device.type != "cpu":
        raise UsageError(
            f"--ctranslate2 times the export on the CPU, which compares only with our model on the CPU, "
            f"not on {device}: pass --device cpu, or leave out --ctranslate2."
        )
    torch.set_num_threads(torch.get_num_threads())
    results: dict = {
        "device": str(device),
        "device_name": device_name(device),
        "mixed_precision": mixed_precision,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "shapes": {},
    }
    peak = matmul_peak_gflops(device, mixed_precision)
    results["matmul_peak_gflops"] = peak
    print_fn(
        f"{device} ({results['device_name']}), mixed precision {mixed_precision}: "
        f"matmul peak {peak:.0f} GFLOP/s, {results['threads']} threads (load {machine_load():.2f})"
    )
    for shape_name in shapes:
        shape = SHAPES[shape_name]
        models = {name: model.to(device) for name, model in build_models(shape).items()}
        tasks = {
            "train_tok_s": ("train", 64, 32, 1),
            **{
                name: ("gen", batch, length, beams)
                for name, (batch, length, beams) in GENERATION_TASKS.items()
            },
        }
        if compile:
            tasks.update({name: ("gen_compiled", *task) for name, task in COMPILED_GENERATION_TASKS.items()})
        timers = {}
        for name, model in models.items():
            for task, (kind, batch, length, beams) in tasks.items():
                if kind == "train":
                    timers[(name, task)] = time_training_step(
                        model, batch, length, shape.vocab_size, device, mixed_precision
                    )
                else:
                    settings = compiled_generation_settings() if kind == "gen_compiled" else None
                    timers[(name, task)] = time_generation(
                        model, batch, SOURCE_LENGTH, length, beams, shape.vocab_size, device,
                        generate_kwargs=settings, mixed_precision=mixed_precision,
                    )  # fmt: skip
        with contextlib.ExitStack() as workers:
            if ctranslate2:  # the export's timers join our rounds, each decoding in a torch-free worker
                exported = CTranslate2Timers(
                    models["ours"], shape, GENERATION_TASKS, tuple(CTRANSLATE2_BACKENDS)
                )
                for (engine, task), timer in workers.enter_context(exported).items():
                    timers[(engine, task)] = timer
                    tasks.setdefault(task, ("gen", *GENERATION_TASKS[task]))
            samples, loads = interleaved_samples(timers, repeats)
        shape_result: dict = {"load_per_round": loads, "spread": {}}
        for (name, task), times in samples.items():
            kind, batch, length, beams = tasks[task]
            median = statistics.median(times)
            shape_result.setdefault(name, {})[task] = batch * length / median
            # The slowest and the fastest round, in the same unit as the median.
            shape_result["spread"][f"{name}/{task}"] = [
                batch * length / max(times),
                batch * length / min(times),
            ]
            if kind == "train":
                flops = training_flops_per_step(models[name], batch * length, batch * length)
                shape_result[name]["train_mfu"] = flops / median / 1e9 / peak
        # Per-token time by prefix varies from one decoding run to the next as much as a throughput does:
        # take the median of `repeats` interleaved runs, as for the throughputs.
        by_prefix_runs: dict = {name: [] for name in models}
        for _ in range(repeats):
            for name, model in models.items():
                by_prefix_runs[name].append(
                    per_token_ms_by_prefix(
                        model, device, vocab=shape.vocab_size, mixed_precision=mixed_precision
                    )
                )
        for name in models:
            shape_result[name]["ms_per_token_by_prefix"] = {
                prefix: statistics.median(run[prefix] for run in by_prefix_runs[name])
                for prefix in by_prefix_runs[name][0]
            }
            # Measured apart from the timings, which the profiler would slow down.
            shape_result[name]["train_peak_mb"] = peak_memory_mb(timers[(name, "train_tok_s")], device)
            shape_result[name]["beam4_b32_peak_mb"] = peak_memory_mb(
                timers[(name, "beam4_b32_tok_s")], device
            )
        results["shapes"][shape_name] = shape_result
        print_fn(format_shape(shape_name, shape_result))
    return results


# The operators that run matrix products on CPU (nn.Linear lands in addmm/mm, attention scores in bmm or
# inside SDPA's kernel, which is counted with the rest because it also does softmax and masking).
MATMUL_OPERATORS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def matmul_share(events, wall_seconds: float) -> float:
    """Fraction of a profiled run's wall time spent in matrix products (`MATMUL_OPERATORS`, by self CPU time).
    Wall time, not the operators' total, so that Python's own time between operators counts as not-matmul.
    An engine that removed everything else but ran the same matrix products no faster could be at most
    1 / share times as fast: the bound the profile puts on any speed-up that keeps the math."""
    matmul_us = sum(event.self_cpu_time_total for event in events if event.key in MATMUL_OPERATORS)
    return matmul_us / (wall_seconds * 1e6) if wall_seconds > 0 else 0.0


def profile_shape(shape_name: str, row_limit: int = 8) -> str:
    """`torch.profiler` tables (operators by self CPU time) of one training step, of greedy generate() at
    batch 1 and batch 32 and of beam-4 generate() at batch 32, for both models at `shape_name` on the CPU,
    each with its matrix-product share: where the time goes."""
    from torch.profiler import ProfilerActivity, profile

    shape = SHAPES[shape_name]
    cpu = torch.device("cpu")
    sections = []
    for name, model in build_models(shape).items():
        for task, run in (
            ("training step, batch 64 x 32", time_training_step(model, 64, 32, shape.vocab_size, cpu)),
            (
                "generate greedy, batch 1, 30 tokens",
                time_generation(model, 1, SOURCE_LENGTH, 30, 1, shape.vocab_size, cpu),
            ),
            (
                "generate greedy, batch 32, 30 tokens",
                time_generation(model, 32, SOURCE_LENGTH, 30, 1, shape.vocab_size, cpu),
            ),
            (
                "generate beam 4, batch 32, 30 tokens",
                time_generation(model, 32, SOURCE_LENGTH, 30, 4, shape.vocab_size, cpu),
            ),
        ):
            run()  # warm-up
            with profile(activities=[ProfilerActivity.CPU]) as profiler:
                wall_seconds = run()
            events = profiler.key_averages()
            table = events.table(sort_by="self_cpu_time_total", row_limit=row_limit)
            share = matmul_share(events, wall_seconds)
            sections.append(
                f"\n{shape_name} / {name} / {task}: matrix products {share:.0%} of the wall time "
                f"(an engine running them no faster gains at most {1 / share:.2f}x)\n{table}"
                if share
                else f"\n{shape_name} / {name} / {task}\n{table}"
            )
    return "\n".join(sections)


def format_shape(shape_name: str, result: dict) -> str:
    ours, marian = result["ours"], result["marian"]
    lines = [
        f"\n{shape_name} (load per round: {', '.join(f'{x:.2f}' for x in result['load_per_round'])})",
        f"{'measure':<28}{'ours':>12}{'Marian':>12}{'ours/Marian':>14}",
    ]
    compiled = [key for key in COMPILED_GENERATION_TASKS if key in ours]
    for key in (
        "train_tok_s",
        *GENERATION_TASKS,
        *compiled,
        "train_mfu",
        "train_peak_mb",
        "beam4_b32_peak_mb",
    ):
        ratio = f"{ours[key] / marian[key]:>14.2f}" if marian[key] else f"{'n/a':>14}"
        lines.append(f"{key:<28}{ours[key]:>12.2f}{marian[key]:>12.2f}{ratio}")
    for prefix in ours["ms_per_token_by_prefix"]:
        a, b = ours["ms_per_token_by_prefix"][prefix], marian["ms_per_token_by_prefix"][prefix]
        lines.append(f"{f'ms/token at prefix {prefix}':<28}{a:>12.2f}{b:>12.2f}{a / b:>14.2f}")
    for engine in CTRANSLATE2_ENGINES:
        if engine in result:
            lines.append(f"{engine:<28}{'tokens/s':>12}{'ours':>12}{'ratio':>14}")
            for key, value in result[engine].items():
                lines.append(f"{key:<28}{value:>12.2f}{ours[key]:>12.2f}{value / ours[key]:>14.2f}")
    return "\n".join(lines)


def _figure(value: float) -> str:
    """Whole numbers with thousands separators from 10 up, two decimals below (shares of the matmul peak)."""
    return f"{value:,.0f}" if value >= 10 else f"{value:.2f}"


def _with_spread(result: dict, name: str, key: str) -> str:
    """A median, with its slowest and fastest round where the run recorded them."""
    spread = result.get("spread", {}).get(f"{name}/{key}")
    median = _figure(result[name][key])
    return f"{median} ({_figure(spread[0])}-{_figure(spread[1])})" if spread else median


def format_markdown(results: dict) -> str:
    """The tables of docs/benchmarks.md from a benchmark's JSON: ours against Marian per shape, then
    CTranslate2 against our generate() (the best of its engines per task; each figure with its slowest and
    fastest round where the run recorded them), so that no figure is retyped by hand."""
    if not isinstance(results, dict) or not results.get("shapes"):
        raise UsageError(
            "Not the JSON of a benchmark run (no 'shapes'): "
            "pass the file `scripts/benchmarks/benchmark.py --output` wrote."
        )
    shapes = list(results["shapes"])
    # A result without a device ran on the CPU in float32 and names no model.
    device = results.get("device", "cpu")
    what_ran = f"{device} ({results['device_name']})" if "device_name" in results else device
    mixed_precision, threads = results.get("mixed_precision", "no"), results.get("threads", "?")
    caption = f"Measured on {what_ran}, mixed precision {mixed_precision}, {threads} CPU threads."
    header = "| measure | " + " | ".join(f"{s}: ours | {s}: Marian | {s}: ours/Marian" for s in shapes) + " |"
    lines = [caption, "", header, "|---|" + "---|---|---|" * len(shapes)]
    rows = [
        ("training, target tokens/s", "train_tok_s"),
        ("training, share of matmul peak", "train_mfu"),
        ("generate greedy, batch 32, new tokens/s", "greedy_b32_tok_s"),
        ("generate beam 4, batch 32, new tokens/s", "beam4_b32_tok_s"),
        ("generate greedy, batch 1, new tokens/s", "greedy_b1_tok_s"),
        (
            "generate greedy, batch 32, static cache + torch.compile, new tokens/s",
            "greedy_b32_compiled_tok_s",
        ),
        ("generate greedy, batch 1, static cache + torch.compile, new tokens/s", "greedy_b1_compiled_tok_s"),
        ("peak tensor memory, training step (MiB)", "train_peak_mb"),
        ("peak tensor memory, beam 4 batch 32 (MiB)", "beam4_b32_peak_mb"),
    ]
    for label, key in rows:
        if key not in results["shapes"][shapes[0]]["ours"]:
            continue  # the compiled rows of a run without --compile
        cells = []
        for shape in shapes:
            ours, marian = results["shapes"][shape]["ours"][key], results["shapes"][shape]["marian"][key]
            ratio = "" if key == "train_mfu" else f"{ours / marian:.2f}"
            cells.append(f"{_figure(ours)} | {_figure(marian)} | {ratio}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    cells = []
    for shape in shapes:
        by_prefix = {
            name: results["shapes"][shape][name]["ms_per_token_by_prefix"] for name in ("ours", "marian")
        }
        first, last = min(by_prefix["ours"], key=int), max(by_prefix["ours"], key=int)
        cells.append(
            " | ".join(
                " / ".join(f"{ms:.1f}" for ms in by_prefix[name].values()) for name in ("ours", "marian")
            )
            + f" | {by_prefix['ours'][last] / by_prefix['ours'][first]:.2f} (ours, {last} vs {first})"
        )
    prefixes = " / ".join(str(p) for p in results["shapes"][shapes[0]]["ours"]["ms_per_token_by_prefix"])
    lines.append(f"| ms per new token at prefix {prefixes} (batch 1) | " + " | ".join(cells) + " |")

    engines = [e for e in CTRANSLATE2_ENGINES if e in results["shapes"][shapes[0]]]
    if not engines:
        return "\n".join(lines)
    names = [e.removeprefix("ct2_").replace("_mkl", " MKL") for e in engines]
    header = "| CTranslate2 export, new tokens/s | " + " | ".join(
        " | ".join(f"{s}: {n}" for n in names) + f" | {s}: ours (generate) | {s}: best/ours" for s in shapes
    )
    lines += ["", header + " |", "|---|" + "---|" * ((len(engines) + 2) * len(shapes))]
    for label, key in (
        ("greedy, batch 32", "greedy_b32_tok_s"),
        ("beam 4, batch 32", "beam4_b32_tok_s"),
        ("greedy, batch 1", "greedy_b1_tok_s"),
    ):
        cells = []
        for shape in shapes:
            result = results["shapes"][shape]
            values = [result[e][key] for e in engines]
            ours = result["ours"][key]
            figures = [_with_spread(result, name, key) for name in (*engines, "ours")]
            cells.append(" | ".join(figures) + f" | {max(values) / ours:.2f}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
