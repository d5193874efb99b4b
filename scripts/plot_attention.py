r"""Draw the cross-attention of every head of one decoder layer for one input, as heat maps labelled with
source and target tokens.

    python scripts/plot_attention.py --model outputs/multi30k-de-en/final \
        --text "Zwei Hunde spielen im Schnee." --layer -1 --output attention.png
    # against a given translation instead of the model's own output:
    python scripts/plot_attention.py --model outputs/multi30k-de-en/final --text "..." --target "..." \
        --output a.png
"""

import argparse

from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from hf_vanilla_transformer.visualization import cross_attention, plot_cross_attention


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", required=True, help="A saved model folder (with its tokenizer).")
    parser.add_argument("--text", required=True, help="The source text.")
    parser.add_argument("--target", default=None, help="Target text; default: the model's greedy output.")
    parser.add_argument("--layer", type=int, default=-1, help="Decoder layer (negative counts from the top).")
    parser.add_argument("--output", default="attention.png", help="PNG file to write.")
    args = parser.parse_args()

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForSeq2SeqLM.from_pretrained(args.model)
    weights, source_tokens, target_tokens = cross_attention(
        model, tokenizer, args.text, args.target, args.layer
    )
    title = f"cross-attention, decoder layer {args.layer}: {args.text}"
    path = plot_cross_attention(weights, source_tokens, target_tokens, args.output, title=title)
    print(f"Target: {tokenizer.convert_tokens_to_string(target_tokens)}")
    print(f"Wrote {path}")


if __name__ == "__main__":
    main()
