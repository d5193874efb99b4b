"""Estimates of how long the paper's WMT14 recipes (scripts/recipes/wmt14_en_de_{base,big}.yaml) take on
current GPUs, from the model's FLOPs (`scripts/estimate_gpu_time.py`). Estimates, not measurements: nothing
is trained.

Work per step: 6 x (encoder weights x source tokens + (decoder weights + output projection) x target tokens),
the matrix products of forward and backward (attention scores left out, a few per cent at WMT lengths), for
the paper's 25,000 source and 25,000 target tokens a step (§5.1), counted on the models the recipes build.
The utilisation a GPU reaches is the unknown. By default it is the one the paper's own runs imply: their
FLOPs over 8 P100s (9.3 TFLOP/s each in float32, the PCIe card's peak; the paper does not say which P100)
for 12 hours (base) or 3.5 days (big). Current GPUs in bfloat16 are assumed to reach that same share of their
dense bfloat16 peak; pass --utilisation to assume another.
"""

import torch

from .. import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration
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
