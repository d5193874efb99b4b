"""A task of your own in one file: a number written in digits -> the same number in English words
("1234" -> "one thousand two hundred thirty-four"). docs/tasks.md walks through it.

    python scripts/prepare_data.py --task examples/number_words.py --output_dir outputs/data/number-words
    python scripts/train_tokenizer.py --task examples/number_words.py --dataset outputs/data/number-words \
        --vocab_size 200 --output_dir outputs/tokenizers/number-words
    python scripts/train.py --task examples/number_words.py --dataset outputs/data/number-words \
        --tokenizer outputs/tokenizers/number-words --preset transformer-tiny --max_tokens 2048 \
        --max_steps 2000 --warmup_steps 400 --output_dir outputs/number-words
"""

import random
from dataclasses import dataclass, field

from datasets import Dataset, DatasetDict

from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.tasks import Task, register_task

ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
)
ONES = (ONES + "seventeen eighteen nineteen").split()
TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
SCALES = ((1_000_000, "million"), (1_000, "thousand"), (100, "hundred"))


def in_words(number: int) -> str:
    """English words of 0 <= number < 10**9, with American hyphens: 42 -> "forty-two"."""
    for size, name in SCALES:
        if number >= size:
            head, rest = divmod(number, size)
            return f"{in_words(head)} {name}" + (f" {in_words(rest)}" if rest else "")
    if number < 20:
        return ONES[number]
    tens, ones = divmod(number, 10)
    return TENS[tens - 2] + (f"-{ONES[ones]}" if ones else "")


@dataclass
class NumberWordsOptions(Options):
    max_number: int = field(
        default=999_999, metadata={"help": "Numbers to spell: 0 up to this one.", "range": "[1, 999999999]"}
    )
    train_size: int = field(default=20_000, metadata={"help": "Training pairs to make.", "range": ">= 1"})
    held_out_size: int = field(
        default=500, metadata={"help": "Validation and test pairs to make, each.", "range": ">= 1"}
    )
    number_seed: int = field(default=0, metadata={"help": "Seeds which numbers are drawn.", "range": ">= 0"})


@register_task
class NumberWordsTask(Task):
    name = "number_words"
    source_column, target_column = "number", "words"
    options = NumberWordsOptions
    input_label = "number (digits)"
    input_hint = "a whole number such as 1234"
    demo_examples = ("7", "1234", "90017")

    def make_data(self, options, output_dir):
        wanted = options.train_size + 2 * options.held_out_size
        if wanted > options.max_number + 1:
            raise UsageError(
                f"{wanted} distinct numbers asked of 0..{options.max_number}: raise --max_number or lower "
                "the sizes."
            )
        numbers = random.Random(options.number_seed).sample(range(options.max_number + 1), wanted)
        cuts = {"validation": numbers[: options.held_out_size],
                "test": numbers[options.held_out_size : 2 * options.held_out_size],
                "train": numbers[2 * options.held_out_size :]}  # fmt: skip
        return DatasetDict(
            {
                split: Dataset.from_dict(
                    {"number": [str(n) for n in part], "words": [in_words(n) for n in part]}
                )
                for split, part in cuts.items()
            }
        )

    def check_input(self, text):
        if not text.strip().isdigit():
            raise UsageError(f"{text!r} is not a number written in digits: give one such as 1234.")
