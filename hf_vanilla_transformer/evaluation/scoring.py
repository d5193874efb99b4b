"""Scoring a saved model on a data split: batched `generate()` (`decoding`), the task's metrics, a JSON
report.

The report holds the command, the decoding settings, the metrics and every prediction next to its
source and reference, so every figure quoted in a model card can be traced to the run that made it.

Imported, it loads neither torch nor transformers: evaluate_model.py parses its options
(`EvaluationArguments`) and refuses a mistake before `evaluate_model` imports them.
"""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..decoding.generation import (
    check_length_options,
    check_output_file,
    generate_documents,
    generate_texts,
    generation_settings,
    join_examples,
)
from ..decoding.settings import DecodingArguments, length_options
from ..errors import ExistingPathError, UsageError
from ..outputs import write_json
from ..tasks import DatasetArguments, load_split_texts
from ..tasks.registry import find_task, installed_task_of


@dataclass
class EvaluationArguments(DecodingArguments):
    """evaluate_model.py's options: the decoding options every decoding command shares
    (`decoding.settings.DecodingArguments`), and the evaluation's own."""

    model: str = field(metadata={"help": "A saved model folder (with its tokenizer) or a Hub name."})
    split: str = field(default="test", metadata={"help": "Which split of the data set to evaluate on."})
    batch_size: int = field(default=32, metadata={"help": "Sentences per generate() call.", "range": ">= 1"})
    max_examples: int | None = field(
        default=None, metadata={"help": "Evaluate on the first N examples only.", "range": ">= 1"}
    )
    output_file: str | None = field(
        default=None,
        metadata={
            "help": "Default: <model>/eval-<split>[-first<N>]-<decoding>.json; for a Hub name or a Hub-ready "
            "folder (one with its model card, README.md), outputs/eval/<model name>/ instead."
        },
    )
    sentences_per_text: int = field(
        default=1,
        metadata={
            "help": "Join every N consecutive examples (sources and references) into one text, a paragraph "
            "of N sentences, to measure documents; each text is translated sentence by sentence, as the "
            "pipeline does.",
            "range": ">= 1",
        },
    )
    split_sentences: bool = field(
        default=True,
        metadata={"help": "With --sentences_per_text above 1: false hands each text to the model whole."},
    )
    overwrite: bool = field(default=False, metadata={"help": "Replace an existing report of the same name."})
    show_examples: int = field(
        default=5, metadata={"help": "How many predictions to print next to references.", "range": ">= 0"}
    )
    device: str | None = field(
        default=None,
        metadata={
            "help": "Where to generate: cuda, cuda:1, cpu, ... Default: cuda where there is a GPU, else cpu."
        },
    )
    dtype: str = field(
        default="auto",
        metadata={
            "help": "What the model decodes in: auto (its weights as saved), float32, bfloat16 or float16 "
            "(a GPU's; bfloat16 from NVIDIA Ampere on).",
        },
    )

    def __post_init__(self):
        super().__post_init__()
        # torch checks the device, once the options have parsed (`--help` and a mistyped option need none)
        import torch

        from ..devices import check_device, check_dtype

        if self.device is None:
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        check_dtype(self.dtype, check_device(self.device))
        if not self.split_sentences and self.sentences_per_text == 1:
            raise UsageError(
                "--split_sentences false applies to texts of several examples: pass --sentences_per_text N "
                "(N > 1) with it, or drop it."
            )


# The settings a report's name tells by its decoding method; the length bound is left out, as the names that
# the model cards quote leave it out.
NAMED_BY_METHOD = ("num_beams", "length_penalty", "do_sample", "max_new_tokens")


