"""Estimates of how long the paper's WMT14 recipes (scripts/recipes/wmt14_en_de_{base,big}.yaml) take on
current GPUs, from the model's FLOPs (`estimate_gpu_time.py` beside this file). Estimates, not measurements:
nothing is trained.

Work per step: 6 x (encoder weights x source tokens + (decoder weights + output projection) x target tokens),
the matrix products of forward and backward (attention scores left out, a few per cent at WMT lengths), for
the paper's 25,000 source and 25,000 target tokens a step (§5.1), counted on the models the recipes build.
The utilisation a GPU reaches is the unknown. By default it is the one the paper's own runs imply: their
FLOPs over 8 P100s (9.3 TFLOP/s each in float32, the PCIe card's peak; the paper does not say which P100)
for 12 hours (base) or 3.5 days (big). Current GPUs in bfloat16 are assumed to reach that same share of their
dense bfloat16 peak; pass --utilisation to assume another.

Past one machine (`scale_out`, `--scale_out`): the paper's models on 8 GPUs and on 2 nodes of 8 under DDP,
with the memory a GPU holds (the training state's bytes per parameter, and a training step's peak counted by
torch's `MemTracker` on fake tensors), the time per step at the same utilisation, and what the all-reduce of
the gradients costs at the links' rates in the vendors' data sheets.
"""

import torch

from hf_vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration

from .harness import training_flops_per_step

TOKENS_PER_STEP = 25_000  # per side (§5.1)
P100_FP32_TFLOPS = 9.3
# preset: (steps, the paper's hours on 8 P100s) (§5.2)
PAPER_RUNS = {"transformer-base": (100_000, 12.0), "transformer-big": (300_000, 3.5 * 24)}
# Dense bfloat16 tensor-core peaks from the vendors' data sheets, TFLOP/s.
GPUS = {"NVIDIA L4": 121.0, "NVIDIA A100": 312.0, "NVIDIA H100 SXM": 989.0}


def flops_per_step(preset: str, vocab_size: int) -> tuple[float, int]:
    """Training FLOPs of one step of the paper's batch, and the parameter count, of a preset's model."""
    config = VanillaTransformerConfig.from_preset(preset, vocab_size=vocab_size)
    with torch.device("meta"):  # shapes only: no memory, no initialisation
        model = VanillaTransformerForConditionalGeneration(config)
    parameters = sum(p.numel() for p in model.parameters())
    return training_flops_per_step(model, TOKENS_PER_STEP, TOKENS_PER_STEP), parameters


def estimate(vocab_size: int, utilisation: float | None) -> list[dict]:
    rows = []
    for preset, (steps, paper_hours) in PAPER_RUNS.items():
        per_step, parameters = flops_per_step(preset, vocab_size)
        total = per_step * steps
        implied = total / (paper_hours * 3600 * 8 * P100_FP32_TFLOPS * 1e12)
        assumed = implied if utilisation is None else utilisation
        hours = {gpu: total / (peak * 1e12 * assumed) / 3600 for gpu, peak in GPUS.items()}
        rows.append(
            {
                "preset": preset,
                "parameters": parameters,
                "steps": steps,
                "flops_per_step": per_step,
                "total_flops": total,
                "paper_hours_8_p100": paper_hours,
                "paper_utilisation": implied,
                "assumed_utilisation": assumed,
                "hours_1_gpu": hours,
            }
        )
    return rows


