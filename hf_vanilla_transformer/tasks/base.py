"""`Task`: what a task defines. The defaults make a plain text-to-text task out of a name and two columns:
data a task's `make_data` writes (scripts/prepare_data.py), a joint BPE tokenizer over both columns, exact
match (the metric every task reports), inputs taken whole. A task overrides what differs; docs/tasks.md walks
through one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import MissingPathError, UsageError
from ..metrics import binomial_standard_error, check_pairs, exact_match

if TYPE_CHECKING:
    from datasets import Dataset, DatasetDict

    from ..data.preprocessing import TextField

# The splits of a task's data set: what training, validation during training and evaluation read.
SPLITS = ("train", "validation", "test")


class Task:
    """One task: subclass it, set `name` (and what differs from the defaults), decorate it with
    `@register_task`. Every hook is given the task's own options (an instance of `options`, or None for a
    task without them) and the data it works on."""

    name: ClassVar[str]
    # The source and target columns of the task's data set (`text_fields` reads them; a column of dicts, as
    # translation's, overrides `text_fields`).
    source_column: ClassVar[str] = "source"
    target_column: ClassVar[str] = "target"
    # The task's own options (a dataclass of `options.Options`, its fields' metadata giving help and, for each
    # number, a range): a script that takes --task parses the chosen task's only, and refuses another task's.
    options: ClassVar[type | None] = None
    best_metric: ClassVar[str] = "exact_match"  # `metric_for_best_model`: higher is better
    # generate()'s output limit during evaluation when the command line sets none: None means source length +
    # 50 (§6.1), True the saved generation config's `max_length`.
    output_length_from_config: ClassVar[bool] = False
    # Report key -> the text before " (n examples): exact match ± s.e." for one row of that breakdown.
    row_formats: ClassVar[dict[str, str]] = {}
    # decode(encode(s)) == s is checked on every split after training a tokenizer for the task.
    lossless_tokenizer: ClassVar[bool] = False
    # A model's input as a page labels its box, and as the refusal of an empty input names it.
    input_label: ClassVar[str] = "input"
    input_hint: ClassVar[str] = "a text"
    demo_examples: ClassVar[tuple[str, ...]] = ()  # inputs the demo page offers
    # Whether a CAS can compute the reference output of any input (the demo shows it beside the model's).
    expands_with_cas: ClassVar[bool] = False
    # Whether a text given to the pipeline, translate.py or the demo is cut into sentences, each generated on
    # its own (the task's examples are sentences).
    splits_into_sentences: ClassVar[bool] = False
    # The task of a model whose config names none (folders saved before configs recorded it, imports).
    claims_unnamed_models: ClassVar[bool] = False

    @property
    def data_made_by(self) -> str:
        """The command that prepares the task's data, for the error that asks for one."""
        return f"python scripts/prepare_data.py --task {self.name} --output_dir <folder>"

    @property
    def tokenizer_columns(self) -> tuple[str, ...]:
        """Dataset columns a tokenizer for the task is trained on."""
        return (self.source_column, self.target_column)

    def default_options(self):
        """The task's options as their defaults give them (None for a task without options)."""
        return self.options() if self.options is not None else None

    def make_data(self, options, output_dir: str) -> DatasetDict:
        """The task's `SPLITS`, made from nothing (scripts/prepare_data.py saves them); a task whose data
        comes from elsewhere says where in `data_made_by`."""
        raise UsageError(f"Task {self.name!r} makes no data of its own: {self.data_made_by}.")

    def languages(self, options) -> list[str] | None:
        """The source and target languages of a model trained with the task's `options`, if it has any."""
        return None

    def check_input(self, text: str) -> None:
        """Refuse (a `UsageError`) an input outside what the task's models were trained on: outside it a model
        still answers, confidently and wrongly."""

    def load_prepared(self, folder: str | Path) -> DatasetDict:
        """The splits a data script saved (`save_to_disk`), or an error naming the script that makes them."""
        path = Path(folder)
        if not (path / "dataset_dict.json").is_file():
            state = "holds no prepared data set (no dataset_dict.json)" if path.is_dir() else "does not exist"
            raise MissingPathError(
                f"{folder} {state}. Make one with `{self.data_made_by}` (the recipes in scripts/recipes/ do "
                "it first)."
            )
        from ..data.files import load_saved_dataset  # datasets: imported when data is read

        return load_saved_dataset(path)

    def text_fields(self, options) -> tuple[TextField, TextField]:
        """`(column, key)` of the source and of the target text."""
        return (self.source_column, None), (self.target_column, None)

    def load_raw(
        self, dataset: str, dataset_config: str | None, options, streaming: bool = False
    ) -> DatasetDict:
        """The task's `DatasetDict` (train / validation / test) from `dataset` (a folder or a Hub name, with
        its `dataset_config`), checked for the columns it needs; with `streaming`, splits it can stream may be
        `IterableDataset`s."""
        folder = dataset
        dataset = self.load_prepared(folder)
        wanted = {column for column, _ in self.text_fields(options)}
        for split, ds in dataset.items():
            if not wanted <= set(ds.column_names):
                raise UsageError(
                    f"Split '{split}' of {folder} lacks the column(s) {', '.join(sorted(wanted))} of "
                    f"task {self.name!r}: it has {', '.join(ds.column_names)}. `{self.data_made_by}` makes "
                    "its data."
                )
        return dataset

    def add_training_data(self, raw: DatasetDict, held_out: Any, options) -> DatasetDict:
        """Extra training pairs the options ask for (none by default); `held_out` is
        `held_out_data(raw, options)`."""
        return raw

    def held_out_data(self, raw: DatasetDict, options) -> Any:
        """What `add_training_data` must never produce, read before any split is cut down."""
        return None

    def refuses_streaming(self, options) -> str | None:
        """Why the task's options forbid reading the train split as a stream, if they do."""
        return None

    def score(self, predictions: list[str], references: list[str]) -> dict[str, Any]:
        """Every score of `predictions` against one reference each, flat: first what every task reports (exact
        match and its binomial standard error: a metric for every task is added here), then the task's own
        (`task_scores`). Evaluation reports and training's validation both take these. No predictions, or not
        one reference for each, are refused first: `zip` would score the shorter list alone."""
        check_pairs(predictions, references, "exact match")
        share = sum(map(exact_match, predictions, references)) / len(predictions)
        every_task = {
            "exact_match": share,
            "exact_match_stderr": binomial_standard_error(share, len(predictions)),
        }
        return {**every_task, **self.task_scores(predictions, references)}

    def task_scores(self, predictions: list[str], references: list[str]) -> dict[str, Any]:
        """The task's own scores beside those every task reports (`score`), flat: numbers, and signature
        strings where the metric has them. `score` has checked that the pairs match up."""
        return {}

    def report_details(
        self,
        sources: list[str],
        predictions: list[str],
        references: list[str],
        train_sources,
        options,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Extra metrics and extra report sections (breakdowns) of an evaluation report, not computed during
        training; `train_sources`, when not None, reads the training sources when called."""
        return {}, {}

    def train_tokenizer(self, corpus, vocab_size: int, options, **settings):
        """Train a tokenizer for the task on texts or text files; `options` are the task's, `settings` the
        script's (`min_frequency`, `model_max_length`, `output_dir`). By default a joint BPE over words, exact
        on decoding (`tokenization.train_bpe_tokenizer`)."""
        from ..tokenization import train_bpe_tokenizer

        return train_bpe_tokenizer(corpus, vocab_size, **settings)

    def tokenizer_check_texts(self, validation: Dataset) -> dict[str, list[str]]:
        """Groups of validation texts on which `scripts/train_tokenizer.py` reports tokens per text."""
        return {column: validation[column] for column in self.tokenizer_columns}
