r"""Draw the cross-attention of every head of one decoder layer for one input, as heat maps labelled with
source and target tokens.

    python scripts/plot_attention.py --model outputs/multi30k-de-en/final \
        --text "Zwei Hunde spielen im Schnee." --layer -1 --output attention.png
    # against a given translation instead of the model's own output:
    python scripts/plot_attention.py --model outputs/multi30k-de-en/final --text "..." --target "..." \
        --output a.png
"""

import argparse

import hf_vanilla_transformer  # noqa: F401  (registers the model with the Auto classes)
from hf_vanilla_transformer.cli import ArgumentParser, run_script
from hf_vanilla_transformer.saving import load_model_folder
from hf_vanilla_transformer.visualization import cross_attention, plot_cross_attention


def main() -> None:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="A saved model folder (with its tokenizer).")
    parser.add_argument("--text", required=True, help="The source text.")
    parser.add_argument("--target", default=None, help="Target text; default: the model's greedy output.")
    parser.add_argument("--layer", type=int, default=-1, help="Decoder layer (negative counts from the top).")
    parser.add_argument("--output", default="attention.png", help="PNG file to write.")
    args = parser.parse_args()

    model, tokenizer = load_model_folder(args.model)
    weights, source_tokens, target_tokens = cross_attention(
        model, tokenizer, args.text, args.target, args.layer
    )
    num_layers = model.config.decoder_layers
    layer = args.layer % num_layers + 1  # counted from 1 at the bottom, as in the paper
    title = f"cross-attention, decoder layer {layer} of {num_layers}: {args.text}"
    path = plot_cross_attention(weights, source_tokens, target_tokens, args.output, title=title)
    print(f"Target: {tokenizer.convert_tokens_to_string(target_tokens)}")
    print(f"Wrote {path}")


if __name__ == "__main__":
    run_script(main)
