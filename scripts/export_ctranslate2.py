r"""Convert a saved model folder to CTranslate2 (optionally int8), then translate a few lines with it.

    python scripts/export_ctranslate2.py --model outputs/multi30k-de-en/averaged \
        --output_dir outputs/ct2/multi30k-de-en-int8 --quantization int8 --overwrite \
        --example "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt."

See `hf_vanilla_transformer.interop.ctranslate2_export` (conversion) and `ctranslate2_inference` (generation).
"""

from dataclasses import dataclass, field

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.extras import require
from hf_vanilla_transformer.options import Options


@dataclass
class ExportArguments(Options):
    model: str = field(metadata={"help": "A folder written by save_pretrained / scripts/train.py."})
    output_dir: str = field(metadata={"help": "Where to write the CTranslate2 model."})
    quantization: str | None = field(
        default=None,
        metadata={
            "help": "Weight type: int8, int8_float32, int8_float16, int8_bfloat16, int16, float16, bfloat16 "
            "(default: keep float32)."
        },
    )
    overwrite: bool = field(default=False, metadata={"help": "Replace an existing output_dir."})
    example: list[str] | None = field(
        default=None, metadata={"help": "Source lines to translate with the exported model."}
    )
    num_beams: int | None = field(
        default=None, metadata={"help": "Default: the model's generation_config.", "range": ">= 1"}
    )


def main() -> None:
    (args,) = parse_arguments(ExportArguments, description=__doc__)
    require("ctranslate2", "The CTranslate2 export")
    # Imported once the extra is known to be there: both modules import ctranslate2.
    from hf_vanilla_transformer.interop.ctranslate2_export import convert_to_ctranslate2
    from hf_vanilla_transformer.interop.ctranslate2_inference import CTranslate2Seq2Seq

    output_dir = convert_to_ctranslate2(
        args.model, args.output_dir, quantization=args.quantization, force=args.overwrite
    )
    print(f"Wrote {output_dir}")
    if args.example:
        translator = CTranslate2Seq2Seq(output_dir)
        for source, output in zip(
            args.example, translator.generate(args.example, beam_size=args.num_beams), strict=True
        ):
            print(f"{source}\n  -> {output}")


if __name__ == "__main__":
    run_script(main)
