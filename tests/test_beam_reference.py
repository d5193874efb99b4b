"""Beam search decodes the same tokens as before it was made faster: the shipped Multi30k model at its saved
settings and the benchmark's S shape, against the outputs `tests/beam_reference.py` wrote then."""

import json

from tests.beam_reference import FIXTURE, benchmark_outputs, multi30k_outputs


def reference(name: str) -> list[list[int]]:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))[name]


def test_the_shipped_multi30k_model_decodes_its_reference_tokens():
    expected = reference("multi30k")
    assert len(expected) == 50
    assert multi30k_outputs() == expected


def test_the_benchmark_shape_decodes_its_reference_tokens():
    expected = reference("benchmark_S")
    assert len(expected) == 32 and all(len(row) == 31 for row in expected)  # start token + 30 new
    assert benchmark_outputs() == expected
