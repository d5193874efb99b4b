"""Beam search's reference outputs, token by token, against which every change to decoding speed is held
(tests/test_beam_reference.py):

- the shipped Multi30k model at its saved decoding settings (beam 6, its length penalty, early stopping), on
  the 50 Multi30k test sentences of tests/fixtures/multi30k in batches of 32, padded, each output at most its
  source's length + 50 tokens, as translate.py decodes;
- the benchmark's S shape (random weights, seed 0) at beam 4, batch 32, exactly 30 new tokens, as
  scripts/benchmarks/benchmark.py decodes it.

Written once, before decoding was made faster, by `python -m tests.beam_reference` (from the project's root),
into tests/fixtures/beam_reference.json; write it again only for a change meant to alter outputs.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "beam_reference.json"
MULTI30K_MODEL = ROOT / "model_cards" / "vanilla-transformer-multi30k-de-en"
MULTI30K_TEST = ROOT / "tests" / "fixtures" / "multi30k" / "test_2016_flickr.de.gz"
SENTENCES, BATCH = 50, 32  # all 50 of the test fixture: a batch of 32 and one of 18
EXTRA_TOKENS = 50  # translate.py's bound: source length + 50 (§6.1)


def multi30k_outputs() -> list[list[int]]:
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import hf_vanilla_transformer  # noqa: F401  (registers the model with the Auto classes)

    model = AutoModelForSeq2SeqLM.from_pretrained(MULTI30K_MODEL).eval()
    tokenizer = AutoTokenizer.from_pretrained(MULTI30K_MODEL)
    with gzip.open(MULTI30K_TEST, "rt", encoding="utf-8") as file:
        sources = [next(file).rstrip("\n") for _ in range(SENTENCES)]
    outputs = []
    for start in range(0, SENTENCES, BATCH):
        batch = tokenizer(sources[start : start + BATCH], padding=True, return_tensors="pt")
        with torch.inference_mode():
            ids = model.generate(**batch, max_new_tokens=batch["input_ids"].shape[1] + EXTRA_TOKENS)
        outputs += ids.tolist()
    return outputs


def benchmark_outputs() -> list[list[int]]:
    from benchmarks.harness import SHAPES, SOURCE_LENGTH, build_models, generation_inputs

    shape = SHAPES["S"]
    model = build_models(shape)["ours"].eval()
    with torch.inference_mode():
        ids = model.generate(
            input_ids=generation_inputs(32, SOURCE_LENGTH, shape.vocab_size),
            num_beams=4,
            do_sample=False,
            max_new_tokens=30,
            min_new_tokens=30,
            length_penalty=1.0,
            early_stopping=False,
        )
    return ids.tolist()


def reference_outputs() -> dict[str, list[list[int]]]:
    return {"multi30k": multi30k_outputs(), "benchmark_S": benchmark_outputs()}


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))  # the `benchmarks` package, as pytest's pythonpath has it
    FIXTURE.write_text(json.dumps(reference_outputs()) + "\n", encoding="utf-8")
    print(f"Wrote {FIXTURE}")
