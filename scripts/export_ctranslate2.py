r"""Convert a saved model folder to CTranslate2 (optionally int8), then translate a few lines with it.

    python scripts/export_ctranslate2.py --model outputs/multi30k-de-en/averaged \
        --output_dir outputs/ct2/multi30k-de-en-int8 --quantization int8 --force \
        --example "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt."

See `hf_vanilla_transformer.ctranslate2_export` (conversion) and `.ctranslate2_inference` (generation).
"""

import argparse

from hf_vanilla_transformer.cli import ArgumentParser, run_script
from hf_vanilla_transformer.ctranslate2_export import convert_to_ctranslate2
from hf_vanilla_transformer.ctranslate2_inference import CTranslate2Seq2Seq


def main() -> None:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--model", required=True, help="A folder written by save_pretrained / scripts/train.py."
    )
    parser.add_argument("--output_dir", required=True, help="Where to write the CTranslate2 model.")
    parser.add_argument(
        "--quantization",
        default=None,
        help="Weight type: int8, int8_float32, int8_float16, int8_bfloat16, int16, float16, bfloat16 "
        "(default: keep float32).",
    )
    parser.add_argument("--force", action="store_true", help="Replace an existing output_dir.")
    parser.add_argument(
        "--example", action="append", default=[], help="A source line to translate (repeatable)."
    )
    parser.add_argument("--num_beams", type=int, default=None, help="Default: the model's generation_config.")
    args = parser.parse_args()
    output_dir = convert_to_ctranslate2(
        args.model, args.output_dir, quantization=args.quantization, force=args.force
    )
    print(f"Wrote {output_dir}")
    if args.example:
        translator = CTranslate2Seq2Seq(output_dir)
        for source, output in zip(
            args.example, translator.generate(args.example, num_beams=args.num_beams), strict=True
        ):
            print(f"{source}\n  -> {output}")


if __name__ == "__main__":
    run_script(main)
