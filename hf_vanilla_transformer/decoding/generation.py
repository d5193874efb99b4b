"""Decoding a saved model's inputs, shared by scoring (`evaluation`) and the file translator (`translating`):
generate() settings from the decoding options (`settings.DecodingArguments`) over the saved generation config
(`generation_settings`), batches sorted by token length (`generate_in_batches`), the paper's output limit of
source length + 50 (§6.1, `output_limit.SourceLengthLimit`), sources cut at the length the model was trained
with or its positions (`source_limits`), texts cut into sentences and joined again (`generate_documents`), and
the checks made before a model is loaded (a length past the model's positions, an output file).

torch and transformers are imported by the functions that call generate(), not with the module: the
CTranslate2 backend settles its decoding and batches with the rest of it in a process without torch.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputTypeError, UsageError
from ..lengths import check_length, smallest_limit
from ..outputs import check_writable
from ..sentences import sentence_rules, split_document, translate_documents
from .settings import GENERATE, DecodingArguments, decoding_fields

if TYPE_CHECKING:
    from ..tasks import Task

logger = logging.getLogger(__name__)


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
    fail at that length, deep inside the model (`lengths.check_length`)."""
    for name, value in options.items():
        check_length(name, value, {f"the positions of {model} (its max_position_embeddings)": limit})


# The settings generate() is always given, each resolved over the saved generation config; every other
# decoding option is given to it as it is, when it is set.
RESOLVED_SETTINGS = ("num_beams", "length_penalty", "max_new_tokens", "do_sample")


def generation_settings(decoding: DecodingArguments, task: Task, generation_config) -> dict:
    """generate() keyword arguments: a command's decoding options (`decoding`: its `DecodingArguments`, or the
    arguments that extend them) over the model's saved generation config, each by its field's generate()
    keyword (`settings.GENERATE`).

    Without `--max_new_tokens`, the task decides: None (`generate_texts` then allows source length + 50,
    §6.1), or the saved config's `max_length` for tasks whose outputs are many times longer than their inputs.
    """
    max_new_tokens = decoding.max_new_tokens
    if max_new_tokens is None and task.output_length_from_config:  # else per batch, from its sources
        max_new_tokens = default_max_new_tokens(task, generation_config, source_tokens=0)
    # transformers v5 leaves a field the saved config lacks unset (None) until generate() fills it with its
    # default: beam 1, length penalty 1.0 (a Marian folder's config names no length penalty).
    num_beams = decoding.num_beams if decoding.num_beams is not None else generation_config.num_beams or 1
    settings = {
        "num_beams": num_beams,
        "max_new_tokens": max_new_tokens,
        "do_sample": bool(decoding.do_sample),
    }
    if num_beams > 1:  # greedy has no length penalty: passing one makes generate() warn that it is ignored
        length_penalty = (
            decoding.length_penalty
            if decoding.length_penalty is not None
            else generation_config.length_penalty
        )
        settings["length_penalty"] = 1.0 if length_penalty is None else length_penalty
    for option in decoding_fields():  # unset, the saved generation config's, and the settings do not name it
        keyword, value = option.metadata[GENERATE], getattr(decoding, option.name)
        if keyword is not None and keyword not in RESOLVED_SETTINGS and value is not None:
            settings[keyword] = value
    return settings


def length_sorted_batches(
    lengths: Sequence[int], batch_size: int, max_tokens: int | None = None
) -> list[list[int]]:
    """The indices of `lengths` (token counts) cut into batches of similar lengths, longest first: at most
    `batch_size` a batch and, with `max_tokens`, at most that many tokens padded to the batch's longest (a
    longer input goes alone). Sorting pads little; the longest batch first shows at once the memory a run
    needs. Equal lengths keep their input order, so the same inputs always make the same batches: what several
    processes sharing the batches (translate.py) rely on to decode as one process does."""
    if batch_size < 1:
        raise UsageError(f"batch_size={batch_size!r}: a batch holds at least one input; give 1 or more.")
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


def position_limit(model) -> int | None:
    """How many positions the model's encoder and decoder take, if its config says (None: no limit known)."""
    return getattr(model.config, "max_position_embeddings", None)


def source_limits(
    max_source_length: int | None, max_position_embeddings: int | None
) -> dict[str, int | None]:
    """What a source is cut at, by what sets each limit (`lengths.smallest_limit` picks the one that
    cuts): the source length the model was trained with, where its config records it (`max_source_length`:
    it saw no longer source), and its positions."""
    return {
        "the longest source the model was trained with (its max_source_length)": max_source_length,
        "the model's positions (its max_position_embeddings)": max_position_embeddings,
    }


def model_source_limits(model) -> dict[str, int | None]:
    """`source_limits` of a loaded model: a folder that records no source length (saved before it was
    recorded, a Marian model) is cut at its positions alone."""
    config = model.config
    return source_limits(
        getattr(config, "max_source_length", None), getattr(config, "max_position_embeddings", None)
    )


def cut_lengths(lengths: Sequence[int], limits: dict[str, int | None]) -> list[int]:
    """Token counts `lengths` of sources cut at the smallest of `limits` (`source_limits`), as decoding feeds
    them, warning once for the sources that are cut, naming the limit that cuts them."""
    smallest = smallest_limit(limits)
    if smallest is None:
        return list(lengths)
    what, limit = smallest
    cut = sum(length > limit for length in lengths)
    if cut:
        logger.warning(
            "%d input(s) longer than %d tokens, %s, are cut to that many tokens.", cut, limit, what
        )
    return [min(length, limit) for length in lengths]


