"""The file translator's work, a window of lines at a time, shared by the processes `accelerate launch`
started (accelerate's `PartialState`): the main process reads each window and hands it to every process
(`broadcast_object_list`); each decodes every N-th of its batches (`generation.generate_in_batches`), and the
outputs are gathered (`gather_object`) and written by the main process, in input order. The batches are the
same for any number of processes, and so is the output."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import TYPE_CHECKING

from ..sentences import split_document, translate_documents
from .generation import batch_seed, generate_in_batches
from .lines import line_windows, one_line

if TYPE_CHECKING:
    from accelerate import PartialState

# The one process of a run that `accelerate launch` did not start. accelerate's `PartialState` is a
# process-wide singleton whose first maker fixes its device for whatever comes after in the process (a
# training run in the same notebook among it): a translation alone never makes it, nor calls a collective
# (which would), nor imports accelerate (which imports torch: the CTranslate2 backend runs without it).
ONE_PROCESS = SimpleNamespace(
    process_index=0, num_processes=1, is_main_process=True, wait_for_everyone=lambda: None
)


def processes(cpu: bool):
    """The processes sharing the work: accelerate's `PartialState` under `accelerate launch` (`cpu`: each
    process on the CPU, else on its own GPU), else `ONE_PROCESS`."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return ONE_PROCESS
    from accelerate import PartialState

    return PartialState(cpu=cpu)


def _gathered(state, items: list) -> list:
    if state.num_processes == 1:
        return items
    from accelerate.utils import gather_object

    return gather_object(items)


def _broadcast(state, item):
    if state.num_processes == 1:
        return item
    from accelerate.utils import broadcast_object_list

    return broadcast_object_list([item], from_process=0)[0]


class WindowProgress:
    """The progress bar's lines, advanced within a window as this process's batches finish (reckoning the
    other processes as far along), and set exactly when the window is written."""

    def __init__(self, bar, lines: int, processes: int):
        self.bar, self.lines, self.processes = bar, lines, processes
        self.shown = self.done = 0
        self.texts = 1

    def start(self, texts: int) -> None:
        self.done, self.texts = 0, max(1, texts)

    def batch_done(self, size: int) -> None:
        self.done += size
        self._show(min(self.lines, self.lines * self.done * self.processes // self.texts))

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
    split_sentences: bool = False,
    language: str | None = None,
    state: PartialState | None = None,
    seed: int | None = None,
    first_line: int = 0,
    progress: WindowProgress | None = None,
) -> list[str]:
    """The translation of each of `lines` (the window starting at line `first_line`), in every process of
    `state` (default: `ONE_PROCESS`): each decodes its share of the batches. An empty line gives an empty
    one. With `split_sentences`, each line is a text split by `language`'s rules (`sentences.sentence_rules`;
    None: at punctuation), translated sentence by sentence and joined again. With `seed`, each batch's
    sampling is seeded by its place in the input, whichever process decodes it."""
    state = state if state is not None else ONE_PROCESS

    def before_batch(number: int) -> None:
        backend.seed(batch_seed(seed, first_line, number))

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
            share=(state.process_index, state.num_processes),
            before_batch=before_batch if seed is not None else None,
            after_batch=progress.batch_done if progress is not None else None,
        )
        outputs = [""] * len(texts)
        for index, output in _gathered(state, sorted(mine.items())):
            outputs[keep[index]] = one_line(output)
        return outputs

    if not split_sentences:
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
    split_sentences: bool = False,
    language: str | None = None,
    first_line: int = 0,
    state: PartialState | None = None,
    seed: int | None = None,
    bar=None,
) -> int:
    """Translate `lines` (from line `first_line` of the input on) a window at a time, handing each window's
    translations, in input order, to `write`; returns how many lines were translated. The main process of
    `state` (default: `ONE_PROCESS`) reads `lines` and writes (the others pass None for both);
    `translate_window` says the rest. At most `window` lines are held: the next window is read after the last
    is written."""
    state = state if state is not None else ONE_PROCESS
    windows = line_windows(lines, first_line, window) if state.is_main_process else None
    translated = 0
    while True:
        item = next(windows, None) if state.is_main_process else None
        start_and_chunk = _broadcast(state, item)
        if start_and_chunk is None:
            return translated
        start, chunk = start_and_chunk
        progress = WindowProgress(bar, len(chunk), state.num_processes)
        outputs = translate_window(
            chunk, backend, batch_size, max_tokens, split_sentences, language, state, seed, start, progress
        )
        if state.is_main_process:
            write(outputs)
            progress.finish()
        translated += len(chunk)
