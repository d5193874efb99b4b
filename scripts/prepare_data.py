"""Make and save the data set of a task that makes its own (`Task.make_data`): its train, validation and test
splits, as a `save_to_disk` folder that the tokenizer, training and evaluation scripts read with --dataset.
Translation and series data have their own commands (prepare_translation.py, generate_series.py).

    python scripts/prepare_data.py --task examples/number_words.py --output_dir outputs/data/number-words
"""

import logging
from dataclasses import dataclass, field

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.outputs import check_output_location, staged
from hf_vanilla_transformer.tasks import Task, TaskChoice
from hf_vanilla_transformer.tasks.base import SPLITS
from hf_vanilla_transformer.tasks.registry import defined_in


@dataclass
class PrepareArguments(TaskChoice, Options):
    task: str = field(metadata={"help": "The task: its name, or a file that defines one (docs/tasks.md)."})
    output_dir: str = field(metadata={"help": "Folder to save the splits to (save_to_disk)."})
    overwrite: bool = field(default=False, metadata={"help": "Replace what an existing output holds."})


def check_made_data(task: Task, dataset) -> None:
    """Refuse what a task's `make_data` made unless it is a `DatasetDict` of every split training and
    evaluation read (`SPLITS`): a split left out would be missed only when it is read."""
    from datasets import DatasetDict  # imported once there is data: `--help` answers without it

    made = f"make_data of task {task.name!r} ({defined_in(type(task))})"
    if not isinstance(dataset, DatasetDict):
        raise UsageError(
            f"{made} returned {type(dataset).__name__}, not a DatasetDict of the splits {', '.join(SPLITS)}."
        )
    missing = [split for split in SPLITS if split not in dataset]
    if missing:
        raise UsageError(
            f"{made} made no {' or '.join(missing)} split (it made {', '.join(dataset) or 'none'}): a task's "
            f"data has the splits {', '.join(SPLITS)}."
        )


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    (args,) = parse_arguments(PrepareArguments, description=__doc__)
    check_output_location(args.output_dir, args.overwrite)
    task = args.task_spec
    dataset = task.make_data(args.options, args.output_dir)
    check_made_data(task, dataset)
    with staged(args.output_dir) as staging:
        dataset.save_to_disk(staging)
    sizes = ", ".join(f"{split} {split_data.num_rows}" for split, split_data in dataset.items())
    print(f"Saved the {task.name} data ({sizes}) to {args.output_dir}")


if __name__ == "__main__":
    run_script(main)