def source_lengths(model, tokenizer, sources: Sequence[str]) -> list[int]:
    """Each source's token count as `generate_batch` feeds it (cut at the model's source limit:
    `model_source_limits`), warning once for sources that are cut."""
    if not sources:
        return []
    lengths = [len(ids) for ids in tokenizer(list(sources), verbose=False)["input_ids"]]
    return cut_lengths(lengths, model_source_limits(model))


def generate_batch(model, tokenizer, sources: list[str], generation: dict) -> list[str]:
    """One generate() call on `sources` (cut at the model's source limit, `model_source_limits`, keeping the
    </s> the tokenizer appends), decoded to text. Without `max_new_tokens` in `generation`, each source's
    output takes at most its length + 50 tokens (§6.1), whatever else is in the batch (`SourceLengthLimit`),
    and no more than the decoder's positions."""
    if not sources:
        return []
    import torch
    from transformers import LogitsProcessorList

    from .output_limit import SourceLengthLimit

    smallest = smallest_limit(model_source_limits(model))
    cut = None if smallest is None else smallest[1]
    batch = tokenizer(sources, return_tensors="pt", padding=True, truncation=cut is not None, max_length=cut)
    positions = position_limit(model)
    kwargs = dict(generation)
    max_new_tokens = kwargs.pop("max_new_tokens", None)
    if max_new_tokens is None:  # counted on the host, before the batch goes to the device
        limits = (batch["attention_mask"].sum(dim=1) + EXTRA_OUTPUT_TOKENS).tolist()
        if positions is not None:  # the start token and the output are fed to the decoder (not the last </s>)
            limits = [min(length, positions - 1) for length in limits]
        max_new_tokens = max(limits)
        eos = model.generation_config.eos_token_id
        eos = tokenizer.eos_token_id if eos is None else eos
        if eos is not None:  # a model that names no end token stops at the batch's bound
            kwargs["logits_processor"] = LogitsProcessorList([SourceLengthLimit(limits, eos)])
            max_new_tokens += 1  # the longest output's forced </s>
    kwargs.update(length_limit(max_new_tokens))
    with torch.inference_mode():
        generated = model.generate(**batch.to(model.device), **kwargs)
    return tokenizer.batch_decode(generated, skip_special_tokens=True)


def check_texts(texts: Sequence[str], name: str) -> None:
    """Refuse one string where a list of texts is taken (each of its characters would be a text), and an item
    that is no string, naming its index."""
    if isinstance(texts, str):
        raise InputTypeError(f"{name} is one string, not a list of texts: pass [{name}] to give one text.")
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputTypeError(
                f"{name}[{index}] is {type(text).__name__}, not a text: give every item as a string."
            )


def generate_texts(
    model, tokenizer, sources: list[str], batch_size: int, generation: dict, seed: int | None = None
) -> list[str]:
    """Generate for every source, in batches of similar token lengths (`generate_in_batches`: less padding),
    in input order, showing progress in sentences. A blank source gives an empty output, as a blank line does
    in translate.py: from no text the model would make one up. No sources give no outputs. With `seed`
    (sampling's), each batch's sampling is seeded by its place among the batches (`batch_seed`)."""
    import torch
    from tqdm.auto import tqdm

    check_texts(sources, "sources")
    model.eval()
    keep = [index for index, source in enumerate(sources) if source.strip()]
    texts = [sources[index] for index in keep]
    lengths = source_lengths(model, tokenizer, texts)
    decode = functools.partial(generate_batch, model, tokenizer, generation=generation)

    def before_batch(number: int) -> None:
        torch.manual_seed(batch_seed(seed, number))

    with tqdm(total=len(texts), desc="Generating", unit=" sentences") as progress:
        outputs = generate_in_batches(
            texts,
            lengths,
            decode,
            batch_size,
            before_batch=before_batch if seed is not None else None,
            after_batch=progress.update,
        )
    generated = [""] * len(sources)
    for position, index in enumerate(keep):
        generated[index] = outputs[position]
    return generated


def batch_seed(seed: int, *place: int) -> int:
    """The seed of the batch at `place` in the input (its number; translate.py: its window's first line and
    its number in the window): the same in every process and run, whichever process decodes the batch."""
    # A tuple of ints hashes alike in every process and run (unlike text, salted per process).
    return hash((seed, *place)) % 2**31


def join_examples(texts: list[str], per_text: int) -> list[str]:
    """Every `per_text` consecutive texts joined by a space, as sentences of one paragraph (the last text
    holds the remainder)."""
    return [" ".join(texts[start : start + per_text]) for start in range(0, len(texts), per_text)]


def generate_documents(
    model,
    tokenizer,
    texts: list[str],
    batch_size: int,
    generation: dict,
    languages: list[str] | None,
    seed: int | None = None,
) -> list[str]:
    """`generate_texts` for texts of several sentences: each split by the rules of the source of `languages`,
    its sentences generated (all texts' together, in batches of similar lengths) and joined again, as the
    pipeline translates a text. A blank text gives an empty output."""
    check_texts(texts, "texts")
    language = sentence_rules(None, languages)
    documents = [split_document(text, language) for text in texts]
    return translate_documents(
        documents,
        lambda sentences: generate_texts(model, tokenizer, sentences, batch_size, generation, seed),
    )
