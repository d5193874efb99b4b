r"""Draw the cross-attention of every head of one decoder layer for one input, as heat maps labelled with
source and target tokens.

    python scripts/plot_attention.py --model outputs/multi30k-de-en/final \
        --text "Zwei Hunde spielen im Schnee." --layer -1 --output_file attention.png
    # against a given translation instead of the model's own output:
    python scripts/plot_attention.py --model outputs/multi30k-de-en/final --text "..." --target "..." \
        --output_file a.png
"""

from dataclasses import dataclass, field
from pathlib import Path

from transformers import AutoConfig

import hf_vanilla_transformer  # noqa: F401  (registers the model with the Auto classes)
from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.saving import check_model_location, load_model_folder, model_task
from hf_vanilla_transformer.series.grammar import check_model_input
from hf_vanilla_transformer.visualization import cross_attention, plot_cross_attention


@dataclass
class PlotArguments:
    model: str = field(metadata={"help": "A saved model folder (with its tokenizer)."})
    text: str = field(metadata={"help": "The source text."})
    target: str | None = field(
        default=None, metadata={"help": "Target text; default: the model's greedy output."}
    )
    layer: int = field(default=-1, metadata={"help": "Decoder layer (negative counts from the top)."})
    output_file: str = field(
        default="attention.png", metadata={"help": "PNG file to write (its folder is made if missing)."}
    )
    overwrite: bool = field(default=False, metadata={"help": "Replace an existing output_file."})


def main() -> None:
    (args,) = parse_arguments(PlotArguments, description=__doc__)
    if not args.text.strip():
        raise UsageError("--text is empty: give the source text whose attention to draw.")
    if Path(args.output_file).exists() and not args.overwrite:
        raise UsageError(
            f"{args.output_file} exists: pass --overwrite to replace it, or another --output_file."
        )
    check_model_location(args.model)
    if model_task(AutoConfig.from_pretrained(args.model), args.model) == "series":
        check_model_input(args.text)  # outside its grammar the model still answers, confidently and wrongly
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
