"""Make and save the data set of a task that makes its own (`Task.make_data`): its train, validation and test
splits, as a `save_to_disk` folder that the tokenizer, training and evaluation scripts read with --dataset.
Translation and series data have their own commands (prepare_translation.py, generate_series.py).

    python scripts/prepare_data.py --task examples/number_words.py --output_dir outputs/data/number-words
"""

import logging
import shutil
from dataclasses import dataclass, field

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.outputs import check_output_location
from hf_vanilla_transformer.tasks import TaskChoice


@dataclass
class PrepareArguments(TaskChoice, Options):
    task: str = field(metadata={"help": "The task: its name, or a file that defines one (docs/tasks.md)."})
    output_dir: str = field(metadata={"help": "Folder to save the splits to (save_to_disk)."})
    overwrite: bool = field(default=False, metadata={"help": "Replace what an existing output holds."})


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    (args,) = parse_arguments(PrepareArguments, description=__doc__)
    check_output_location(args.output_dir, args.overwrite)
    task = args.task_spec
    dataset = task.make_data(args.options, args.output_dir)
    if args.overwrite:
        shutil.rmtree(args.output_dir, ignore_errors=True)
    dataset.save_to_disk(args.output_dir)
    sizes = ", ".join(f"{split} {split_data.num_rows}" for split, split_data in dataset.items())
    print(f"Saved the {task.name} data ({sizes}) to {args.output_dir}")


if __name__ == "__main__":
    run_script(main)
