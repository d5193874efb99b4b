r"""Build a translation DatasetDict (Hub schema) from the Hub, a local dataset or parallel text files, and
save it to disk.

    # Multi30k from the Hub (bentrevett/multi30k: columns `en` and `de`, packed into `translation`)
    python scripts/prepare_translation.py --dataset bentrevett/multi30k --source_lang de --target_lang en \
        --output_dir outputs/data/multi30k-de-en

    # Multi30k's raw files (train.de.gz, val.de.gz, test_2016_flickr.de.gz, ... in one folder)
    python scripts/prepare_translation.py --dataset path/to/multi30k --source_lang de --target_lang en \
        --output_dir outputs/data/multi30k-de-en

    # ... and tokenize it too (saved to --output_dir + "-tokenized" unless --tokenized_output_dir is given)
    python scripts/prepare_translation.py --dataset path/to/multi30k --source_lang de --target_lang en \
        --output_dir outputs/data/multi30k-de-en --tokenizer outputs/tokenizers/multi30k-de-en-bpe8k

    # Any other Hub dataset, or a local save_to_disk / parquet / JSON Lines folder (the Hub needs the network)
    python scripts/prepare_translation.py --dataset wmt/wmt14 --dataset_config de-en --source_lang de \
        --target_lang en --output_dir outputs/data/wmt14-de-en
"""

import logging
from dataclasses import dataclass, field

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.lengths import LengthArguments
from hf_vanilla_transformer.outputs import check_not_an_input, check_output_location, staged


@dataclass
class PrepareArguments(LengthArguments):
    """The data set and where it goes; with --tokenizer, the lengths of its pairs' sides are training's own
    options (`LengthArguments`)."""

    dataset: str = field(
        metadata={
            "help": "A Hub dataset (e.g. bentrevett/multi30k, wmt/wmt14), a local save_to_disk/parquet/JSON "
            "Lines folder, or a folder of line-aligned text files in Multi30k's layout (train.de.gz, ...). "
            "Datasets with one column per language (en, de) are packed into a `translation` column."
        }
    )
    source_lang: str = field(metadata={"help": "Source language code, e.g. de."})
    target_lang: str = field(metadata={"help": "Target language code, e.g. en."})
    output_dir: str = field(metadata={"help": "Where to save the DatasetDict (save_to_disk)."})
    dataset_config: str | None = field(default=None, metadata={"help": "Config of --dataset, e.g. de-en."})
    tokenizer: str | None = field(
        default=None, metadata={"help": "Also tokenize with this tokenizer folder."}
    )
    tokenized_output_dir: str | None = field(
        default=None,
        metadata={"help": "Where to save the tokenized DatasetDict; default: output_dir-tokenized."},
    )
    num_proc: int | None = field(
        default=None, metadata={"help": "Processes for tokenization.", "range": ">= 1"}
    )
    overwrite: bool = field(default=False, metadata={"help": "Replace what an existing output holds."})


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    (args,) = parse_arguments(PrepareArguments, description=__doc__)
    # The data libraries (pyarrow, datasets, transformers), once the options are known to be right
    import pyarrow

    from hf_vanilla_transformer.data.preprocessing import check_length_limits
    from hf_vanilla_transformer.tasks.translation.data import load_translation_dataset, tokenize_translation
    from hf_vanilla_transformer.tokenization import load_tokenizer

    # Arrow's default pool (mimalloc) keeps what converting data files to Arrow freed, and more of it the
    # more files: its peak grew 1.6x from 450k to 4.5M pairs, the system allocator's 1.3x
    # (docs/benchmarks.md, corpora of millions of pairs).
    pyarrow.set_memory_pool(pyarrow.system_memory_pool())
    tokenized_dir = args.tokenized_output_dir or f"{args.output_dir}-tokenized"
    check_output_location(args.output_dir, args.overwrite)
    tokenizer = None
    if args.tokenizer is not None:
        # The default is made here, not parsed: the check of what the options name cannot see it.
        inputs = {"dataset": args.dataset, "tokenizer": args.tokenizer}
        check_not_an_input(tokenized_dir, inputs, "--tokenized_output_dir")
        check_output_location(tokenized_dir, args.overwrite, "--tokenized_output_dir")
        tokenizer = load_tokenizer(args.tokenizer)  # before any work: a missing one is named at once
        check_length_limits(tokenizer, args.max_source_length, args.max_target_length)
    dataset_dict = load_translation_dataset(
        args.dataset, args.dataset_config, languages=(args.source_lang, args.target_lang)
    )
    with staged(args.output_dir) as staging:
        dataset_dict.save_to_disk(staging)
    for split, dataset in dataset_dict.items():
        print(f"{split}: {dataset.num_rows} pairs")
    print(f"Saved to {args.output_dir}")

    if tokenizer is not None:
        tokenized, counts = tokenize_translation(
            dataset_dict,
            tokenizer,
            args.source_lang,
            args.target_lang,
            args.max_source_length,
            args.max_target_length,
            num_proc=args.num_proc,
            long_pairs=args.long_pairs,
        )
        with staged(tokenized_dir, "--tokenized_output_dir") as staging:
            tokenized.save_to_disk(staging)
        for split, count in counts.items():
            long = "truncated" if args.long_pairs == "truncate" else "dropped"
            print(f"{split}: kept {count['kept']} tokenized pairs, {long} {count[long]} too long")
        print(f"Saved tokenized data to {tokenized_dir}")


if __name__ == "__main__":
    run_script(main)
