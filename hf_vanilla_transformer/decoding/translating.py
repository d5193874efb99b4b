"""Translate text files line by line with a saved model, as Marian's and CTranslate2's command-line
translators do, for files of millions of lines: what scripts/translate.py runs.

The input is read a window of lines at a time (never whole); a window's lines are batched by token length
(`generation.generate_in_batches`, evaluation's batching) and written back in input order, and the output is
flushed after each window, so an interrupted run loses at most one. Beside an output being written lies a
record of what it translates (`<output>.translating.json`): a rerun with the same input, model and decoding
continues after its last complete line, and the record goes when the output is complete. An output with no
record is not the command's to replace, unless asked (`--overwrite`).

An input file's lines are counted (and checked) before the model loads, for the progress bar's total and a
resumed output's check. Standard input, a pipe or a FIFO (`--input <(zcat news.gz)`) is read once, as a
stream: translated in one pass, not counted ahead, and not resumable (it cannot be read again from a line on).

Under `accelerate launch` each process decodes every N-th batch of each window and the main process writes the
one output: the batches are the same for any number of processes, and so is the output. Each source's output
is bounded by its own length + 50 tokens (§6.1), not its batch's, so a line translates the same whatever
it is batched with (`generation.SourceLengthLimit`); with the CTranslate2 backend the bound is the batch's
longest source + 50.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import AutoConfig, GenerationConfig

from ..devices import check_device, check_dtype, decoding_model
from ..errors import CorruptFileError, ExistingPathError, MissingPathError, UsageError
from ..extras import require
from ..options import Options
from ..outputs import growing, grown
from ..readers import (
    compression_of,
    count_text_lines,
    is_stream,
    iter_stream_lines,
    iter_text_lines,
    read_json,
)
from ..saving import check_model_location, load_model_folder, model_task
from ..sentences import LANGUAGE_CODES, normalize_line, sentence_rules, split_document, translate_documents
from ..tasks.registry import task_or_plain
from .generation import (
    EXTRA_OUTPUT_TOKENS,
    check_length_options,
    check_output_file,
    generate_batch,
    generate_in_batches,
    generation_settings,
    source_lengths,
)

logger = logging.getLogger(__name__)

STDIN = "-"
# How the text reader names an input file in its errors.
INPUT_FILE = "--input file"
BACKENDS = ("transformers", "ctranslate2")
# Beside the output while it is being written: what it translates, so that a rerun may continue it.
RECORD_SUFFIX = ".translating.json"
# Lines held at once. Sorting a larger window pads less and keeps several processes evenly busy; an
# interrupted run loses at most one window's work.
DEFAULT_WINDOW = 10_000


@dataclass
class TranslateArguments(Options):
    model: str = field(
        metadata={
            "help": "A saved model folder with its tokenizer (ours, MarianMTModel, any "
            "AutoModelForSeq2SeqLM) or a Hub name; with --backend ctranslate2, a folder written by "
            "scripts/export_ctranslate2.py."
        }
    )
    input: list[str] | None = field(
        default=None,
        metadata={
            "help": "UTF-8 text files to translate, one input a line, read in turn; gzip, bzip2 or xz files "
            "(told by their first bytes) are read as the text they hold; a pipe or a FIFO (<(zcat x.gz)) is "
            "read once, as stdin is. Default (or -): stdin."
        },
    )
    output: str | None = field(
        default=None,
        metadata={
            "help": "Where the translations go, one line for each input line. Default (or -): stdout. A file "
            "is resumable: run the same command again to continue after its last complete line."
        },
    )
    backend: str = field(default="transformers", metadata={"help": f"Who decodes: {' or '.join(BACKENDS)}."})
    window: int = field(
        default=DEFAULT_WINDOW,
        metadata={
            "help": "Lines read, sorted by length and batched at a time; the output is written after each.",
            "range": ">= 1",
        },
    )
    batch_size: int = field(
        default=32, metadata={"help": "Inputs per generate() call, at most.", "range": ">= 1"}
    )
    max_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Source tokens per batch, padding included, at most (a longer input goes alone).",
            "range": ">= 1",
        },
    )
    num_beams: int | None = field(
        default=None, metadata={"help": "Default: the saved generation config.", "range": ">= 1"}
    )
    length_penalty: float | None = field(
        default=None, metadata={"help": "Default: the saved generation config.", "range": "any"}
    )
    max_new_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Default: each source's length + 50 (§6.1); for a series model, the saved config's "
            "max_length.",
            "range": ">= 1",
        },
    )
    min_new_tokens: int | None = field(
        default=None, metadata={"help": "generate()'s: no </s> before this many new tokens.", "range": ">= 1"}
    )
    do_sample: bool = field(default=False, metadata={"help": "Sample instead of searching."})
    top_k: int | None = field(
        default=None, metadata={"help": "With --do_sample: the k likeliest tokens.", "range": ">= 0"}
    )
    top_p: float | None = field(
        default=None, metadata={"help": "With --do_sample: nucleus sampling.", "range": "(0, 1]"}
    )
    temperature: float | None = field(
        default=None, metadata={"help": "With --do_sample: the temperature.", "range": "> 0"}
    )
    no_repeat_ngram_size: int | None = field(
        default=None,
        metadata={"help": "generate()'s: no n-gram of this size twice in an output.", "range": ">= 0"},
    )
    repetition_penalty: float | None = field(
        default=None,
        metadata={"help": "generate()'s: above 1 discourages tokens already generated.", "range": "> 0"},
    )
    seed: int = field(
        default=0,
        metadata={"help": "With --do_sample: the seed (each batch's is derived from it).", "range": ">= 0"},
    )
    split_sentences: bool = field(
        default=False,
        metadata={
            "help": "Each line is a text: split into sentences (the pipeline's rules), each translated, "
            "joined again into one output line."
        },
    )
    source_lang: str | None = field(
        default=None,
        metadata={
            "help": "With --split_sentences: whose sentence rules (default: the model's recorded source "
            "language, else English)."
        },
    )
    progress: bool | None = field(
        default=None,
        metadata={
            "help": "true or false: a progress bar on stderr, lines/s and the time left. Default: when "
            "stderr is a terminal."
        },
    )
    overwrite: bool = field(
        default=False, metadata={"help": "Replace an existing --output instead of refusing it."}
    )
    device: str = field(
        default="cuda" if torch.cuda.is_available() else "cpu",
        metadata={
            "help": "Where to decode: cuda (the default where there is a GPU), cuda:1, cpu, ...; under "
            "accelerate launch, each process takes its own device of that type."
        },
    )
    dtype: str = field(
        default="auto",
        metadata={
            "help": "What the model decodes in: auto (its weights as saved), float32, bfloat16 or float16 "
            "(a GPU's; bfloat16 from NVIDIA Ampere on). With --backend ctranslate2: --compute_type.",
        },
    )
    compute_type: str = field(
        default="default",
        metadata={
            "help": "With --backend ctranslate2: its compute type (int8, float32, ...; default: as saved)."
        },
    )

    def __post_init__(self):
        super().__post_init__()
        check_dtype(self.dtype, check_device(self.device))
        if self.backend not in BACKENDS:
            raise UsageError(f"--backend {self.backend!r} is none: give {' or '.join(BACKENDS)}.")
        if self.backend == "ctranslate2" and self.dtype != "auto":
            raise UsageError(
                f"--dtype {self.dtype} is for the transformers backend: CTranslate2 takes --compute_type "
                "(float32, bfloat16, float16, int8, ...)."
            )
        if not self.do_sample:
            for name in ("top_k", "top_p", "temperature"):
                if getattr(self, name) is not None:
                    raise UsageError(
                        f"--{name} applies to sampling: pass --do_sample true with it, or drop it."
                    )
        if self.source_lang is not None and not self.split_sentences:
            raise UsageError(
                "--source_lang names the rules that split sentences: pass --split_sentences true with it."
            )
        if self.compute_type != "default" and self.backend != "ctranslate2":
            raise UsageError(
                "--compute_type is CTranslate2's: pass --backend ctranslate2 with it, or drop it."
            )


# Backends: each measures a batch of texts in tokens, decodes one, and seeds its sampling.


class TransformersBackend:
    """generate() on a saved model folder, batch by batch (`generation.generate_batch`)."""

    def __init__(self, model, tokenizer, generation: dict):
        self.model, self.tokenizer, self.generation = model.eval(), tokenizer, generation

    def lengths(self, texts: list[str]) -> list[int]:
        return source_lengths(self.model, self.tokenizer, texts) if texts else []

    def decode(self, texts: list[str]) -> list[str]:
        return generate_batch(self.model, self.tokenizer, texts, self.generation)

    def seed(self, value: int) -> None:
        torch.manual_seed(value)


class CTranslate2Backend:
    """`CTranslate2Seq2Seq.generate_ids` on an export, batch by batch; inputs longer than the model's
    positions are cut to them, as the transformers backend cuts them."""

    def __init__(self, translator, generation: dict):
        from tokenizers import Tokenizer

        self.translator, self.generation = translator, generation
        self.limit = translator.defaults["max_position_embeddings"]
        # A copy: the translator's own tokenizer stays as it was made.
        self.tokenizer = Tokenizer.from_str(translator.tokenizer.to_str())
        self.tokenizer.enable_truncation(max_length=self.limit)

    def _ids(self, texts: list[str]) -> list[list[int]]:
        return [encoding.ids for encoding in self.tokenizer.encode_batch(texts)]

    def lengths(self, texts: list[str]) -> list[int]:
        return [len(ids) for ids in self._ids(texts)]

    def decode(self, texts: list[str]) -> list[str]:
        ids = self._ids(texts)
        options = dict(self.generation)
        if options.get("max_new_tokens") is None:  # CTranslate2 bounds a whole batch, not each source
            options["max_new_tokens"] = min(max(map(len, ids)) + EXTRA_OUTPUT_TOKENS, self.limit - 1)
        outputs = self.translator.generate_ids(ids, **options)
        return self.translator.tokenizer.decode_batch(outputs, skip_special_tokens=True)

    def seed(self, value: int) -> None:
        import ctranslate2

        ctranslate2.set_random_seed(value)


# The processes sharing the work.


@dataclass
class Processes:
    """This process's place among those that share the work: one, or those `accelerate launch` started."""

    rank: int = 0
    count: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    state: object = None  # accelerate's PartialState, for several

    @classmethod
    def from_environment(cls, device: torch.device) -> Processes:
        """One process, on `device`; or, under `accelerate launch`, this one of them, on its own device of
        `device`'s type."""
        if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
            return cls(device=device)
        from accelerate import PartialState

        state = PartialState(cpu=device.type == "cpu")
        return cls(state.process_index, state.num_processes, state.device, state)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def broadcast(self, value):
        """The main process's `value`, in every process."""
        if self.count == 1:
            return value
        from accelerate.utils import broadcast_object_list

        return broadcast_object_list([value], from_process=0)[0]

    def all_gather(self, items: list) -> list:
        """Every process's `items`, joined, in every process."""
        if self.count == 1:
            return items
        from accelerate.utils import gather_object

        return gather_object(items)

    def wait(self) -> None:
        if self.count > 1:
            self.state.wait_for_everyone()


