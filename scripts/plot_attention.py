r"""Draw the cross-attention of every head of one decoder layer for one input, as heat maps labelled with
source and target tokens. `cross_attention` and `plot_cross_attention` draw the demo page's maps too.

    python scripts/plot_attention.py --model outputs/multi30k-de-en/final \
        --text "Zwei Hunde spielen im Schnee." --layer -1 --output_file attention.png
    # against a given translation instead of the model's own output:
    python scripts/plot_attention.py --model outputs/multi30k-de-en/final --text "..." --target "..." \
        --output_file a.png
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.extras import require
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.outputs import staged
from hf_vanilla_transformer.sentences import normalize_text
from hf_vanilla_transformer.tasks.registry import task_or_plain

if TYPE_CHECKING:
    import torch


def cross_attention(
    model, tokenizer, source: str, target: str | None = None, layer: int = -1, **generate_kwargs
):
    """Cross-attention weights of one decoder layer for one input.

    Without `target`, the model's own output (greedy unless `generate_kwargs` say otherwise) is used.
    Returns `(weights, source_tokens, target_tokens)` with weights of shape (heads, target_len, source_len):
    row i is where the decoder looked when it predicted target token i.
    """
    import torch

    model.eval()
    inputs = tokenizer(source, return_tensors="pt").to(model.device)
    if target is None:
        generate_kwargs.setdefault("num_beams", 1)
        with torch.inference_mode():
            sequence = model.generate(**inputs, **generate_kwargs)[0]  # starts with decoder_start_token_id
        labels = sequence[1:]
    else:
        labels = tokenizer(text_target=target, return_tensors="pt")["input_ids"][0].to(model.device)
    decoder_input_ids = model.prepare_decoder_input_ids_from_labels(labels.unsqueeze(0))
    with torch.inference_mode():
        out = model(**inputs, decoder_input_ids=decoder_input_ids, output_attentions=True)
    num_layers = len(out.cross_attentions)
    if not -num_layers <= layer < num_layers:
        raise UsageError(
            f"The decoder has {num_layers} layers; `layer` must be in [{-num_layers}, {num_layers})."
        )
    weights = out.cross_attentions[layer][0].float().cpu()  # (heads, T_tgt, T_src)
    source_tokens = _tokens(tokenizer, inputs["input_ids"][0].tolist())
    target_tokens = _tokens(tokenizer, labels.tolist())
    return weights, source_tokens, target_tokens


def _tokens(tokenizer, ids: list[int]) -> list[str]:
    """The tokens of `ids`; an id the tokenizer does not have (a model whose output layer is larger than its
    vocabulary, e.g. padded to a multiple of 8, can emit one) is shown as `[id]`."""
    tokens = tokenizer.convert_ids_to_tokens(ids)
    return [f"[{i}]" if token is None else token for i, token in zip(ids, tokens, strict=True)]


def label_stride(num_tokens: int, room: float) -> int:
    """Label every n-th of `num_tokens` tokens so that the labels fit in `room` cells. The room is rounded
    first: 7 tokens in 7 cells computed in floats (1.96 / 0.28 = 7.000000000000001) all fit."""
    return max(1, math.ceil(num_tokens / max(1, math.floor(round(room, 6)))))


MAX_PANEL_INCHES = 12.0  # a side of one head's map: 8 heads at 110 dpi make at most 5,280 x 2,640 pixels


def plot_cross_attention(
    weights: torch.Tensor,
    source_tokens,
    target_tokens,
    path: str | Path,
    title: str = "",
    head_titles: Sequence[str] | None = None,
) -> Path:
    """One heat map per head, rows labelled with target tokens and columns with source tokens; a PNG.

    `head_titles` names the maps (default "head 0", "head 1", ...), e.g. `["mean over heads"]` for a
    `weights` of one averaged map."""
    matplotlib = require("matplotlib", "Drawing attention maps")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heads = weights.shape[0]
    cols = min(4, heads)
    rows = math.ceil(heads / cols)
    # A cell per token up to MAX_PANEL_INCHES a side; longer texts get smaller cells and every n-th label,
    # so that a long input still makes an image of bounded size.
    cell = 0.28
    width = min(MAX_PANEL_INCHES, max(3.0, cell * len(source_tokens) + 1.5))
    height = min(MAX_PANEL_INCHES, max(2.5, cell * len(target_tokens) + 1.2))
    source_every = label_stride(len(source_tokens), (width - 1.5) / cell)
    target_every = label_stride(len(target_tokens), (height - 1.2) / cell)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    for head in range(rows * cols):
        ax = axes[head // cols][head % cols]
        if head >= heads:
            ax.axis("off")
            continue
        ax.imshow(weights[head].numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(
            range(0, len(source_tokens), source_every), source_tokens[::source_every], rotation=90, fontsize=7
        )
        ax.set_yticks(range(0, len(target_tokens), target_every), target_tokens[::target_every], fontsize=7)
        ax.set_title(head_titles[head] if head_titles else f"head {head}", fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    # tight_layout leaves no room for the suptitle by itself: keep the top 0.4 inch for it.
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.4 / (height * rows)) if title else None)
    path = Path(path)
    with staged(path, "--output_file", folder=False) as staging:
        fig.savefig(staging, dpi=110, format=path.suffix.lstrip(".") or "png")
    plt.close(fig)
    return path


@dataclass
class PlotArguments(Options):
    model: str = field(metadata={"help": "A saved model folder (with its tokenizer)."})
    text: str = field(metadata={"help": "The source text."})
    target: str | None = field(
        default=None, metadata={"help": "Target text; default: the model's greedy output."}
    )
    layer: int = field(
        default=-1, metadata={"help": "Decoder layer (negative counts from the top).", "range": "any"}
    )
    output_file: str = field(
        default="attention.png", metadata={"help": "PNG file to write (its folder is made if missing)."}
    )
    overwrite: bool = field(default=False, metadata={"help": "Replace an existing output_file."})


def main() -> None:
    (args,) = parse_arguments(PlotArguments, description=__doc__)
    args.text = normalize_text(args.text)  # as the pipeline reads it
    if not args.text.strip():
        raise UsageError("--text is empty: give the source text whose attention to draw.")
    if Path(args.output_file).exists() and not args.overwrite:
        raise UsageError(
            f"{args.output_file} exists: pass --overwrite to replace it, or another --output_file."
        )
    # torch and the model, once the options are known to be right (`--help` answers without them)
    from transformers import AutoConfig

    from hf_vanilla_transformer.saving import check_model_location, load_model_folder, model_task

    check_model_location(args.model)
    # Outside what it was trained on a model still answers, confidently and wrongly.
    task = task_or_plain(model_task(AutoConfig.from_pretrained(args.model), args.model))
    task.check_input(args.text)
    model, tokenizer = load_model_folder(args.model)
    Path(args.output_file).parent.mkdir(parents=True, exist_ok=True)
    weights, source_tokens, target_tokens = cross_attention(
        model, tokenizer, args.text, args.target, args.layer
    )
    num_layers = model.config.decoder_layers
    layer = args.layer % num_layers + 1  # counted from 1 at the bottom, as in the paper
    title = f"cross-attention, decoder layer {layer} of {num_layers}: {args.text}"
    path = plot_cross_attention(weights, source_tokens, target_tokens, args.output_file, title=title)
    print(f"Target: {tokenizer.convert_tokens_to_string(target_tokens)}")
    print(f"Wrote {path}, titled {title!r}")


if __name__ == "__main__":
    run_script(main)
