r"""Convert a MarianMTModel (an OPUS-MT model on the Hub, or a local folder) into a folder of this package
that computes what the Marian model computes and decodes as it did.

    python scripts/convert_marian.py --model Helsinki-NLP/opus-mt-de-en --output_dir outputs/opus-mt-de-en
    python scripts/convert_marian.py --model path/to/marian-folder --output_dir outputs/converted

Needs `pip install -e ".[marian]"` (sentencepiece, for Marian's tokenizers); a Hub id needs the network.
"""

import argparse

from hf_vanilla_transformer.cli import ArgumentParser, run_script
from hf_vanilla_transformer.marian import convert_marian


def main() -> None:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="A MarianMTModel folder or Hub id.")
    parser.add_argument("--output_dir", required=True, help="Where to write the converted folder.")
    args = parser.parse_args()
    try:
        folder = convert_marian(args.model, args.output_dir)
    except (FileNotFoundError, ValueError) as error:  # a wrong path or not a Marian model: say which
        parser.error(str(error))
    print(f"Wrote {folder}")


if __name__ == "__main__":
    run_script(main)