ONE_PROCESS = Processes()


# Reading and writing lines.


def complete_lines(path: Path) -> tuple[int, int]:
    """(complete lines, bytes they take) of an output, by a scan of its bytes for newlines (no decoding): what
    follows its last newline is a line without its end (an output cut short)."""
    lines = end = offset = 0
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            if count := chunk.count(b"\n"):
                lines += count
                end = offset + chunk.rindex(b"\n") + 1
            offset += len(chunk)
    return lines, end


def count_lines(path: Path) -> int:
    """The lines of an input, as `read_lines` reads them: counted, and checked to be UTF-8 (decompressed
    where compressed) in the same pass, before the model is loaded (`readers.count_text_lines`)."""
    return count_text_lines(path, INPUT_FILE)


def read_lines(paths: list[Path], stdin=None) -> Iterator[str]:
    """The lines of `paths` in turn (of `stdin` when there are none), without their line ends, read lazily
    through the text reader (`readers.iter_text_lines`: gzip, bzip2 or xz told by the first bytes; what is
    not UTF-8 refused naming the file, the line and the byte; the text normalized). A line ends at "\\n"
    only, as `count_lines` and `wc -l` count them."""
    if not paths:
        stream = stdin if stdin is not None else sys.stdin
        buffer = getattr(stream, "buffer", None)
        if buffer is not None:
            yield from iter_stream_lines(buffer, "standard input")
        else:
            for text in stream:
                yield normalize_line(text.removesuffix("\n").removesuffix("\r"))
        return
    for path in paths:
        yield from iter_text_lines(path, INPUT_FILE)