def _decoding_name(generation: dict, seed: int | None = None) -> str:
    """A report's name for its decoding: `greedy` or `beam<N>-lp<penalty>`, `sample` (`sample-beam...` with
    beams) and its `seed`, then each other setting given, by its generate() keyword and value
    (`-no_repeat_ngram_size3`)."""
    beams = generation.get("num_beams", 1)
    name = "greedy" if beams == 1 else f"beam{beams}-lp{generation.get('length_penalty', 1.0)}"
    if generation.get("do_sample"):
        name = "sample" if beams == 1 else f"sample-{name}"
    name += "".join(f"-{key}{value}" for key, value in generation.items() if key not in NAMED_BY_METHOD)
    return name if seed is None else f"{name}-seed{seed}"


def report_path(eval_args: EvaluationArguments, generation: dict, subset_size: int | None) -> Path:
    """Where the report goes: `--output_file`, else `eval-<split>[-first<N>]-<decoding>.json` in the model
    folder. A report of the first N examples never takes the name of the whole split's. A Hub-ready folder
    (its card, README.md, beside the weights) is what gets uploaded, and its reports are the ones its card
    quotes: its report goes to `outputs/eval/<folder name>/`, as a Hub name's does."""
    if eval_args.output_file:
        return Path(eval_args.output_file)
    subset = f"-first{subset_size}" if subset_size is not None else ""
    texts = ""
    if eval_args.sentences_per_text > 1:
        texts = f"-texts{eval_args.sentences_per_text}{'' if eval_args.split_sentences else '-whole'}"
    dtype = f"-{eval_args.dtype}" if eval_args.dtype != "auto" else ""  # beside the report as saved
    decoding = _decoding_name(generation, eval_args.sampling_seed)
    name = f"eval-{eval_args.split}{subset}{texts}-{decoding}{dtype}.json"
    folder = Path(eval_args.model).expanduser()
    if not folder.is_dir() or (folder / "README.md").is_file():
        folder = Path("outputs") / "eval" / folder.name
    return folder / name


def check_report_path(path: Path, overwrite: bool) -> None:
    check_output_file(path, "--output_file")
    if path.exists() and not overwrite:
        raise ExistingPathError(
            f"{path} exists: pass --overwrite to replace it, or --output_file to write elsewhere."
        )


