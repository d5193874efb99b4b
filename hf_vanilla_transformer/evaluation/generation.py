"""Evaluate a saved model on a data split: batched `generate()`, the task's metrics, a JSON report.

The report holds the command, the decoding settings, the metrics and every prediction next to its
source and reference, so every figure quoted in a model card can be traced to the run that made it.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import AutoConfig, GenerationConfig, LogitsProcessor, LogitsProcessorList

from ..errors import ExistingPathError, UsageError
from ..options import Options
from ..outputs import check_writable
from ..saving import check_model_location, check_model_task, load_model_folder, model_task
from ..sentences import sentence_rules, split_document, translate_documents
from ..tasks import DatasetArguments, Task, load_split_texts
from ..tasks.registry import find_task, installed_task_of

logger = logging.getLogger(__name__)


def check_device(name: str) -> torch.device:
    """The device `--device` names, refused in one line if it is none or this machine lacks it."""
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise UsageError(f"--device {name!r} is not a device: give cpu, cuda or cuda:N.") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {name}: this machine has no CUDA GPU; pass --device cpu.")
    return device


@dataclass
class EvaluationArguments(Options):
    model: str = field(metadata={"help": "A saved model folder (with its tokenizer) or a Hub name."})
    split: str = field(default="test", metadata={"help": "Which split of the data set to evaluate on."})
    batch_size: int = field(default=32, metadata={"help": "Sentences per generate() call.", "range": ">= 1"})
    num_beams: int | None = field(
        default=None, metadata={"help": "Default: the saved generation config (4).", "range": ">= 1"}
    )
    length_penalty: float | None = field(
        default=None, metadata={"help": "Default: the saved config (0.6).", "range": "any"}
    )
    max_new_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Default: translation, source length + 50 (§6.1); series, the saved config's max_length "
            "(a series is many times longer than its expression).",
            "range": ">= 1",
        },
    )
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
    device: str = field(
        default="cuda" if torch.cuda.is_available() else "cpu",
        metadata={"help": "Where to generate: cuda (the default where there is a GPU), cuda:1, cpu, ..."},
    )

    def __post_init__(self):
        super().__post_init__()
        check_device(self.device)
        if not self.split_sentences and self.sentences_per_text == 1:
            raise UsageError(
                "--split_sentences false applies to texts of several examples: pass --sentences_per_text N "
                "(N > 1) with it, or drop it."
            )


# §6.1: "maximum output length to input length + 50".
EXTRA_OUTPUT_TOKENS = 50


def length_limit(max_new_tokens: int) -> dict:
    """generate()'s keyword for at most `max_new_tokens` new tokens, given as the decoder's total length
    (start token + new tokens), which is what generate() turns `max_new_tokens` into: `max_new_tokens` beside
    a model's saved `max_length` makes generate() warn on every call that one overrides the other."""
    return {"max_length": 1 + int(max_new_tokens)}


def default_max_new_tokens(task: Task, generation_config, source_tokens: int) -> int:
    """How many tokens a task's output may take: the saved config's `max_length` for tasks whose outputs are
    many times longer than their inputs (series), else the source's length + 50 (§6.1)."""
    if task.output_length_from_config:
        return generation_config.max_length
    return source_tokens + EXTRA_OUTPUT_TOKENS


def _decoding_name(generation: dict) -> str:
    beams = generation.get("num_beams", 1)
    return "greedy" if beams == 1 else f"beam{beams}-lp{generation.get('length_penalty', 1.0)}"


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
    name = f"eval-{eval_args.split}{subset}{texts}-{_decoding_name(generation)}.json"
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