def line_windows(lines: Iterable[str], first_line: int, window: int) -> Iterator[tuple[int, list[str]]]:
    """(number of its first line, its lines) for each window of `lines`, which start at `first_line`: windows
    end at multiples of `window` (counted from the input's first line), so that a resumed run cuts the rest
    of the input as the uninterrupted one did. Each window is read only when asked for."""
    lines = iter(lines)
    start = first_line
    while True:
        end = (start // window + 1) * window
        chunk = list(itertools.islice(lines, end - start))
        if not chunk:
            return
        yield start, chunk
        start += len(chunk)


_LINE_BREAKS = re.compile(r"[\r\n]+")


def one_line(text: str) -> str:
    """An output as one line: a line break it holds would shift every later line."""
    return _LINE_BREAKS.sub(" ", text).strip()


# Translating windows.


class _WindowProgress:
    """The progress bar's lines, advanced within a window as this process's batches finish (reckoning the
    other processes as far along), and set exactly when the window is written."""

    def __init__(self, bar, lines: int, processes: Processes):
        self.bar, self.lines, self.processes = bar, lines, processes
        self.shown = self.done = 0
        self.texts = 1

    def start(self, texts: int) -> None:
        self.done, self.texts = 0, max(1, texts)

    def batch_done(self, size: int) -> None:
        self.done += size
        self._show(min(self.lines, self.lines * self.done * self.processes.count // self.texts))

    def finish(self) -> None:
        self._show(self.lines)

    def _show(self, lines: int) -> None:
        if self.bar is not None and lines > self.shown:
            self.bar.update(lines - self.shown)
            self.shown = lines


def translate_window(
    lines: list[str],
    backend,
    batch_size: int,
    max_tokens: int | None = None,
    sentences: bool = False,
    language: str | None = None,
    processes: Processes = ONE_PROCESS,
    seed: int | None = None,
    first_line: int = 0,
    progress: _WindowProgress | None = None,
) -> list[str]:
    """The translation of each of `lines` (the window starting at line `first_line`), in every process: each
    decodes its share of the batches. An empty line gives an empty one. With `sentences`, each line is a text
    split by `language`'s rules (`sentences.sentence_rules`; None: at punctuation), translated sentence by
    sentence and joined again. With `seed`, each batch's sampling is seeded by its place in the input,
    whichever process decodes it."""

    def before_batch(number: int) -> None:
        # A tuple of ints hashes alike in every process and run (unlike text, salted per process).
        backend.seed(hash((seed, first_line, number)) % 2**31)

    def translate(texts: list[str]) -> list[str]:
        keep = [index for index, text in enumerate(texts) if text.strip()]
        sources = [texts[index] for index in keep]
        if progress is not None:
            progress.start(len(sources))
        mine = generate_in_batches(
            sources,
            backend.lengths(sources),
            backend.decode,
            batch_size,
            max_tokens,
            share=(processes.rank, processes.count),
            before_batch=before_batch if seed is not None else None,
            after_batch=progress.batch_done if progress is not None else None,
        )
        outputs = [""] * len(texts)
        for index, output in processes.all_gather(sorted(mine.items())):
            outputs[keep[index]] = one_line(output)
        return outputs

    if not sentences:
        return translate(lines)
    documents = [split_document(line, language) for line in lines]
    return [one_line(text) for text in translate_documents(documents, translate)]


def translate_lines(
    lines: Iterable[str] | None,
    backend,
    write: Callable[[list[str]], None] | None,
    window: int,
    batch_size: int,
    max_tokens: int | None = None,
    sentences: bool = False,
    language: str | None = None,
    first_line: int = 0,
    processes: Processes = ONE_PROCESS,
    seed: int | None = None,
    bar=None,
) -> int:
    """Translate `lines` (from line `first_line` of the input on) a window at a time, handing each window's
    translations, in input order, to `write`; returns how many lines were translated. The main process reads
    `lines` and writes (the others pass None for both); `translate_window` says the rest. At most `window`
    lines are held: the next window is read after the last is written."""
    windows = line_windows(lines, first_line, window) if processes.is_main else None
    translated = 0
    while True:
        item = processes.broadcast(next(windows, None) if processes.is_main else None)
        if item is None:
            return translated
        start, chunk = item
        progress = _WindowProgress(bar, len(chunk), processes)
        outputs = translate_window(
            chunk, backend, batch_size, max_tokens, sentences, language, processes, seed, start, progress
        )
        if processes.is_main:
            write(outputs)
            progress.finish()
        translated += len(chunk)


# What an output translates, and whether a rerun continues it.


def record_path(output: Path) -> Path:
    return output.with_name(output.name + RECORD_SUFFIX)


def input_record(paths: list[Path]) -> list[dict] | str:
    """The inputs as a record names them: each file's path, size and time of change (a changed file is
    another input), a stream's path as given (`readers.is_stream`), or standard input."""
    if not paths:
        return "<stdin>"
    return [_file_record(path) for path in paths]


def _file_record(path: Path) -> dict:
    if is_stream(path):  # its size and time say nothing of what it will hold
        return {"path": str(path), "stream": True}
    return {"path": str(path.resolve()), "bytes": path.stat().st_size, "modified_ns": path.stat().st_mtime_ns}


def _streams(inputs: list[dict] | str) -> list[str]:
    """The inputs of an `input_record` that are read once (standard input, a pipe, a FIFO), by name."""
    if inputs == "<stdin>":
        return ["standard input"]
    return [item["path"] for item in inputs if item.get("stream")]


@dataclass
class OutputPlan:
    """Where a run starts: after `first_line` complete lines of an output `keep_bytes` long."""

    first_line: int = 0
    keep_bytes: int = 0


def plan_output(output: Path, record: dict, overwrite: bool, total_lines: int | None) -> OutputPlan:
    """Whether `output` is new, replaced (`overwrite`) or continued: continued only when its record says it
    is an unfinished translation of what `record` describes. Reads, never writes (every process plans)."""
    if not output.exists() or overwrite:
        return OutputPlan()
    saved_path = record_path(output)
    if not saved_path.is_file():
        raise ExistingPathError(
            f"{output} exists and is no unfinished translation (no {saved_path.name} beside it): pass "
            "--overwrite to replace it, or give another --output."
        )
    try:
        saved = json.loads(saved_path.read_text(encoding="utf-8"))
    except ValueError:
        saved = {}
    streams = _streams(record["input"])
    if streams and saved.get("input") == record["input"]:
        raise ExistingPathError(
            f"{output} is an unfinished translation of {streams[0]}, a stream, which cannot be checked to be "
            "the same input nor read again from where it stopped: pass --overwrite to start again (give the "
            "input as a regular --input FILE to be resumable)."
        )
    differing = [key for key in record if key != "command" and saved.get(key) != record[key]]
    if differing:
        raise ExistingPathError(
            f"{output} is an unfinished translation of another {', '.join(differing)} ({saved_path.name}): "
            "run its command again to continue it, or pass --overwrite to start again."
        )
    lines, keep = complete_lines(output)
    if total_lines is not None and lines > total_lines:
        raise UsageError(
            f"{output} holds {lines} lines, more than the {total_lines} of the input: pass --overwrite to "
            "start again."
        )
    return OutputPlan(lines, keep)


def start_output(output: Path, plan: OutputPlan, record: dict) -> None:
    """Cut `output` to its complete lines (empty when new or replaced) and write its record beside it."""
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "ab") as file:
        file.truncate(plan.keep_bytes)
    saved_path = record_path(output)
    temporary = saved_path.with_name(saved_path.name + ".tmp")
    temporary.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    temporary.replace(saved_path)


# The command.


def _input_paths(names: list[str] | None) -> list[Path]:
    names = [name for name in names or [] if name != STDIN]
    paths = [Path(name).expanduser() for name in names]
    for path in paths:
        if path.is_dir():
            raise UsageError(f"--input {path} is a folder: give text files, one input a line.")
        if is_stream(path):
            continue  # read once, when its lines are: its first bytes are told then
        if not path.is_file():
            raise MissingPathError(
                f"No --input file {path}: give text files, one input a line, or - for stdin."
            )
        compression_of(path)  # a zip archive or a zstd file, refused before the model is loaded
    if len(paths) != len(names or []) and paths:
        raise UsageError("--input mixes files and - (stdin): give files only, or - alone.")
    return paths


def _model_id(name: str) -> str:
    path = Path(name).expanduser()
    return str(path.resolve()) if path.exists() else name


def _transformers_settings(args: TranslateArguments) -> tuple[dict, object, list[str] | None, tuple | None]:
    """(generate() settings, task, recorded languages, (model, tokenizer) or None) of a model folder, read
    without loading its weights where it saved its generation config, so that an output that cannot be
    written is refused at once."""
    check_model_location(args.model)
    config = AutoConfig.from_pretrained(args.model)
    check_length_options(_length_options(args), getattr(config, "max_position_embeddings", None), args.model)
    task = task_or_plain(model_task(config, args.model))
    loaded = None
    try:
        generation_config = GenerationConfig.from_pretrained(args.model)
    except OSError:  # saved without one: the model's own, which its class may set as it is built
        loaded = load_model_folder(args.model)
        generation_config = loaded[0].generation_config
    return generation_settings(args, task, generation_config), task, getattr(config, "langs", None), loaded


def _ctranslate2_settings(args: TranslateArguments) -> tuple[dict, object, list[str] | None]:
    require("ctranslate2", "--backend ctranslate2")
    from ..interop.ctranslate2_inference import GENERATION_DEFAULTS_FILE

    folder = Path(args.model).expanduser()
    if not (folder / "model.bin").is_file() or not (folder / GENERATION_DEFAULTS_FILE).is_file():
        raise MissingPathError(
            f"--model {args.model} is no CTranslate2 export (no model.bin and {GENERATION_DEFAULTS_FILE}): "
            "make one with scripts/export_ctranslate2.py, or drop --backend ctranslate2."
        )
    defaults = read_json(
        folder / GENERATION_DEFAULTS_FILE,
        f"Export {folder} again with scripts/export_ctranslate2.py",
        decompress=False,  # as CTranslate2Seq2Seq reads it next
    )
    check_length_options(_length_options(args), defaults.get("max_position_embeddings"), args.model)
    task = task_or_plain(defaults.get("task"))
    saved = GenerationConfig(
        num_beams=defaults["num_beams"],
        length_penalty=defaults["length_penalty"],
        max_length=defaults["max_length"],
    )
    generation = generation_settings(args, task, saved)
    if generation["do_sample"] and generation["num_beams"] > 1:
        raise UsageError(
            f"CTranslate2 samples with one beam, not {generation['num_beams']}: pass --num_beams 1 with "
            "--do_sample true."
        )
    return generation, task, defaults.get("langs")


def _length_options(args: TranslateArguments) -> dict[str, int | None]:
    """The options that ask for a number of output tokens, each at most the model's positions."""
    return {"max_new_tokens": args.max_new_tokens, "min_new_tokens": args.min_new_tokens}


def _load_ctranslate2(args: TranslateArguments, processes: Processes):
    """The export of `--model`, its files' faults named (`UnreadableExportError`) as a user's to fix."""
    from ..interop.ctranslate2_inference import CTranslate2Seq2Seq, UnreadableExportError

    try:
        return CTranslate2Seq2Seq(
            args.model,
            device=processes.device.type,
            device_index=processes.device.index or 0,
            compute_type=args.compute_type,
            intra_threads=torch.get_num_threads(),
        )
    except UnreadableExportError as error:
        raise CorruptFileError(str(error)) from error


def _is_ctranslate2_export(name: str) -> bool:
    return (Path(name).expanduser() / "model.bin").is_file()  # transformers' weights have other names


def translate(args: TranslateArguments, stdin=None, stdout=None) -> dict:
    """Translate `args.input` (or `stdin`) into `args.output` (or `stdout`), resuming an unfinished
    output; returns a summary: lines translated now and in all, the output, seconds."""
    started = time.time()
    device = check_device(args.device)
    paths = _input_paths(args.input)
    output = Path(args.output).expanduser() if args.output not in (None, STDIN) else None
    if output is not None:  # before anything is loaded: a folder, or a path under a file
        check_output_file(output, "--output")

    loaded = None
    if args.backend == "ctranslate2":
        generation, task, languages = _ctranslate2_settings(args)
    else:
        if _is_ctranslate2_export(args.model):
            raise UsageError(
                f"--model {args.model} is a CTranslate2 export: pass --backend ctranslate2 with it."
            )
        generation, task, languages, loaded = _transformers_settings(args)
    if args.split_sentences and not task.splits_into_sentences:
        raise UsageError(f"--split_sentences: a {task.name} input is no text of sentences; drop it.")
    language = None
    if args.split_sentences:
        try:
            language = sentence_rules(args.source_lang, languages)
        except ValueError:
            raise UsageError(
                f"--source_lang {args.source_lang}: no sentence rules for it; give one of "
                f"{', '.join(sorted(LANGUAGE_CODES))}."
            ) from None
    record = {
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "input": input_record(paths),
        "model": _model_id(args.model),
        "backend": args.backend,
        "generation": generation,
        "split_sentences": args.split_sentences,
        "source_lang": args.source_lang,
        **({"seed": args.seed} if args.do_sample else {}),
        **({"dtype": args.dtype} if args.dtype != "auto" else {}),  # lines of another dtype are not continued
    }

    processes = Processes.from_environment(device)
    # Counted by every process, which all check the output alike: one that refused it alone would leave the
    # others waiting for it. A stream is not: counted, it would be gone before it is translated.
    streamed = not paths or any(is_stream(path) for path in paths)
    total_lines = None if streamed else sum(count_lines(path) for path in paths)
    plan = plan_output(output, record, args.overwrite, total_lines) if output is not None else OutputPlan()

    if args.backend == "ctranslate2":
        backend = CTranslate2Backend(_load_ctranslate2(args, processes), generation)
    else:
        model, tokenizer = loaded or load_model_folder(args.model)
        model = decoding_model(model, processes.device, check_dtype(args.dtype, processes.device))
        backend = TransformersBackend(model, tokenizer, generation)

    processes.wait()  # every process has planned before the main one changes the output
    sink = lines = bar = None
    if processes.is_main:
        if output is not None:
            start_output(output, plan, record)
            if plan.first_line:
                logger.info("Continuing %s after its line %d.", output, plan.first_line)
            sink = open(output, "a", encoding="utf-8", newline="\n")
            # What a stop keeps: the lines written so far, which a rerun continues.
            growing(output, "kept unfinished beside its record: run the command again to continue it")
        else:
            sink = stdout if stdout is not None else sys.stdout
        lines = itertools.islice(read_lines(paths, stdin), plan.first_line, None)
        show = args.progress if args.progress is not None else sys.stderr.isatty()
        bar = tqdm(
            total=total_lines,
            initial=plan.first_line,
            unit=" lines",
            desc="Translating a stream, not counted ahead" if streamed else "Translating",
            disable=not show,
        )

    def write(outputs: list[str]) -> None:
        sink.write("".join(f"{text}\n" for text in outputs))
        sink.flush()

    try:
        translated = translate_lines(
            lines,
            backend,
            write if processes.is_main else None,
            args.window,
            args.batch_size,
            args.max_tokens,
            args.split_sentences,
            language,
            plan.first_line,
            processes,
            args.seed if args.do_sample else None,
            bar,
        )
    finally:
        if bar is not None:
            bar.close()
        if output is not None and sink is not None:
            sink.close()
    if processes.is_main and output is not None:
        record_path(output).unlink()  # complete: no longer anything to continue
        grown(output)
    processes.wait()
    return {
        "is_main": processes.is_main,
        "output": str(output) if output is not None else None,
        "lines": plan.first_line + translated,
        "translated": translated,
        "continued_after": plan.first_line,
        "seconds": round(time.time() - started, 1),
    }
