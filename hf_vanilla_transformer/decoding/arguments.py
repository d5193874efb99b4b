"""translate.py's options: the decoding options every decoding command shares (`settings.DecodingArguments`),
and the file translator's own (inputs, output, batching, backend, device).

Torch-free when imported, as `settings` is: `--help` and a mistyped option are answered without it, and the
CTranslate2 backend checks its device without it; the transformers backend's device and dtype are checked by
torch (`devices`), imported then.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import UsageError
from .settings import DecodingArguments

BACKENDS = ("transformers", "ctranslate2")
# The devices CTranslate2 decodes on, in torch's spelling as --device takes them: cpu, cuda, cuda:N.
CTRANSLATE2_DEVICE = re.compile(r"(?P<type>cpu|cuda)(?::(?P<index>\d+))?")
# Lines held at once. Sorting a larger window pads less and keeps several processes evenly busy; an
# interrupted run loses at most one window's work.
DEFAULT_WINDOW = 10_000


@dataclass
class TranslateArguments(DecodingArguments):
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
    device: str | None = field(
        default=None,
        metadata={
            "help": "Where to decode: cuda, cuda:1, cpu, ...; under accelerate launch, each process takes "
            "its own device of that type. Default: cuda where there is a GPU, else cpu."
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
        if self.backend not in BACKENDS:
            raise UsageError(f"--backend {self.backend!r} is none: give {' or '.join(BACKENDS)}.")
        if self.backend == "ctranslate2":
            # Its name checked here; found on the machine by CTranslate2 once that is imported (`backends`),
            # which also picks it when unset.
            if self.device is not None and CTRANSLATE2_DEVICE.fullmatch(self.device) is None:
                raise UsageError(
                    f"--device {self.device!r} is not a device CTranslate2 decodes on: give cpu, cuda or "
                    "cuda:N."
                )
            if self.dtype != "auto":
                raise UsageError(
                    f"--dtype {self.dtype} is for the transformers backend: CTranslate2 takes --compute_type "
                    "(float32, bfloat16, float16, int8, ...)."
                )
        else:
            import torch

            from ..devices import check_device, check_dtype

            if self.device is None:
                self.device = "cuda" if torch.cuda.is_available() else "cpu"
            check_dtype(self.dtype, check_device(self.device))
        if self.source_lang is not None and not self.split_sentences:
            raise UsageError(
                "--source_lang names the rules that split sentences: pass --split_sentences true with it."
            )
        if self.compute_type != "default" and self.backend != "ctranslate2":
            raise UsageError(
                "--compute_type is CTranslate2's: pass --backend ctranslate2 with it, or drop it."
            )


__all__ = ["TranslateArguments"]
