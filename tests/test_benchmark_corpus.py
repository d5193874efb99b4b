"""The corpus-scale benchmark's parts (scripts/benchmarks/corpus_scale.py): the synthetic corpus and what a
stage's measurement catches. Its stages at real sizes take an hour and are not run here."""

import sys

import pyarrow.parquet as pq
import pytest

from benchmarks.corpus_scale import StageResult, disk_table, make_corpus, markdown_table, run_stage
from hf_vanilla_transformer.tasks.translation.data import load_translation_dataset

from .conftest import FIXTURE


def test_the_corpus_has_the_wmt14_schema_and_a_wmt14_length(tmp_path):
    make_corpus(FIXTURE, tmp_path / "corpus", 2000, seed=0)
    splits = load_translation_dataset(tmp_path / "corpus", languages=("en", "de"))
    assert {split: data.num_rows for split, data in splits.items()} == {
        "train": 2000,
        "validation": 3000,
        "test": 3003,
    }
    assert splits["train"].column_names == ["translation"]
    words = [len(pair["en"].split()) for pair in splits["train"]["translation"]]
    assert 20 < sum(words) / len(words) < 40  # WMT14's lines: about 25-30 words
    again = tmp_path / "again"
    make_corpus(FIXTURE, again, 2000, seed=0)
    read = [
        pq.read_table(next((folder / "data").glob("train-*.parquet")))
        for folder in (tmp_path / "corpus", again)
    ]
    assert read[0].equals(read[1])  # a seed makes the same corpus


def test_a_stage_is_timed_with_its_peak_anonymous_memory_and_its_first_step(tmp_path):
    marker = tmp_path / "loss_log.jsonl"
    # 300 MB of anonymous memory held a second, then the "first step" written, then a second more.
    program = (
        "import time, pathlib; block = bytearray(300 * 2**20); time.sleep(1.0); "
        f"pathlib.Path({str(marker)!r}).write_text('x'); time.sleep(1.0)"
    )
    result = run_stage("try", 10, [sys.executable, "-c", program], tmp_path / "try.log", marker)
    assert 300 <= result.peak_anon_mib < 400 and result.peak_rss_mib >= result.peak_anon_mib
    assert 0.9 < result.first_step_seconds < result.seconds
    with pytest.raises(RuntimeError, match="stage failing failed"):
        run_stage("failing", 10, [sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "f.log")


def test_the_tables_give_ratios_of_the_largest_size_to_the_smallest():
    results = [
        StageResult("prepare", 10, 2.0, 100, 50, None, "c", 7),
        StageResult("prepare", 100, 10.0, 300, 60, None, "c", 70),
    ]
    table = markdown_table(results)
    assert table.splitlines()[-1] == "| prepare | 2 |  | 100 | 50 | 10 |  | 300 | 60 | 5.0 | 1.20 |"
    assert disk_table(results).splitlines()[-1] == "| prepare | 7 | 70 |"
