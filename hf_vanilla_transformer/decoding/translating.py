"""Translate text files line by line with a saved model, as Marian's and CTranslate2's command-line
translators do, for files of millions of lines: what scripts/translate.py runs (`translate`).

The input is read a window of lines at a time (never whole); a window's lines are batched by token length
(`generation.generate_in_batches`, evaluation's batching) and written back in input order, and the output is
flushed after each window, so an interrupted run loses at most one (`windows`). Beside an output being written
lies a record of what it translates: a rerun with the same input, model and decoding continues after its last
complete line (`record`). An output with no record is not the command's to replace, unless asked
(`--overwrite`).

An input file's lines are counted (and checked) before the model loads, for the progress bar's total and a
resumed output's check. Standard input, a pipe or a FIFO (`--input <(zcat news.gz)`) is read once, as a
stream: translated in one pass, not counted ahead, and not resumable (it cannot be read again from a line on)
(`lines`).

Under `accelerate launch` each process decodes every N-th batch of each window and the main process writes the
one output: the batches are the same for any number of processes, and so is the output. Each source's output
is bounded by its own length + 50 tokens (§6.1), not its batch's, so a line translates the same whatever
it is batched with (`output_limit.SourceLengthLimit`); with the CTranslate2 backend the bound is the batch's
longest source + 50 (`backends`).

The modules of the file translator, by job: `arguments` (its options, over the decoding options of
`settings`), `backends` (generate() or CTranslate2), `lines` (input lines and windows), `windows` (a window's
work shared by the processes), `record` (what an output translates), and this one, the command. Each loads
what its backend needs when it is needed: with `--backend ctranslate2`, neither torch nor transformers (nor
accelerate, unless `accelerate launch` started the process).
"""

from __future__ import annotations

import itertools
import logging
import sys
import time
from pathlib import Path

from ..errors import UsageError
from ..outputs import growing, grown
from ..readers import is_stream
from ..sentences import LANGUAGE_CODES, sentence_rules
from .arguments import TranslateArguments
from .backends import (
    CTranslate2Backend,
    TransformersBackend,
    ctranslate2_device,
    ctranslate2_settings,
    is_ctranslate2_export,
    load_ctranslate2,
    transformers_settings,
)
from .generation import check_output_file
from .lines import STDIN, count_lines, input_paths, read_lines
from .record import OutputPlan, output_record, plan_output, record_path, start_output
from .windows import processes, translate_lines

logger = logging.getLogger(__name__)


def translate(args: TranslateArguments, stdin=None, stdout=None) -> dict:
    """Translate `args.input` (or `stdin`) into `args.output` (or `stdout`), resuming an unfinished
    output; returns a summary: lines translated now and in all, the output, seconds."""
    started = time.time()
    if args.backend != "ctranslate2":  # torch's device; CTranslate2's is found once its export is read
        from ..devices import check_device

        device = check_device(args.device)
    paths = input_paths(args.input)
    output = Path(args.output).expanduser() if args.output not in (None, STDIN) else None
    if output is not None:  # before anything is loaded: a folder, or a path under a file
        check_output_file(output, "--output")

    loaded = None
    if args.backend == "ctranslate2":
        generation, task, languages = ctranslate2_settings(args)
        device = ctranslate2_device(args)
    else:
        if is_ctranslate2_export(args.model):
            raise UsageError(
                f"--model {args.model} is a CTranslate2 export: pass --backend ctranslate2 with it."
            )
        generation, task, languages, loaded = transformers_settings(args)
    language = _sentence_rules(args, task, languages)
    record = output_record(args, paths, generation)

    state, device = _processes(device)
    # Counted by every process, which all check the output alike: one that refused it alone would leave the
    # others waiting for it. A stream is not: counted, it would be gone before it is translated.
    streamed = not paths or any(is_stream(path) for path in paths)
    total_lines = None if streamed else sum(count_lines(path) for path in paths)
    plan = plan_output(output, record, args.overwrite, total_lines) if output is not None else OutputPlan()

    if args.backend == "ctranslate2":
        backend = CTranslate2Backend(load_ctranslate2(args, device), generation)
    else:
        from ..devices import check_dtype, decoding_model
        from ..saving import load_model_folder

        model, tokenizer = loaded or load_model_folder(args.model)
        model = decoding_model(model, device, check_dtype(args.dtype, device))
        backend = TransformersBackend(model, tokenizer, generation)

    state.wait_for_everyone()  # every process has planned before the main one changes the output
    sink = lines = bar = None
    if state.is_main_process:
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
        from tqdm.auto import tqdm

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
            write if state.is_main_process else None,
            args.window,
            args.batch_size,
            args.max_tokens,
            args.split_sentences,
            language,
            plan.first_line,
            state,
            args.sampling_seed,
            bar,
        )
    finally:
        if bar is not None:
            bar.close()
        if output is not None and sink is not None:
            sink.close()
    if state.is_main_process and output is not None:
        record_path(output).unlink()  # complete: no longer anything to continue
        grown(output)
    state.wait_for_everyone()
    return {
        "is_main": state.is_main_process,
        "output": str(output) if output is not None else None,
        "lines": plan.first_line + translated,
        "translated": translated,
        "continued_after": plan.first_line,
        "seconds": round(time.time() - started, 1),
    }


def _sentence_rules(args: TranslateArguments, task, languages: list[str] | None) -> str | None:
    """With `--split_sentences`, whose rules cut each line into sentences: `--source_lang`'s, else the
    model's recorded source language's; None without it."""
    if not args.split_sentences:
        return None
    if not task.splits_into_sentences:
        raise UsageError(f"--split_sentences: a {task.name} input is no text of sentences; drop it.")
    try:
        return sentence_rules(args.source_lang, languages)
    except ValueError:
        raise UsageError(
            f"--source_lang {args.source_lang}: no sentence rules for it; give one of "
            f"{', '.join(sorted(LANGUAGE_CODES))}."
        ) from None


def _processes(device):
    """The processes sharing the work (`windows.processes`) and this one's device (`device`: a torch.device,
    or CTranslate2's, `backends.ctranslate2_device`): one process decodes on `device` as given (`cuda:1`
    too); under `accelerate launch`, each on its own device of that type."""
    state = processes(cpu=device.type == "cpu")
    return state, state.device if state.num_processes > 1 else device


__all__ = ["translate"]
