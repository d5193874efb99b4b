r"""Train a BPE tokenizer for translation or series expansion and save it for `AutoTokenizer`.

    # Joint German-English vocabulary from a DatasetDict saved by scripts/prepare_translation.py
    python scripts/train_tokenizer.py --task translation --vocab_size 8000 \
        --dataset outputs/data/multi30k-de-en --output_dir outputs/tokenizers/multi30k-de-en-bpe8k

    # ... or from plain text files (gzip or not), one sentence a line
    python scripts/train_tokenizer.py --task translation --vocab_size 8000 \
        --text_files path/to/multi30k/train.de.gz path/to/multi30k/train.en.gz \
        --output_dir outputs/tokenizers/multi30k-de-en-bpe8k

    # Series expansion: trains on the `expression` and `series` columns
    python scripts/train_tokenizer.py --task series --vocab_size 1000 \
        --dataset outputs/data/series-50k --output_dir outputs/tokenizers/series-bpe1k

    # ... or the tutorial's fixed character-level vocabulary (nothing to learn; the data is checked)
    python scripts/train_tokenizer.py --task series --tutorial_vocabulary \
        --dataset outputs/data/series-50k --output_dir outputs/tokenizers/series-tutorial

Prints the vocabulary size, the training time and the average tokens per text (against characters) on
the validation split when there is one.
"""

import logging
import time
from dataclasses import dataclass, field

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.outputs import check_output_location, staged
from hf_vanilla_transformer.tasks import TaskChoice


@dataclass
class TokenizerArguments(TaskChoice, Options):
    task: str = field(
        metadata={
            "help": "What the tokenizer is for: a task's name or a file that defines one (docs/tasks.md)."
        }
    )
    output_dir: str = field(metadata={"help": "Folder to save the tokenizer to (save_pretrained)."})
    vocab_size: int = field(
        default=8000, metadata={"help": "Vocabulary size, special tokens included.", "range": ">= 1"}
    )
    overwrite: bool = field(default=False, metadata={"help": "Replace what an existing output holds."})
    dataset: str | None = field(
        default=None,
        metadata={
            "help": "A data set folder made by the task's data script (prepare_translation.py, "
            "generate_series.py, prepare_data.py); its train split is used."
        },
    )
    text_files: list[str] | None = field(
        default=None,
        metadata={"help": "Plain text files (gzip or not), one text a line; instead of --dataset."},
    )
    min_frequency: int = field(
        default=2, metadata={"help": "Pairs seen fewer times are never merged.", "range": ">= 1"}
    )
    model_max_length: int | None = field(
        default=None,
        metadata={
            "help": "The model's max_position_embeddings. Default: the package's tokenizers' "
            "(tokenization.DEFAULT_MODEL_MAX_LENGTH).",
            "range": ">= 1",
        },
    )


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    (args,) = parse_arguments(TokenizerArguments, description=__doc__)
    if (args.dataset is None) == (args.text_files is None):
        raise UsageError("Pass exactly one of --dataset and --text_files.")
    check_output_location(args.output_dir, args.overwrite)
    task, options = args.task_spec, args.options  # another task's options are refused before any data is read
    # tokenizers and transformers, once the options are known to be right (`--help` answers without them)
    from hf_vanilla_transformer.tokenization import (
        DEFAULT_MODEL_MAX_LENGTH,
        iter_dataset_texts,
        sequence_length_report,
    )

    if args.model_max_length is None:
        args.model_max_length = DEFAULT_MODEL_MAX_LENGTH

    validation = None
    if args.dataset is not None:
        dataset_dict = task.load_prepared(args.dataset)
        corpus = iter_dataset_texts(dataset_dict["train"], list(task.tokenizer_columns))
        validation = dataset_dict.get("validation")
    else:
        corpus = args.text_files

    start = time.perf_counter()
    with staged(args.output_dir) as staging:
        tokenizer = task.train_tokenizer(
            corpus,
            args.vocab_size,
            options,
            min_frequency=args.min_frequency,
            model_max_length=args.model_max_length,
            output_dir=staging,
        )
    print(f"Trained a {len(tokenizer)}-token {task.name} tokenizer in {time.perf_counter() - start:.1f} s")
    print(f"Saved to {args.output_dir}")

    if validation is not None:
        for name, texts in task.tokenizer_check_texts(validation).items():
            report = sequence_length_report(tokenizer, texts)
            print(
                f"validation {name}: {report['avg_tokens']:.1f} tokens per text on average "
                f"(max {report['max_tokens']}) vs {report['avg_chars']:.1f} characters "
                f"({report['chars_per_token']:.2f} characters per token; </s> not counted)"
            )

    if task.lossless_tokenizer and args.dataset is not None:
        for split, dataset in dataset_dict.items():
            texts = [text for column in task.tokenizer_columns for text in dataset[column]]
            decoded = tokenizer.batch_decode(tokenizer(texts)["input_ids"], skip_special_tokens=True)
            mismatches = sum(a != b for a, b in zip(texts, decoded, strict=True))
            print(f"{split}: decode(encode(s)) == s for {len(texts) - mismatches} of {len(texts)} strings")


if __name__ == "__main__":
    run_script(main)
