r"""Convert a MarianMTModel (an OPUS-MT model on the Hub, or a local folder) into a folder of this package
that computes what the Marian model computes and decodes as it did.

    python scripts/convert_marian.py --model Helsinki-NLP/opus-mt-de-en --output_dir outputs/opus-mt-de-en
    python scripts/convert_marian.py --model path/to/marian-folder --output_dir outputs/converted

Needs `pip install -e ".[marian]"` (sentencepiece, for Marian's tokenizers); a Hub id needs the network.
"""

from dataclasses import dataclass, field

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.outputs import check_output_location, staged


@dataclass
class ConvertArguments:
    model: str = field(metadata={"help": "A MarianMTModel folder or Hub id."})
    output_dir: str = field(metadata={"help": "Where to write the converted folder."})
    overwrite: bool = field(default=False, metadata={"help": "Replace what an existing output holds."})


def main() -> None:
    (args,) = parse_arguments(ConvertArguments, description=__doc__)
    # torch, once the options are known to be right (`--help` and a mistyped option answer at once)
    from hf_vanilla_transformer.tasks.translation.marian import convert_marian

    check_output_location(args.output_dir, args.overwrite)
    with staged(args.output_dir) as staging:
        convert_marian(args.model, staging)
    print(f"Wrote {args.output_dir}")


if __name__ == "__main__":
    run_script(main)
