"""Who decodes for the file translator: generate() on a saved model folder (`TransformersBackend`), or
CTranslate2 on an export of one (`CTranslate2Backend`). Each reads its model's saved decoding without loading
the weights (`transformers_settings`, `ctranslate2_settings`), measures a batch of texts in tokens, decodes
one, and seeds its sampling.

The decoding options reach CTranslate2 by their fields (`ctranslate2_options`): each field of
`settings.DecodingArguments` names the keyword of `ctranslate2.Translator.translate_batch` that takes it, or
why CTranslate2 cannot decode with it, and the export's `CTranslate2Seq2Seq` is handed CTranslate2's own
keywords.

Imported, this module loads neither torch nor transformers, and the CTranslate2 backend never does: with torch
in its process CTranslate2 decodes slower (`interop.ctranslate2_inference`), and a process that loads neither
starts in a fraction of the time. The transformers backend's functions import them.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from ..errors import CorruptFileError, MissingPathError, UsageError
from ..extras import require
from ..lengths import smallest_limit
from ..readers import read_json
from .arguments import CTRANSLATE2_DEVICE, TranslateArguments
from .generation import (
    EXTRA_OUTPUT_TOKENS,
    check_length_options,
    cut_lengths,
    generate_batch,
    generation_settings,
    source_lengths,
    source_limits,
)
from .settings import (
    CTRANSLATE2,
    CTRANSLATE2_REFUSAL,
    CTRANSLATE2_VALUE,
    GENERATE,
    decoding_fields,
    length_options,
)


class TransformersBackend:
    """generate() on a saved model folder, batch by batch (`generation.generate_batch`)."""

    def __init__(self, model, tokenizer, generation: dict):
        self.model, self.tokenizer, self.generation = model.eval(), tokenizer, generation

    def lengths(self, texts: list[str]) -> list[int]:
        return source_lengths(self.model, self.tokenizer, texts) if texts else []

    def decode(self, texts: list[str]) -> list[str]:
        return generate_batch(self.model, self.tokenizer, texts, self.generation)

    def seed(self, value: int) -> None:
        import torch

        torch.manual_seed(value)


def transformers_settings(args: TranslateArguments) -> tuple[dict, object, list[str] | None, tuple | None]:
    """(generate() settings, task, recorded languages, (model, tokenizer) or None) of a model folder, read
    without loading its weights where it saved its generation config, so that an output that cannot be
    written is refused at once."""
    from transformers import AutoConfig, GenerationConfig

    from ..saving import check_model_location, load_model_folder, model_task
    from ..tasks.registry import task_or_plain

    check_model_location(args.model)
    config = AutoConfig.from_pretrained(args.model)
    check_length_options(length_options(args), getattr(config, "max_position_embeddings", None), args.model)
    task = task_or_plain(model_task(config, args.model))
    loaded = None
    try:
        generation_config = GenerationConfig.from_pretrained(args.model)
    except OSError:  # saved without one: the model's own, which its class may set as it is built
        loaded = load_model_folder(args.model)
        generation_config = loaded[0].generation_config
    return generation_settings(args, task, generation_config), task, getattr(config, "langs", None), loaded


def ctranslate2_options(generation: dict) -> dict:
    """`ctranslate2.Translator.translate_batch`'s keywords for generate()'s `generation`
    (`generation_settings`): each setting under its field's CTranslate2 keyword (`settings.CTRANSLATE2`), with
    its field's conversion (`settings.CTRANSLATE2_VALUE`). A setting CTranslate2 cannot decode with is
    refused with its field's reason (`settings.CTRANSLATE2_REFUSAL`), and so is sampling with several beams.
    Without `max_new_tokens`, there is no `max_decoding_length`: `CTranslate2Backend` bounds each batch."""
    options = {}
    for option in decoding_fields():
        keyword = option.metadata[GENERATE]
        if keyword not in generation or generation[keyword] is None:
            continue
        value = generation[keyword]
        reason = option.metadata.get(CTRANSLATE2_REFUSAL)
        if reason is not None:
            if value != option.default:
                raise UsageError(
                    f"--{option.name} is not for --backend ctranslate2: {reason} Drop it, or decode with "
                    "--backend transformers."
                )
            continue
        convert = option.metadata.get(CTRANSLATE2_VALUE)
        options[option.metadata[CTRANSLATE2]] = value if convert is None else convert(value, generation)
    # Each library samples with several beams in its own way: refused rather than decoded otherwise.
    if generation["do_sample"] and generation["num_beams"] > 1:
        raise UsageError(
            f"CTranslate2 samples with one beam, not {generation['num_beams']}: pass --num_beams 1 with "
            "--do_sample true."
        )
    return options


class CTranslate2Backend:
    """`CTranslate2Seq2Seq.generate_ids` on an export, batch by batch, with generate()'s settings
    (`generation`) as CTranslate2's (`ctranslate2_options`); inputs are cut at the source limit the export
    recorded (the source length the model was trained with, else its positions: `generation.source_limits`),
    as the transformers backend cuts them."""

    def __init__(self, translator, generation: dict):
        from tokenizers import Tokenizer

        self.translator, self.options = translator, ctranslate2_options(generation)
        defaults = translator.defaults
        self.positions = defaults["max_position_embeddings"]
        self.source_limits = source_limits(defaults.get("max_source_length"), self.positions)
        _, cut = smallest_limit(self.source_limits)
        # A copy: the translator's own tokenizer stays as it was made (uncut, for `lengths`' warning).
        self.tokenizer = Tokenizer.from_str(translator.tokenizer.to_str())
        self.tokenizer.enable_truncation(max_length=cut)

    def _ids(self, texts: list[str]) -> list[list[int]]:
        return [encoding.ids for encoding in self.tokenizer.encode_batch(texts)]

    def lengths(self, texts: list[str]) -> list[int]:
        uncut = [len(encoding.ids) for encoding in self.translator.tokenizer.encode_batch(texts)]
        return cut_lengths(uncut, self.source_limits)

    def decode(self, texts: list[str]) -> list[str]:
        ids = self._ids(texts)
        options = dict(self.options)
        if "max_decoding_length" not in options:  # CTranslate2 bounds a whole batch, not each source
            options["max_decoding_length"] = min(max(map(len, ids)) + EXTRA_OUTPUT_TOKENS, self.positions - 1)
        outputs = self.translator.generate_ids(ids, **options)
        return self.translator.tokenizer.decode_batch(outputs, skip_special_tokens=True)

    def seed(self, value: int) -> None:
        import ctranslate2

        ctranslate2.set_random_seed(value)


def ctranslate2_settings(args: TranslateArguments) -> tuple[dict, object, list[str] | None]:
    """(generate() settings, task, recorded languages) of a CTranslate2 export, from the decoding defaults it
    saved beside its weights; an option CTranslate2 cannot decode with is refused before it loads
    (`ctranslate2_options`)."""
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
    check_length_options(length_options(args), defaults.get("max_position_embeddings"), args.model)
    task = export_task(defaults)
    # The saved generation config's fields that generation_settings reads, as the export saved them.
    saved = SimpleNamespace(
        num_beams=defaults["num_beams"],
        length_penalty=defaults["length_penalty"],
        max_length=defaults["max_length"],
    )
    generation = generation_settings(args, task, saved)
    ctranslate2_options(generation)
    return generation, task, defaults.get("langs")


def export_task(defaults: dict):
    """The task of an export (`defaults`: its saved decoding defaults) as decoding asks it: its name and the
    traits the export recorded of it (`interop.ctranslate2_export`, `TASK_TRAITS`), else the registry's task
    of that name, whose finding imports every installed task's code (an export made before the traits were
    recorded, or of a task not installed where it was made)."""
    from ..interop.ctranslate2_inference import TASK_TRAITS

    traits = defaults.get(TASK_TRAITS)
    if traits is not None:
        return SimpleNamespace(**traits)
    from ..tasks.registry import task_or_plain

    return task_or_plain(defaults.get("task"))


def ctranslate2_device(args: TranslateArguments):
    """The device `--device` names for CTranslate2 (`arguments.CTRANSLATE2_DEVICE`), with its `type` and
    `index` as a torch.device has them, found on this machine by CTranslate2; unset: cuda where CTranslate2
    has a GPU, else cpu."""
    import ctranslate2

    gpus = ctranslate2.get_cuda_device_count()
    name = args.device if args.device is not None else "cuda" if gpus else "cpu"
    match = CTRANSLATE2_DEVICE.fullmatch(name)
    if match["type"] == "cuda" and not gpus:
        raise UsageError(f"--device {name}: this machine has no CUDA GPU; pass --device cpu.")
    index = match["index"]
    return SimpleNamespace(type=match["type"], index=None if index is None else int(index))


def cpu_threads() -> int:
    """The threads CTranslate2 decodes with on the CPU, as torch would pick them for generate():
    OMP_NUM_THREADS where it is set, else the CPUs this process may run on (torch counts physical cores: the
    same number where there are no hyperthreads)."""
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        return int(threads)
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def load_ctranslate2(args: TranslateArguments, device):
    """The export of `--model` on `device` (`ctranslate2_device`, or a torch.device under `accelerate
    launch`), its files' faults named (`UnreadableExportError`) as a user's to fix."""
    from ..interop.ctranslate2_inference import CTranslate2Seq2Seq, UnreadableExportError

    try:
        return CTranslate2Seq2Seq(
            args.model,
            device=device.type,
            device_index=device.index or 0,
            compute_type=args.compute_type,
            intra_threads=cpu_threads(),
        )
    except UnreadableExportError as error:
        raise CorruptFileError(str(error)) from error


def is_ctranslate2_export(name: str) -> bool:
    return (Path(name).expanduser() / "model.bin").is_file()  # transformers' weights have other names
