"""Training from a stream (`--streaming`): token-budget batches from a bounded buffer, resumed exactly from
the position a checkpoint records, each process reading its own share."""

import json
from pathlib import Path

import pytest
import torch
from datasets import Dataset, load_from_disk
from datasets.distributed import split_dataset_by_node
from safetensors.torch import load_file

from hf_vanilla_transformer.training.streaming import StreamedTokenBudgetBatches

from .conftest import WORDS
from .script_runner import run_script_file
from .test_scale_out import accelerate_launch
from .test_train_scripts import RECIPE, ROOT

SIZE = 300


def _stream(num_shards=4):
    generator = torch.Generator().manual_seed(0)
    sources = torch.randint(2, 40, (SIZE,), generator=generator).tolist()
    targets = torch.randint(2, 40, (SIZE,), generator=generator).tolist()
    rows = {
        "id": list(range(SIZE)),
        "input_ids": [[5] * n for n in sources],
        "labels": [[6] * n for n in targets],
    }
    return Dataset.from_dict(rows).to_iterable_dataset(num_shards=num_shards)


def _batches(stream=None, **options):
    return StreamedTokenBudgetBatches(
        stream if stream is not None else _stream(), max_tokens=200, buffer_size=50, seed=0, **options
    )


def _take(batches, count):
    """The ids of the next `count` batches, and the state after each."""
    iterator, taken, states = iter(batches), [], []
    for _ in range(count):
        taken.append([example["id"] for example in next(iterator)])
        states.append(batches.state_dict())
    return taken, states


def test_streamed_batches_keep_to_the_budget_and_take_every_example_once_an_epoch():
    taken, states = _take(_batches(), 60)
    first_epoch = [batch for batch, state in zip(taken, states, strict=True) if state["epoch"] == 0]
    ids = sorted(i for batch in first_epoch for i in batch)
    assert ids == list(range(SIZE))
    assert any(state["epoch"] == 1 for state in states), "60 batches should reach the second epoch"
    rows = Dataset.from_dict({"id": list(range(SIZE))})  # lengths again, to check the budget
    lengths = {
        example["id"]: max(len(example["input_ids"]), len(example["labels"]))
        for example in _stream(num_shards=1)
    }
    assert rows.num_rows == SIZE
    for batch in taken:
        assert len(batch) * max(lengths[i] for i in batch) <= 200
    # The second epoch is not the first one again: buffers are cut anew with the epoch in the seed.
    second = [batch for batch, state in zip(taken, states, strict=True) if state["epoch"] == 1]
    assert second and second != first_epoch[: len(second)]


@pytest.mark.parametrize("stop", [1, 4, 9, 23, 31])
def test_streamed_batches_resume_from_their_state_as_if_never_stopped(stop):
    reference, _ = _take(_batches(), 40)
    head, states = _take(_batches(), stop)
    resumed = _batches()
    resumed.load_state_dict(json.loads(json.dumps(states[-1])))  # as a checkpoint keeps it
    tail, _ = _take(resumed, 40 - stop)
    assert head + tail == reference


def test_each_process_streams_its_own_share():
    shares = [_batches(split_dataset_by_node(_stream(), rank=rank, world_size=2)) for rank in (0, 1)]
    seen = []
    for share in shares:
        taken, states = _take(share, 40)
        assert states[-1]["epoch"] == 1
        seen.append(
            {i for batch, state in zip(taken, states, strict=True) if state["epoch"] == 0 for i in batch}
        )
    assert not seen[0] & seen[1]
    assert seen[0] | seen[1] == set(range(SIZE))


@pytest.fixture(scope="module")
def parquet_corpus(translation_data, tmp_path_factory):
    """The fixture corpus as a Hub dataset repository keeps it: parquet files named by split, the training
    split in 4 files."""
    folder = tmp_path_factory.mktemp("stream") / "corpus"
    (folder / "data").mkdir(parents=True)
    splits = load_from_disk(str(translation_data / "data"))
    for index in range(4):
        part = splits["train"].shard(num_shards=4, index=index)
        part.to_parquet(folder / "data" / f"train-{index:05d}-of-00004.parquet")
    for split in ("validation", "test"):
        splits[split].to_parquet(folder / "data" / f"{split}-00000-of-00001.parquet")
    return folder