def evaluate_model(eval_args: EvaluationArguments, data_args: DatasetArguments) -> dict:
    """Generate for `eval_args.split` and score it; write and return the report. Without a task in
    `data_args`, the model's own is evaluated."""
    from transformers import AutoConfig, GenerationConfig

    from ..devices import check_device, check_dtype, decoding_model
    from ..saving import check_model_location, check_model_task, load_model_folder, model_task

    if eval_args.output_file:  # before any data is read: a folder, or a path under a file
        check_output_file(Path(eval_args.output_file), "--output_file")
    check_model_location(eval_args.model)
    # The model's task first, before any data is read: its own by default, another one refused.
    model_config = AutoConfig.from_pretrained(eval_args.model)
    if data_args.task is None:
        data_args.task = installed_task_of(model_task(model_config, eval_args.model), eval_args.model).name
    check_model_task(model_config, eval_args.model, data_args.task)
    check_length_options(
        length_options(eval_args), getattr(model_config, "max_position_embeddings", None), eval_args.model
    )
    task = data_args.task_spec
    if eval_args.sentences_per_text > 1 and not task.splits_into_sentences:
        raise UsageError(
            f"--sentences_per_text {eval_args.sentences_per_text}: a {task.name} example is no sentence of a "
            "text; evaluate it with --sentences_per_text 1."
        )
    raw = data_args.load_raw()
    if eval_args.split not in raw:
        raise UsageError(f"No split {eval_args.split!r} in {data_args.dataset}; splits: {', '.join(raw)}.")
    split = raw[eval_args.split]
    subset_size = None
    if eval_args.max_examples is not None and eval_args.max_examples < split.num_rows:
        subset_size = eval_args.max_examples
        split = split.select(range(subset_size))
    sources, references = load_split_texts(data_args, split)
    if eval_args.sentences_per_text > 1:
        sources, references = (
            join_examples(texts, eval_args.sentences_per_text) for texts in (sources, references)
        )

    # The report's name depends on the decoding: read the saved generation config first, so that a report
    # that must not be replaced stops the run before the model is loaded.
    try:
        generation_config = GenerationConfig.from_pretrained(eval_args.model)
    except OSError:  # saved without one: the model's own, derived from its config
        generation_config = None
    if generation_config is not None:
        generation = generation_settings(eval_args, task, generation_config)
        check_report_path(report_path(eval_args, generation, subset_size), eval_args.overwrite)
    model, tokenizer = load_model_folder(eval_args.model)
    device = check_device(eval_args.device)
    model = decoding_model(model, device, check_dtype(eval_args.dtype, device))
    generation = generation_settings(eval_args, task, model.generation_config)
    output_file = report_path(eval_args, generation, subset_size)
    check_report_path(output_file, eval_args.overwrite)
    started = time.time()
    if eval_args.sentences_per_text > 1 and eval_args.split_sentences:
        # The model's recorded languages; for a folder saved before it recorded them, the data's.
        languages = model.config.langs or task.languages(data_args.options)
        predictions = generate_documents(
            model, tokenizer, sources, eval_args.batch_size, generation, languages, eval_args.sampling_seed
        )
    else:
        predictions = generate_texts(
            model, tokenizer, sources, eval_args.batch_size, generation, eval_args.sampling_seed
        )
    seconds = time.time() - started

    metrics = task.score(predictions, references)

    def read_train_sources() -> list[str]:
        return load_split_texts(data_args, raw["train"])[0]

    # Read only by a task that asks (series, for its overlap breakdown): a corpus of millions of training
    # pairs as Python strings is gigabytes that a translation report has no use for.
    train_sources = read_train_sources if "train" in raw and eval_args.split != "train" else None
    extra_metrics, details = task.report_details(
        sources, predictions, references, train_sources, data_args.options
    )
    metrics.update(extra_metrics)

    report = {
        "command": " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv]),
        "model": eval_args.model,
        "data": {**asdict(data_args), **data_args.options_record()},
        "split": eval_args.split,
        "num_examples": len(sources),
        **(
            {
                "texts": {
                    "sentences_per_text": eval_args.sentences_per_text,
                    "split": eval_args.split_sentences,
                }
            }
            if eval_args.sentences_per_text > 1
            else {}
        ),
        "generation": generation,
        **({"seed": eval_args.seed} if eval_args.do_sample else {}),
        "device": {"type": device.type, "dtype": str(model.dtype).removeprefix("torch.")},
        "generation_seconds": round(seconds, 1),
        "metrics": metrics,
        **details,
        "examples": [
            {"source": s, "reference": r, "prediction": p}
            for s, r, p in zip(sources, references, predictions, strict=True)
        ],
    }
    write_json(output_file, report)
    report["output_file"] = str(output_file)
    return report


def format_report(report: dict, show_examples: int = 5) -> str:
    """Metrics, breakdowns and a few predictions side by side with their references, for the terminal."""
    lines = [
        f"{report['model']} on {report['split']} ({report['num_examples']} examples, "
        f"{_decoding_name(report['generation'], report.get('seed'))}, {report['generation_seconds']} s):"
    ]
    for name, value in report["metrics"].items():
        lines.append(f"  {name}: {value:.4f}" if isinstance(value, float) else f"  {name}: {value}")
    task = find_task(report["data"]["task"])
    for key, row_format in (task.row_formats if task is not None else {}).items():
        for row in report.get(key, []):
            lines.append(
                f"  {row_format.format(**row)} ({row['n']} examples): "
                f"{row['exact_match']:.4f} ± {row['exact_match_stderr']:.4f}"
            )
    for example in report["examples"][:show_examples]:
        lines += [
            f"  source:     {example['source']}",
            f"  reference:  {example['reference']}",
            f"  prediction: {example['prediction']}",
            "",
        ]
    lines.append(f"Report written to {report['output_file']}")
    return "\n".join(lines)


__all__ = ["EvaluationArguments", "evaluate_model", "format_report"]