def format_table(rows: list[dict]) -> str:
    header = "| model | parameters | training FLOPs | paper: 8 x P100 | " + " | ".join(
        f"{gpu}: 1 GPU (8 GPUs)" for gpu in GPUS
    )
    lines = [header + " |", "|" + "---|" * (4 + len(GPUS))]
    for row in rows:
        cells = [
            row["preset"],
            f"{row['parameters'] / 1e6:.0f}M",
            f"{row['total_flops']:.2e} ({row['steps']:,} steps)",
            f"{row['paper_hours_8_p100']:.0f} h (utilisation {row['paper_utilisation']:.0%})",
            *(f"{hours:.1f} h ({hours / 8:.1f} h)" for hours in row["hours_1_gpu"].values()),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    assumed = ", ".join(f"{row['preset']} {row['assumed_utilisation']:.0%}" for row in rows)
    lines.append(
        f"\nEstimates from FLOPs, not measurements: an assumed utilisation of the bfloat16 peak ({assumed}), "
        "and 8 GPUs 8 times as fast as one."
    )
    return "\n".join(lines)


# Past one machine (`--scale_out`): 8 GPUs on one node, and 2 nodes of 8, at the recipe's tokens per step.
SCALE_GPUS = ("NVIDIA A100", "NVIDIA H100 SXM")
GPUS_PER_NODE = 8
RECIPE_MAX_TOKENS = 3500  # per GPU on 8 GPUs: `max_tokens` of scripts/recipes/wmt14_en_de_{base,big}.yaml
SENTENCE_LENGTH = 50  # of the counted batch; the attention masks are the only term that grows with it
# Bytes per parameter held for the whole run under DDP with bfloat16 autocast (the recipes' precision on such
# GPUs): float32 weights (autocast casts them per operation), float32 gradients, the float32 buckets DDP
# copies them into for the all-reduce (`gradient_as_bucket_view=False`, Accelerate's default; torch's DDP
# docstring says a view would save "the total gradients size"), and Adam's two float32 moments.
DDP_STATE_BYTES = {"weights": 4, "gradients": 4, "DDP buckets": 4, "Adam moments": 8}
GRADIENT_BYTES = 4  # DDP all-reduces the float32 gradients (no communication hook)
# NVLink per GPU and direction, GB/s: half the data sheets' 600 (A100) and 900 (H100), which count both ways.
NVLINK_GB_S = {"NVIDIA A100": 300.0, "NVIDIA H100 SXM": 450.0}
# What one node can send to the other per second, GB/s: the compute fabric of the DGX A100 and DGX H100 data
# sheets (8 single-port InfiniBand adapters of 200 or 400 Gb/s), and one 100 Gb/s Ethernet port.
INTER_NODE_GB_S = {"8 x 200 Gb/s": 200.0, "8 x 400 Gb/s": 400.0, "1 x 100 Gb/s": 12.5}


def training_step_memory(preset: str, vocab_size: int, tokens: int, length: int = SENTENCE_LENGTH) -> dict:
    """Peak bytes of one forward and backward pass of a preset's model on `tokens` source and `tokens` target
    tokens (sentences of `length`), in training mode under bfloat16 autocast, as torch's `MemTracker` counts
    them on fake tensors (shapes and dtypes only: nothing is allocated or computed). The count follows the CPU
    kernels, which keep dropout masks in the activations' dtype where CUDA keeps one byte: slightly high."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    config = VanillaTransformerConfig.from_preset(preset, vocab_size=vocab_size)
    batch = max(1, tokens // length)
    with FakeTensorMode():
        model = VanillaTransformerForConditionalGeneration(config).train()
        input_ids = torch.randint(4, vocab_size, (batch, length))
        labels = torch.randint(4, vocab_size, (batch, length))
        attention_mask = torch.ones(batch, length, dtype=torch.long)
        tracker = MemTracker()
        tracker.track_external(model, input_ids, labels, attention_mask)
        with tracker:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
            loss.backward()
    # One device: {kind of memory (an Enum of str): bytes, "Total": bytes}.
    (peak,) = tracker.get_tracker_snapshot("peak").values()
    by_kind = {getattr(kind, "value", kind): size for kind, size in peak.items()}
    return {
        "tokens": batch * length,
        "peak": by_kind["Total"],
        "activations": by_kind["Activation"],
        "temporaries": by_kind["Temp"],
    }


def scale_out(vocab_size: int, utilisation: float | None, step_memory=training_step_memory) -> list[dict]:
    """For each paper model, on 1 and on 2 nodes of 8 GPUs: the accelerate config, the per-GPU token budget
    that keeps the recipe's tokens per step, memory per GPU, time per step and to the paper's steps (FLOPs at
    the assumed utilisation), and the gradient all-reduce's bytes and time at the links' full rate."""
    rows = []
    for run in estimate(vocab_size, utilisation):
        parameters = run["parameters"]
        for nodes in (1, 2):
            processes = GPUS_PER_NODE * nodes
            max_tokens = RECIPE_MAX_TOKENS // nodes
            memory = step_memory(run["preset"], vocab_size, max_tokens)
            states = sum(DDP_STATE_BYTES.values()) * parameters
            # The step's peak counts the weights and the gradients as they build; Adam's moments and DDP's
            # buckets are held besides, all along.
            peak = (
                memory["peak"]
                + (DDP_STATE_BYTES["Adam moments"] + DDP_STATE_BYTES["DDP buckets"]) * parameters
            )
            gradient_bytes = GRADIENT_BYTES * parameters
            step_seconds = {
                gpu: run["flops_per_step"] / (processes * GPUS[gpu] * 1e12 * run["assumed_utilisation"])
                for gpu in SCALE_GPUS
            }
            # A ring all-reduce sends and receives 2 (n - 1) / n of the gradients on each of n GPUs; between m
            # nodes, each must send at least 2 (m - 1) / m of them, which for two nodes is all of them.
            ring = 2 * (GPUS_PER_NODE - 1) / GPUS_PER_NODE * gradient_bytes
            rows.append(
                {
                    "preset": run["preset"],
                    "nodes": nodes,
                    "processes": processes,
                    "config": "multi_node.yaml" if nodes > 1 else "multi_gpu.yaml",
                    "max_tokens": max_tokens,
                    "tokens_per_step": processes * max_tokens,
                    "parameters": parameters,
                    "state_bytes": states,
                    "activation_bytes": memory["activations"],
                    "temporary_bytes": memory["temporaries"],
                    "peak_bytes": peak,
                    "steps": run["steps"],
                    "paper_hours_8_p100": run["paper_hours_8_p100"] if nodes == 1 else None,
                    "assumed_utilisation": run["assumed_utilisation"],
                    "step_seconds": step_seconds,
                    "tokens_per_second": {gpu: TOKENS_PER_STEP / s for gpu, s in step_seconds.items()},
                    "hours": {gpu: run["steps"] * s / 3600 for gpu, s in step_seconds.items()},
                    "gradient_bytes": gradient_bytes,
                    "nvlink_seconds": {gpu: ring / (NVLINK_GB_S[gpu] * 1e9) for gpu in SCALE_GPUS},
                    "inter_node_seconds": (
                        {fabric: gradient_bytes / (rate * 1e9) for fabric, rate in INTER_NODE_GB_S.items()}
                        if nodes > 1
                        else {}
                    ),
                }
            )
    return rows


def format_scale_table(rows: list[dict]) -> str:
    """The rows of `scale_out` as one Markdown table, a column per model and machine count."""
    a100, h100 = SCALE_GPUS

    def pair(values: dict, scale: float, digits: int) -> str:
        return f"{values[a100] * scale:,.{digits}f} / {values[h100] * scale:,.{digits}f}"

    def duration(hours: float) -> str:
        return f"{hours:.1f} h" if hours >= 1 else f"{hours * 60:.0f} min"

    def model(row: dict) -> str:
        return row["preset"].removeprefix("transformer-")

    def machines(row: dict) -> str:
        return f"{GPUS_PER_NODE} GPUs" if row["nodes"] == 1 else f"{row['nodes']} x {GPUS_PER_NODE} GPUs"

    lines = {
        "accelerate config": lambda r: f"`{r['config']}` (DDP, {r['processes']} processes)",
        "`--max_tokens` per GPU (tokens a step)": lambda r: f"{r['max_tokens']:,} ({r['tokens_per_step']:,})",
        "weights, gradients, DDP buckets, Adam (20 B/parameter)": lambda r: (
            f"{r['state_bytes'] / 1e9:.2f} GB"
        ),
        "activations kept for backward / temporaries, at the peak": lambda r: (
            f"{r['activation_bytes'] / 1e9:.2f} / {r['temporary_bytes'] / 1e9:.2f} GB"
        ),
        "peak per GPU": lambda r: f"{r['peak_bytes'] / 1e9:.1f} GB",
        "compute per step, A100 / H100": lambda r: f"{pair(r['step_seconds'], 1e3, 1)} ms",
        "target tokens/s, all GPUs, A100 / H100": lambda r: f"{pair(r['tokens_per_second'], 1e-6, 1)} M",
        "time to the paper's 100,000 (base) / 300,000 (big) steps, A100 / H100": lambda r: (
            f"{duration(r['hours'][a100])} / {duration(r['hours'][h100])}"
        ),
        "the paper, 8 P100s": lambda r: (
            f"{r['paper_hours_8_p100']:.0f} h" if r["paper_hours_8_p100"] is not None else "-"
        ),
        "gradients all-reduced per step (float32)": lambda r: f"{r['gradient_bytes'] / 1e6:,.0f} MB",
        "all-reduce in the node, NVLink A100 / H100": lambda r: f"{pair(r['nvlink_seconds'], 1e3, 1)} ms",
        f"all-reduce between the nodes, at least, {' / '.join(INTER_NODE_GB_S)}": lambda r: (
            " / ".join(f"{s * 1e3:.1f}" for s in r["inter_node_seconds"].values()) + " ms"
            if r["inter_node_seconds"]
            else "-"
        ),
    }
    header = "| | " + " | ".join(f"{model(r)}, {machines(r)}" for r in rows) + " |"
    table = [header, "|" + "---|" * (len(rows) + 1)]
    table += [f"| {name} | " + " | ".join(cell(r) for r in rows) + " |" for name, cell in lines.items()]
    assumed = ", ".join(sorted({f"{model(r)} {r['assumed_utilisation']:.0%}" for r in rows}))
    table.append(
        "\nEstimates, not measurements: memory counted on fake tensors under bfloat16 autocast (sentences "
        f"of {SENTENCE_LENGTH} tokens filling the budget); time from FLOPs at an assumed share of the "
        f"bfloat16 peak ({assumed}); all-reduce at the links' full rate."
    )
    return "\n".join(table)