def _streamed(translation_data, corpus, out, *options):
    """scripts/train.py on the Multi30k recipe shrunk to the fixture, streaming the parquet files with a
    buffer of 16 pairs, dropout on, a checkpoint every 3 steps."""
    return [str(ROOT / "scripts" / "train.py"), str(RECIPE), "--dataset", str(corpus), "--tokenizer",
            str(translation_data / "tokenizer"), "--preset", "transformer-tiny", "--max_source_length", "96",
            "--max_target_length", "96", "--streaming", "true", "--stream_buffer", "16", "--max_tokens",
            "300",
            "--warmup_steps", "4", "--logging_steps", "1", "--save_steps", "3", "--eval_strategy", "no",
            "--load_best_model_at_end", "false", "--use_cpu", "true", "--dataloader_num_workers", "0",
            "--output_dir", str(out), *options]  # fmt: skip


def _losses(run: Path) -> list[tuple[int, float]]:
    records = map(json.loads, (run / "loss_log.jsonl").read_text().splitlines())
    return [(record["step"], record["loss"]) for record in records if "loss" in record]


def _assert_same_weights(run: Path, reference: Path) -> None:
    ours, theirs = (load_file(folder / "final" / "model.safetensors") for folder in (run, reference))
    assert ours.keys() == theirs.keys()
    for name, tensor in theirs.items():
        torch.testing.assert_close(ours[name], tensor, atol=1e-6, rtol=1e-5, msg=name)