def check_output_file(path: Path, option: str) -> None:
    """Refuse an output file that cannot be written where it is asked for, for library callers (the scripts'
    parse checks the same): a folder, or a path under a file or in a folder that cannot be written into
    (`outputs.check_writable`)."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{option} {path} is a folder: give a file to write to.")
    check_writable(path, option)


def check_length_options(options: dict[str, int | None], limit: int | None, model: str) -> None:
    """Refuse, before anything is read or loaded, a length option (`options`: name -> value given) that asks
    for more tokens than the model has positions (`limit`, its `max_position_embeddings`): generate() would
    fail at that length, deep inside the model."""
    if limit is None:
        return
    for name, value in options.items():
        if value is not None and value > limit:
            raise UsageError(
                f"--{name} {value} is more than the {limit} positions of {model} (its "
                f"max_position_embeddings): give --{name} {limit} or less."
            )


# generate() options that a command may set beyond beams, length penalty and length (translate.py's); unset,
# they are the saved generation config's, and the settings do not name them.
OPTIONAL_GENERATE_OPTIONS = (
    "top_k",
    "top_p",
    "temperature",
    "no_repeat_ngram_size",
    "repetition_penalty",
    "min_new_tokens",
)


def generation_settings(eval_args: EvaluationArguments, task: Task, generation_config) -> dict:
    """generate() keyword arguments: the command line's choices over the model's saved generation config.

    Without `--max_new_tokens`, the task decides: None (`generate_texts` then allows source length + 50,
    §6.1), or the saved config's `max_length` for tasks whose outputs are many times longer than their inputs.
    """
    max_new_tokens = eval_args.max_new_tokens
    if max_new_tokens is None and task.output_length_from_config:  # else per batch, from its sources
        max_new_tokens = default_max_new_tokens(task, generation_config, source_tokens=0)
    # transformers v5 leaves a field the saved config lacks unset (None) until generate() fills it with its
    # default: beam 1, length penalty 1.0 (a Marian folder's config names no length penalty).
    num_beams = eval_args.num_beams if eval_args.num_beams is not None else generation_config.num_beams or 1
    do_sample = bool(getattr(eval_args, "do_sample", False))
    settings = {"num_beams": num_beams, "max_new_tokens": max_new_tokens, "do_sample": do_sample}
    if num_beams > 1:  # greedy has no length penalty: passing one makes generate() warn that it is ignored
        length_penalty = (
            eval_args.length_penalty
            if eval_args.length_penalty is not None
            else generation_config.length_penalty
        )
        settings["length_penalty"] = 1.0 if length_penalty is None else length_penalty
    for name in OPTIONAL_GENERATE_OPTIONS:  # only where the arguments have them (translate.py's do)
        if getattr(eval_args, name, None) is not None:
            settings[name] = getattr(eval_args, name)
    return settings


def length_sorted_batches(
    lengths: Sequence[int], batch_size: int, max_tokens: int | None = None
) -> list[list[int]]:
    """The indices of `lengths` (token counts) cut into batches of similar lengths, longest first: at most
    `batch_size` a batch and, with `max_tokens`, at most that many tokens padded to the batch's longest (a
    longer input goes alone). Sorting pads little; the longest batch first shows at once the memory a run
    needs. Equal lengths keep their input order, so the same inputs always make the same batches: what several
    processes sharing the batches (translate.py) rely on to decode as one process does."""
    order = sorted(range(len(lengths)), key=lambda index: -lengths[index])
    batches: list[list[int]] = []
    for index in order:
        batch = batches[-1] if batches else None
        if (
            batch is None
            or len(batch) == batch_size
            or (max_tokens is not None and (len(batch) + 1) * lengths[batch[0]] > max_tokens)
        ):
            batches.append([index])
        else:
            batch.append(index)
    return batches


def generate_in_batches(
    texts: Sequence[str],
    lengths: Sequence[int],
    decode: Callable[[list[str]], list[str]],
    batch_size: int,
    max_tokens: int | None = None,
    share: tuple[int, int] = (0, 1),
    before_batch: Callable[[int], None] | None = None,
    after_batch: Callable[[int], None] | None = None,
) -> dict[int, str]:
    """`decode` (a batch of texts -> their outputs) over `texts` in `length_sorted_batches` of their token
    `lengths`: the batching of evaluation and of translate.py, for any backend. `share` = (rank, processes):
    this process decodes every `processes`-th batch from its rank on, and gets {index: output} for those.
    `before_batch(number)` runs before each (to seed sampling by the batch, not by the process);
    `after_batch(size)` after it (progress)."""
    rank, processes = share
    batches = length_sorted_batches(lengths, batch_size, max_tokens)
    outputs: dict[int, str] = {}
    for number in range(rank, len(batches), processes):
        indices = batches[number]
        if before_batch is not None:
            before_batch(number)
        for index, output in zip(indices, decode([texts[i] for i in indices]), strict=True):
            outputs[index] = output.strip()
        if after_batch is not None:
            after_batch(len(indices))
    return outputs


class SourceLengthLimit(LogitsProcessor):
    """Ends each source's output once it holds its own number of new tokens, `limits[i]` (the paper's input
    length + 50, §6.1), by forcing `</s>` as the next token (so `</s>` is the limit's one more). generate()
    has one `max_length` for a whole batch: without this, an output could run to the longest source's limit,
    and a sentence's translation would depend on the batch it was put in."""

    def __init__(self, limits: Sequence[int], eos_token_id: int | Sequence[int]):
        self.limits = torch.tensor(list(limits))
        self.eos = torch.tensor([eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id))

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        generated = input_ids.shape[-1] - 1  # after the decoder start token
        rows_per_source = input_ids.shape[0] // len(self.limits)  # beams (batch-major), else 1
        ended = (self.limits <= generated).repeat_interleave(rows_per_source).to(scores.device)
        if not ended.any():
            return scores
        scores = scores.masked_fill(ended[:, None], -math.inf)
        rows = ended.nonzero()
        scores[rows, self.eos.to(scores.device)[None, :]] = 0
        return scores


def position_limit(model) -> int | None:
    """How many positions the model's encoder and decoder take, if its config says (None: no limit known)."""
    return getattr(model.config, "max_position_embeddings", None)


def source_lengths(model, tokenizer, sources: Sequence[str]) -> list[int]:
    """Each source's token count as `generate_batch` feeds it (cut to the model's positions), warning once
    for sources that are cut."""
    if not sources:
        return []
    limit = position_limit(model)
    lengths = [len(ids) for ids in tokenizer(list(sources), verbose=False)["input_ids"]]
    if limit is not None and any(length > limit for length in lengths):
        cut = sum(length > limit for length in lengths)
        logger.warning(
            "%d input(s) longer than the model's %d positions are cut to that many tokens.",
            cut,
            limit,
        )
        lengths = [min(length, limit) for length in lengths]
    return lengths


def generate_batch(model, tokenizer, sources: list[str], generation: dict) -> list[str]:
    """One generate() call on `sources` (cut to the model's positions), decoded to text. Without
    `max_new_tokens` in `generation`, each source's output takes at most its length + 50 tokens (§6.1),
    whatever else is in the batch (`SourceLengthLimit`)."""
    limit = position_limit(model)
    batch = tokenizer(
        sources, return_tensors="pt", padding=True, truncation=limit is not None, max_length=limit
    ).to(model.device)
    kwargs = dict(generation)
    max_new_tokens = kwargs.pop("max_new_tokens", None)
    if max_new_tokens is None:
        limits = (batch["attention_mask"].sum(dim=1) + EXTRA_OUTPUT_TOKENS).tolist()
        if limit is not None:  # the start token and the output are fed to the decoder (not the last </s>)
            limits = [min(length, limit - 1) for length in limits]
        max_new_tokens = max(limits)
        eos = model.generation_config.eos_token_id
        eos = tokenizer.eos_token_id if eos is None else eos
        if eos is not None:  # a model that names no end token stops at the batch's bound
            kwargs["logits_processor"] = LogitsProcessorList([SourceLengthLimit(limits, eos)])
            max_new_tokens += 1  # the longest output's forced </s>
    kwargs.update(length_limit(max_new_tokens))
    with torch.inference_mode():
        generated = model.generate(**batch, **kwargs)
    return tokenizer.batch_decode(generated, skip_special_tokens=True)


def generate_texts(model, tokenizer, sources: list[str], batch_size: int, generation: dict) -> list[str]:
    """Generate for every source, in batches of similar token lengths (`generate_in_batches`: less padding),
    in input order, showing progress in sentences."""
    model.eval()
    lengths = source_lengths(model, tokenizer, sources)
    decode = functools.partial(generate_batch, model, tokenizer, generation=generation)
    with tqdm(total=len(sources), desc="Generating", unit=" sentences") as progress:
        outputs = generate_in_batches(sources, lengths, decode, batch_size, after_batch=progress.update)
    return [outputs[index] for index in range(len(sources))]


def join_examples(texts: list[str], per_text: int) -> list[str]:
    """Every `per_text` consecutive texts joined by a space, as sentences of one paragraph (the last text
    holds the remainder)."""
    return [" ".join(texts[start : start + per_text]) for start in range(0, len(texts), per_text)]


def generate_documents(
    model, tokenizer, texts: list[str], batch_size: int, generation: dict, languages: list[str] | None
) -> list[str]:
    """`generate_texts` for texts of several sentences: each split by the rules of the source of `languages`,
    its sentences generated (all texts' together, in batches of similar lengths) and joined again, as the
    pipeline translates a text."""
    language = sentence_rules(None, languages)
    documents = [split_document(text, language) for text in texts]
    return translate_documents(
        documents, lambda sentences: generate_texts(model, tokenizer, sentences, batch_size, generation)
    )


def evaluate_model(eval_args: EvaluationArguments, data_args: DatasetArguments) -> dict:
    """Generate for `eval_args.split` and score it; write and return the report. Without a task in
    `data_args`, the model's own is evaluated."""
    if eval_args.output_file:  # before any data is read: a folder, or a path under a file
        check_output_file(Path(eval_args.output_file), "--output_file")
    check_model_location(eval_args.model)
    # The model's task first, before any data is read: its own by default, another one refused.
    model_config = AutoConfig.from_pretrained(eval_args.model)
    if data_args.task is None:
        data_args.task = installed_task_of(model_task(model_config, eval_args.model), eval_args.model).name
    check_model_task(model_config, eval_args.model, data_args.task)
    check_length_options(
        {"max_new_tokens": eval_args.max_new_tokens},
        getattr(model_config, "max_position_embeddings", None),
        eval_args.model,
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
    model.to(eval_args.device)
    generation = generation_settings(eval_args, task, model.generation_config)
    output_file = report_path(eval_args, generation, subset_size)
    check_report_path(output_file, eval_args.overwrite)
    started = time.time()
    if eval_args.sentences_per_text > 1 and eval_args.split_sentences:
        # The model's recorded languages; for a folder saved before it recorded them, the data's.
        languages = model.config.langs or task.languages(data_args)
        predictions = generate_documents(
            model, tokenizer, sources, eval_args.batch_size, generation, languages
        )
    else:
        predictions = generate_texts(model, tokenizer, sources, eval_args.batch_size, generation)
    seconds = time.time() - started

    metric = task.load_metric()
    metrics = task.score(metric, predictions, references)

    def read_train_sources() -> list[str]:
        return load_split_texts(data_args, raw["train"])[0]

    # Read only by a task that asks (series, for its overlap breakdown): a corpus of millions of training
    # pairs as Python strings is gigabytes that a translation report has no use for.
    train_sources = read_train_sources if "train" in raw and eval_args.split != "train" else None
    extra_metrics, details = task.report_details(
        metric, sources, predictions, references, train_sources, data_args
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
        "generation_seconds": round(seconds, 1),
        "metrics": metrics,
        **details,
        "examples": [
            {"source": s, "reference": r, "prediction": p}
            for s, r, p in zip(sources, references, predictions, strict=True)
        ],
    }
    output_file.parent.mkdir(parents=True, exist_ok=True)
    output_file.write_text(json.dumps(report, indent=2, ensure_ascii=False))
    report["output_file"] = str(output_file)
    return report


def format_report(report: dict, show_examples: int = 5) -> str:
    """Metrics, breakdowns and a few predictions side by side with their references, for the terminal."""
    lines = [
        f"{report['model']} on {report['split']} ({report['num_examples']} examples, "
        f"{_decoding_name(report['generation'])}, {report['generation_seconds']} s):"
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
