"""The decoding options every decoding command shares, in one dataclass (`DecodingArguments`): translate.py's
and evaluate_model.py's arguments extend it, and the demo page's controls build it.

Each field carries its rules beside its help (`options.Options`: a range, checked as the dataclass is built)
and its name for each backend: the keyword generate() takes it as (`GENERATE`), and the keyword of
`ctranslate2.Translator.translate_batch` that takes it (`CTRANSLATE2`) or why CTranslate2 cannot decode with
it (`CTRANSLATE2_REFUSAL`). `generation.generation_settings` and `backends.ctranslate2_options` walk the
fields, so a new decoding option is a new field here and nothing else.

This module imports neither torch nor transformers, so that it never stands between a command and refusing its
options before those load (evaluate_model.py, the demo page and translate.py import it at their top).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..errors import UsageError
from ..options import Options

# The keys of a decoding field's metadata, beside "help" and "range".
# generate()'s keyword for the option; None for one that no decoding call takes (the seed: each backend seeds
# its sampling itself, batch by batch).
GENERATE = "generate"
# `translate_batch`'s keyword for the option (None as for GENERATE), unless CTRANSLATE2_REFUSAL says why
# CTranslate2 cannot decode with it.
CTRANSLATE2 = "ctranslate2"
# No option needs it today: each one maps to a `translate_batch` keyword.
CTRANSLATE2_REFUSAL = "ctranslate2_refusal"
# Where CTranslate2's value is not the option's own: a function of the value and of all generate() settings.
CTRANSLATE2_VALUE = "ctranslate2_value"
# An option that only sampling reads: refused without do_sample.
SAMPLING = "sampling"
# An option that counts output tokens: at most the model's positions (`generation.check_length_options`).
OUTPUT_TOKENS = "output_tokens"

SAVED = "Default: the model's saved generation config."
# generate()'s top_k where neither the option nor the model's generation config sets one (GenerationConfig's
# default); CTranslate2's own, 1, would be greedy.
GENERATE_TOP_K = 50


def _sampling_topk(do_sample: bool, generation: dict) -> int:
    """CTranslate2 samples when its `sampling_topk` is not 1: from the option's top k, else generate()'s."""
    return generation.get("top_k", GENERATE_TOP_K) if do_sample else 1


@dataclass(kw_only=True)
class DecodingArguments(Options):
    """How a saved model decodes: unset options are its saved generation config's (`generation_settings`).
    Keyword-only, so that a command's arguments extend it with options of their own that have no default."""

    num_beams: int | None = field(
        default=None,
        metadata={
            "help": f"Beams of the search (1: greedy). {SAVED}",
            "range": ">= 1",
            GENERATE: "num_beams",
            CTRANSLATE2: "beam_size",
        },
    )
    length_penalty: float | None = field(
        default=None,
        metadata={
            "help": "Beam search's length penalty: a hypothesis's log-probability is divided by its length "
            f"to this power, so above 0 favours longer outputs. {SAVED}",
            "range": "any",
            GENERATE: "length_penalty",
            CTRANSLATE2: "length_penalty",
        },
    )
    max_new_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Output tokens at most. Default: each source's length + 50 (§6.1); for a task whose "
            "outputs are many times longer than its inputs (series), the model's saved generation config's "
            "max_length.",
            "range": ">= 1",
            GENERATE: "max_new_tokens",
            CTRANSLATE2: "max_decoding_length",
            OUTPUT_TOKENS: True,
        },
    )
    min_new_tokens: int | None = field(
        default=None,
        metadata={
            "help": f"No end of the output before this many new tokens. {SAVED}",
            "range": ">= 1",
            GENERATE: "min_new_tokens",
            CTRANSLATE2: "min_decoding_length",
            OUTPUT_TOKENS: True,
        },
    )
    do_sample: bool = field(
        default=False,
        metadata={
            "help": "Sample each token instead of searching for the likeliest output.",
            GENERATE: "do_sample",
            CTRANSLATE2: "sampling_topk",
            CTRANSLATE2_VALUE: _sampling_topk,
        },
    )
    top_k: int | None = field(
        default=None,
        metadata={
            "help": f"With do_sample: sample from the k likeliest tokens only (0: from all). {SAVED}",
            "range": ">= 0",
            GENERATE: "top_k",
            CTRANSLATE2: "sampling_topk",
            SAMPLING: True,
        },
    )
    top_p: float | None = field(
        default=None,
        metadata={
            "help": "With do_sample: sample from the fewest likeliest tokens whose probabilities add up to p "
            f"(nucleus sampling). {SAVED}",
            "range": "(0, 1]",
            GENERATE: "top_p",
            CTRANSLATE2: "sampling_topp",
            SAMPLING: True,
        },
    )
    temperature: float | None = field(
        default=None,
        metadata={
            "help": "With do_sample: the temperature; below 1 sharpens the distribution, above 1 flattens "
            f"it. {SAVED}",
            "range": "> 0",
            GENERATE: "temperature",
            CTRANSLATE2: "sampling_temperature",
            SAMPLING: True,
        },
    )
    no_repeat_ngram_size: int | None = field(
        default=None,
        metadata={
            "help": f"No n-gram of this size twice in an output (0: no such rule). {SAVED}",
            "range": ">= 0",
            GENERATE: "no_repeat_ngram_size",
            CTRANSLATE2: "no_repeat_ngram_size",
        },
    )
    repetition_penalty: float | None = field(
        default=None,
        metadata={
            "help": f"Above 1 discourages tokens the output already holds, below 1 favours them. {SAVED}",
            "range": "> 0",
            GENERATE: "repetition_penalty",
            CTRANSLATE2: "repetition_penalty",
        },
    )
    seed: int = field(
        default=0,
        metadata={
            "help": "With do_sample: the seed. Each batch's is derived from it and the batch's place in the "
            "input, so that an output does not depend on the processes that share the work.",
            "range": ">= 0",
            GENERATE: None,
            CTRANSLATE2: None,
        },
    )

    def __post_init__(self):
        super().__post_init__()
        if not self.do_sample:
            for option in decoding_fields():
                if option.metadata.get(SAMPLING) and getattr(self, option.name) is not None:
                    raise UsageError(
                        f"--{option.name} applies to sampling: pass --do_sample true with it, or drop it."
                    )

    @property
    def sampling_seed(self) -> int | None:
        """The seed, when sampling; None otherwise (a search draws nothing)."""
        return self.seed if self.do_sample else None


def decoding_fields() -> tuple[dataclasses.Field, ...]:
    """The fields of `DecodingArguments`, in order: the decoding options."""
    return dataclasses.fields(DecodingArguments)


def length_options(decoding: DecodingArguments) -> dict[str, int | None]:
    """The options that ask for a number of output tokens, by name, with the values given."""
    return {
        option.name: getattr(decoding, option.name)
        for option in decoding_fields()
        if option.metadata.get(OUTPUT_TOKENS)
    }


__all__ = ["DecodingArguments"]