def _train(*args, cwd):
    result = run_script_file(*args, cwd=cwd, env={"OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def test_a_streamed_run_resumed_ends_as_the_uninterrupted_run(translation_data, parquet_corpus, tmp_path):
    reference, resumed = tmp_path / "reference", tmp_path / "resumed"
    _train(*_streamed(translation_data, parquet_corpus, reference, "--max_steps", "12"), cwd=tmp_path)
    _train(*_streamed(translation_data, parquet_corpus, resumed, "--max_steps", "6"), cwd=tmp_path)
    state = json.loads((resumed / "checkpoint-6" / "stream_state-0.json").read_text())
    assert state["world_size"] == 1 and state["buffer"] >= 1  # 6 steps went past the first buffer
    again = _streamed(translation_data, parquet_corpus, resumed, "--max_steps", "12")
    _train(*again, "--resume_from_checkpoint", "true", cwd=tmp_path)
    assert _losses(resumed) == _losses(reference)
    _assert_same_weights(resumed, reference)


def test_a_streamed_run_on_two_processes_resumes_exactly_and_only_with_two(
    translation_data, parquet_corpus, tmp_path
):
    reference, resumed = tmp_path / "reference", tmp_path / "resumed"
    accelerate_launch(
        "multi_gpu", *_streamed(translation_data, parquet_corpus, reference, "--max_steps", "8")
    )
    accelerate_launch("multi_gpu", *_streamed(translation_data, parquet_corpus, resumed, "--max_steps", "3"))
    states = [json.loads((resumed / "checkpoint-3" / f"stream_state-{r}.json").read_text()) for r in (0, 1)]
    assert [state["world_size"] for state in states] == [2, 2]
    accelerate_launch(
        "multi_gpu",
        *_streamed(
            translation_data, parquet_corpus, resumed, "--max_steps", "8", "--resume_from_checkpoint", "true"
        ),
    )
    assert _losses(resumed) == _losses(reference)
    _assert_same_weights(resumed, reference)
    alone = run_script_file(
        *_streamed(translation_data, parquet_corpus, resumed, "--max_steps", "9", "--resume_from_checkpoint",
                   str(resumed / "checkpoint-6")), cwd=tmp_path,
    )  # fmt: skip
    assert alone.returncode == 2
    # Each process reads its own share of the stream: the checkpoint's record refuses another number of them.
    assert (
        f"--num_processes was 2 in {resumed / 'checkpoint-6'}, now 1: a resume with it changed is not exact"
        in alone.stderr
    )


def test_streaming_without_a_step_count_is_refused_before_reading(translation_data, parquet_corpus, tmp_path):
    result = run_script_file(
        *_streamed(translation_data, parquet_corpus, tmp_path / "run", "--max_steps", "-1"), cwd=tmp_path
    )
    assert result.returncode == 2
    assert "A stream has no length to count epochs in: set --max_steps for --streaming." in result.stderr
    assert "Tokenizing" not in result.stderr


def test_a_streamed_pair_too_long_is_dropped_as_it_comes(word_tokenizer):
    from hf_vanilla_transformer.data.preprocessing import tokenize_stream

    words = WORDS[4:9]
    pairs = [{"de": " ".join(words[:n]), "en": " ".join(words[: 6 - n])} for n in (1, 5, 2)]
    pairs[1]["de"] = " ".join(words * 3)  # 16 tokens with </s>, over the limit of 8
    rows = Dataset.from_dict({"translation": pairs, "note": ["a", "b", "c"]}).to_iterable_dataset()
    stream = tokenize_stream(rows, word_tokenizer, ("translation", "de"), ("translation", "en"), 8, 8)
    examples = list(stream)
    assert [len(example["input_ids"]) for example in examples] == [2, 3]
    assert sorted(examples[0]) == ["attention_mask", "input_ids", "labels"]


@pytest.fixture(scope="module")
def json_lines_corpus(translation_data, tmp_path_factory):
    """The fixture corpus in bentrevett/multi30k's layout: JSON Lines files named by split, one column per
    language (`{"en": ..., "de": ...}`), no `translation` column."""
    folder = tmp_path_factory.mktemp("stream") / "json-lines"
    folder.mkdir()
    splits = load_from_disk(str(translation_data / "data"))
    for split, name in (("train", "train"), ("validation", "val"), ("test", "test")):
        rows = [{"en": pair["en"], "de": pair["de"]} for pair in splits[split]["translation"]]
        (folder / f"{name}.jsonl").write_text(
            "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8"
        )
    return folder


def test_a_json_lines_folder_of_one_column_per_language_streams_as_it_loads_whole(
    translation_data, json_lines_corpus
):
    """Streamed, the columns `de` and `en` are packed into `translation` as they are read: the stream's
    pairs are tokenized as the same folder read whole is, pair for pair."""
    from transformers import AutoTokenizer

    from hf_vanilla_transformer.tasks.data import DataArguments, prepare_dataset

    tokenizer = AutoTokenizer.from_pretrained(translation_data / "tokenizer")
    common = {"task": "translation", "dataset": str(json_lines_corpus), "tokenizer": "t"}
    common |= {"max_source_length": 96, "max_target_length": 96}
    whole = prepare_dataset(DataArguments(**common), tokenizer)
    streamed = prepare_dataset(DataArguments(**common, streaming=True), tokenizer)
    examples = list(streamed["train"])
    assert [example["input_ids"] for example in examples] == whole["train"]["input_ids"]
    assert [example["labels"] for example in examples] == whole["train"]["labels"]
    assert streamed["validation"]["input_ids"] == whole["validation"]["input_ids"]


def test_a_json_lines_folder_of_one_column_per_language_trains_streamed(
    translation_data, json_lines_corpus, tmp_path
):
    run = tmp_path / "run"
    _train(*_streamed(translation_data, json_lines_corpus, run, "--max_steps", "2"), cwd=tmp_path)
    assert [step for step, _ in _losses(run)] == [1, 2]


def _cut_parquet(folder: Path) -> Path:
    broken = folder / "data" / "train-00002-of-00004.parquet"
    broken.write_bytes(broken.read_bytes()[:500])
    return broken


def _cut_json_line(folder: Path) -> Path:
    broken = folder / "train.jsonl"
    lines = broken.read_bytes().split(b"\n")
    lines[100] = lines[100][:30]  # a line cut in half, in the middle of the file
    broken.write_bytes(b"\n".join(lines))
    return broken


@pytest.mark.parametrize(
    "corpus, damage, says",
    [
        ("parquet_corpus", _cut_parquet, "it does not read as parquet"),
        ("json_lines_corpus", _cut_json_line, "line 101 does not parse as JSON"),
    ],
    ids=["parquet cut short", "JSON Lines line cut in half"],
)
def test_a_streamed_data_file_that_does_not_read_ends_in_one_line_naming_it(
    translation_data, request, tmp_path, corpus, damage, says
):
    import shutil

    folder = Path(shutil.copytree(request.getfixturevalue(corpus), tmp_path / "corpus"))
    broken = damage(folder)
    result = run_script_file(
        *_streamed(translation_data, folder, tmp_path / "run", "--max_steps", "2"), cwd=tmp_path
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {broken} is truncated or corrupt: {says}")
    assert errors[0].endswith("Download or make it again.")
