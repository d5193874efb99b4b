r"""Translate text files line by line with a saved model: one output line for each input line, in order, for
files of millions of lines (a window of lines at a time, sorted and batched by length, written as it is done).

    python scripts/translate.py --model outputs/multi30k-de-en/final --input news.de --output news.en
    cat news.de | python scripts/translate.py --model outputs/multi30k-de-en/final > news.en
    # two processes, each with its share of every window's batches (on GPUs, drop --device cpu)
    accelerate launch --multi_gpu --num_processes 2 scripts/translate.py \
        --model outputs/multi30k-de-en/final --input news.de --output news.en --device cpu
    python scripts/translate.py --backend ctranslate2 --model outputs/ct2/multi30k-de-en-int8 \
        --input news.de --output news.en

Decoding is the model folder's saved generation config unless the decoding options say otherwise (the same
options as evaluate_model.py's), each output at most its source's length + 50 tokens (§6.1). An interrupted
--output is continued by the same command; `--split_sentences true` translates each line as a text, sentence
by sentence.
"""

import logging
import sys

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.decoding.arguments import TranslateArguments


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("hf_vanilla_transformer.decoding.translating").setLevel(logging.INFO)
    (args,) = parse_arguments(TranslateArguments, description=__doc__)
    # After the options are parsed: `--help` and a mistake are answered without the translator's modules,
    # which import only what the chosen backend needs.
    from hf_vanilla_transformer.decoding.translating import translate

    summary = translate(args)
    if summary["output"] is not None and summary["is_main"]:
        after = summary["continued_after"]
        continued = f", continuing after line {after}" if after else ""
        print(
            f"Translated {summary['translated']} lines in {summary['seconds']} s{continued}: "
            f"{summary['output']} holds {summary['lines']}.",
            file=sys.stderr,
        )


if __name__ == "__main__":
    run_script(main)
