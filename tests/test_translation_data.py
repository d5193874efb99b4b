"""Tests for hf_vanilla_transformer.tasks.translation.data: reading, loading, tokenizing and collating."""

import gzip
import json
import logging
from pathlib import Path

import datasets
import pytest
from datasets import DatasetDict, Translation

from hf_vanilla_transformer.tasks.translation import data as translation
from hf_vanilla_transformer.tasks.translation.data import (
    LABEL_PAD_TOKEN_ID,
    build_seq2seq_collator,
    iter_text_lines,
    load_parallel_text,
    load_translation_dataset,
    to_translation_schema,
    tokenize_translation,
    translation_languages,
)
from hf_vanilla_transformer.tokenization import EOS_TOKEN_ID, PAD_TOKEN_ID, train_bpe_tokenizer

FIXTURE = Path(__file__).parent / "fixtures" / "multi30k"
FIRST_PAIR = {
    "de": "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
    "en": "Two young, White males are outside near many bushes.",
}


@pytest.fixture(scope="module")
def multi30k():
    return load_parallel_text(FIXTURE, "de", "en")


def train_fixture_tokenizer():
    files = [FIXTURE / "train.de.gz", FIXTURE / "train.en.gz"]
    return train_bpe_tokenizer(files, vocab_size=400, model_max_length=64, show_progress=False)


@pytest.fixture(scope="module")
def tokenizer():
    return train_fixture_tokenizer()


def write_lines(path, lines, compress=False):
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    path.write_bytes(gzip.compress(data, mtime=0) if compress else data)


# ---------------------------------------------------------------------------- load_parallel_text


def test_multi30k_layout_loads_with_the_hub_schema(multi30k):
    assert {split: ds.num_rows for split, ds in multi30k.items()} == {
        "train": 300,
        "validation": 50,
        "test": 50,
    }
    train = multi30k["train"]
    assert train.column_names == ["translation"]
    assert train.features["translation"] == Translation(languages=["de", "en"])
    assert train[0]["translation"] == FIRST_PAIR
    # Alignment holds to the last line of each split.
    last_de = list(iter_text_lines(FIXTURE / "test_2016_flickr.de.gz"))[-1]
    last_en = list(iter_text_lines(FIXTURE / "test_2016_flickr.en.gz"))[-1]
    assert multi30k["test"][-1]["translation"] == {"de": last_de, "en": last_en}


def test_either_direction_and_split_overrides():
    reverse = load_parallel_text(
        FIXTURE, "en", "de", split_files={"train": "val", "test": "test_2016_flickr"}
    )
    assert list(reverse) == ["train", "test"]
    assert reverse["train"].num_rows == 50  # read from val.*.gz
    assert translation_languages(reverse["train"]) == ["en", "de"]
    assert reverse["test"][0]["translation"]["en"] == next(
        iter_text_lines(FIXTURE / "test_2016_flickr.en.gz")
    )


def test_missing_language_lists_the_languages_found():
    with pytest.raises(FileNotFoundError, match=r"No file for language 'xx' .*languages found: de, en\."):
        load_parallel_text(FIXTURE, "de", "xx")


def test_missing_split_lists_the_prefixes_found():
    with pytest.raises(
        FileNotFoundError, match=r"No 'dev\.\*' files .*prefixes found: test_2016_flickr, train, val"
    ):
        load_parallel_text(FIXTURE, "de", "en", split_files={"validation": "dev"})


def test_same_language_twice_is_rejected():
    with pytest.raises(ValueError, match="both 'de'"):
        load_parallel_text(FIXTURE, "de", "de")


def test_files_of_different_lengths_are_named_with_their_counts(tmp_path):
    write_lines(tmp_path / "train.de", ["Ein Hund.", "Eine Katze.", "Ein Pferd."])
    write_lines(tmp_path / "train.en.gz", ["A dog.", "A cat."], compress=True)
    with pytest.raises(ValueError) as info:
        load_parallel_text(tmp_path, "de", "en", split_files={"train": "train"})
    message = str(info.value)
    assert "train.de' has 3 lines" in message and "train.en.gz' has 2" in message


def test_empty_lines_are_dropped_in_pairs_and_reported(tmp_path, caplog):
    write_lines(tmp_path / "train.de", ["Ein Hund.", "", "Eine Katze.", "Ein Pferd.", "Eine Kuh."])
    write_lines(tmp_path / "train.en", ["A dog.", "A bird.", "A cat.", "   ", "A cow."])
    with caplog.at_level(logging.WARNING, logger=translation.__name__):
        dataset = load_parallel_text(tmp_path, "de", "en", split_files={"train": "train"})["train"]
    # Lines 2 and 4 go on both sides; what is left is still aligned.
    assert dataset["translation"] == [
        {"de": "Ein Hund.", "en": "A dog."},
        {"de": "Eine Katze.", "en": "A cat."},
        {"de": "Eine Kuh.", "en": "A cow."},
    ]
    assert "Dropped 2 pairs" in caplog.text and "(lines 2, 4)" in caplog.text


def test_non_utf8_file_is_named_with_its_line(tmp_path):
    write_lines(tmp_path / "train.en", ["A dog.", "Two men."])
    (tmp_path / "train.de").write_bytes("Ein Hund.\nZwei Männer.\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"train\.de' is not valid UTF-8: line 2"):
        load_parallel_text(tmp_path, "de", "en", split_files={"train": "train"})


# ---------------------------------------------------------------------------- load_translation_dataset


def test_load_from_a_save_to_disk_folder(multi30k, tmp_path):
    multi30k.save_to_disk(tmp_path / "saved")
    loaded = load_translation_dataset(tmp_path / "saved")
    assert isinstance(loaded, DatasetDict) and list(loaded) == ["train", "validation", "test"]
    assert loaded["validation"]["translation"] == multi30k["validation"]["translation"]


def test_load_from_a_parquet_folder(multi30k, tmp_path):
    # The Hub's layout: one folder per config, files named after their split.
    folder = tmp_path / "parquet" / "de-en"
    folder.mkdir(parents=True)
    for split, dataset in multi30k.items():
        dataset.to_parquet(folder / f"{split}-00000-of-00001.parquet")
    loaded = load_translation_dataset(tmp_path / "parquet", "de-en", cache_dir=str(tmp_path / "cache"))
    assert sorted(loaded) == ["test", "train", "validation"]
    assert loaded["train"].num_rows == 300
    assert loaded["train"][0]["translation"] == FIRST_PAIR
    assert translation_languages(loaded["train"]) == ["de", "en"]


def test_hub_names_go_to_load_dataset_and_bad_paths_do_not(multi30k, monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(
        datasets, "load_dataset", lambda *args, **kwargs: calls.append((args, kwargs)) or multi30k
    )
    assert load_translation_dataset("wmt14", "de-en", revision="main") == multi30k
    assert calls == [(("wmt14", "de-en"), {"revision": "main"})]  # no download: load_dataset is replaced
    with pytest.raises(FileNotFoundError, match="not a dataset folder"):
        load_translation_dataset(tmp_path / "does-not-exist")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="neither a `save_to_disk` dataset"):
        load_translation_dataset(empty)
    assert len(calls) == 1


# The Hub copy of Multi30k, bentrevett/multi30k, is a repository of three JSON Lines files, train.jsonl,
# val.jsonl and test.jsonl (plus README.md), each line {"en": ..., "de": ...}; `datasets` names the splits
# train / validation / test from the file names. Its Hub-converted parquet and a `save_to_disk` copy hold
# the same two columns.
HUB_FILES = {"train": "train.jsonl", "validation": "val.jsonl", "test": "test.jsonl"}


def write_hub_copy(multi30k, folder: Path, layout: str) -> Path:
    """The fixture in bentrevett/multi30k's schema (flat `en` and `de` text columns) laid out as `layout`."""
    flat = DatasetDict(
        {
            split: datasets.Dataset.from_dict(
                {lang: [pair[lang] for pair in dataset["translation"]] for lang in ("en", "de")}
            )
            for split, dataset in multi30k.items()
        }
    )
    folder.mkdir(parents=True)
    if layout == "jsonl":
        (folder / "README.md").write_text("---\nlanguage:\n- en\n- de\n---\n# Multi30k\n")
        for split, dataset in flat.items():
            with (folder / HUB_FILES[split]).open("w", encoding="utf-8") as f:
                for row in dataset:
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
    elif layout == "parquet":
        for split, dataset in flat.items():
            dataset.to_parquet(folder / f"{split}-00000-of-00001.parquet")
    else:
        flat.save_to_disk(folder)
    return folder


@pytest.mark.parametrize("layout", ["jsonl", "parquet", "save_to_disk"])
def test_flat_language_columns_of_the_hub_copy_become_the_translation_column(multi30k, tmp_path, layout):
    folder = write_hub_copy(multi30k, tmp_path / "bentrevett-multi30k", layout)
    loaded = load_translation_dataset(folder, languages=("de", "en"), cache_dir=str(tmp_path / "cache"))
    assert {split: ds.num_rows for split, ds in loaded.items()} == {
        "train": 300,
        "validation": 50,
        "test": 50,
    }
    for split, dataset in loaded.items():
        assert dataset.column_names == ["translation"]
        assert dataset.features["translation"] == Translation(languages=["de", "en"])
        assert dataset["translation"] == multi30k[split]["translation"]  # the raw files' pairs, in order
    assert loaded["train"][0]["translation"] == FIRST_PAIR


def test_a_folder_of_raw_text_files_loads_when_the_languages_are_given(multi30k):
    loaded = load_translation_dataset(FIXTURE, languages=("de", "en"))
    assert {split: ds["translation"] for split, ds in loaded.items()} == {
        split: ds["translation"] for split, ds in multi30k.items()
    }
    with pytest.raises(ValueError, match=r"neither a `save_to_disk` dataset .* pass `languages`"):
        load_translation_dataset(FIXTURE)
    with pytest.raises(ValueError, match=r"pair \(source, target\)"):
        load_translation_dataset(FIXTURE, languages=("de", "en", "fr"))
    with pytest.raises(ValueError, match=r"pair \(source, target\).*got 'de'"):
        load_translation_dataset(FIXTURE, languages="de")  # not read as ("d", "e")


def test_a_raw_text_folder_with_stray_json_and_csv_files_still_loads_as_text(multi30k, tmp_path):
    folder = tmp_path / "raw"
    folder.mkdir()
    for file in FIXTURE.iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    (folder / "metadata.json").write_text(json.dumps({"source": "Multi30k task 1"}))
    (folder / "image_ids.csv").write_text("split,image\ntrain,1000092795.jpg\n")
    loaded = load_translation_dataset(folder, languages=("de", "en"))
    assert {split: ds["translation"] for split, ds in loaded.items()} == {
        split: ds["translation"] for split, ds in multi30k.items()
    }


def test_other_columns_are_kept_and_a_hub_name_is_converted_too(monkeypatch):
    flat = datasets.Dataset.from_dict({"id": [7], "en": ["A dog."], "de": ["Ein Hund."]})
    monkeypatch.setattr(datasets, "load_dataset", lambda *args, **kwargs: DatasetDict(train=flat))
    loaded = load_translation_dataset("bentrevett/multi30k", languages=("de", "en"))["train"]
    assert loaded.column_names == ["id", "translation"]
    assert loaded[0] == {"id": 7, "translation": {"de": "Ein Hund.", "en": "A dog."}}


def test_a_dataset_with_neither_layout_names_the_columns_found_and_expected():
    pairs = DatasetDict(
        train=datasets.Dataset.from_dict({"source": ["Ein Hund."], "target": ["A dog."]}),
    )
    with pytest.raises(ValueError) as info:
        to_translation_schema(pairs, ("de", "en"), source="my/pairs")
    message = str(info.value)
    assert "Split 'train' of my/pairs has neither a 'translation' column" in message
    assert "one text column per language ('de', 'en')" in message
    assert message.endswith("Columns found: source, target.")

    # Flat columns for other languages, or not text, or no languages given: the same error, with its columns.
    flat = DatasetDict(train=datasets.Dataset.from_dict({"en": ["A dog."], "fr": ["Un chien."]}))
    with pytest.raises(ValueError, match=r"per language \('de', 'en'\).*Columns found: en, fr\."):
        to_translation_schema(flat, ("de", "en"))
    numbers = DatasetDict(train=datasets.Dataset.from_dict({"de": [1], "en": [2]}))
    with pytest.raises(ValueError, match=r"Columns found: de, en\. Not text: de, en\."):
        to_translation_schema(numbers, ("de", "en"))
    with pytest.raises(ValueError, match=r"with the languages passed \(e\.g\. `languages=\('de', 'en'\)`\)"):
        to_translation_schema(flat)


def test_a_translation_column_is_kept_and_checked_for_the_languages(multi30k):
    assert to_translation_schema(multi30k, ("en", "de"))["train"] is multi30k["train"]
    with pytest.raises(
        ValueError, match=r"Language 'fr' is not in split 'train' of wmt; languages found: de, en"
    ):
        to_translation_schema(multi30k, ("de", "fr"), source="wmt")


# ---------------------------------------------------------------------------- tokenize_translation


def test_tokenize_translation_drops_too_long_pairs_and_counts_them(multi30k, tokenizer):
    max_source_length, max_target_length = 20, 16
    tokenized, counts = tokenize_translation(
        multi30k, tokenizer, "de", "en", max_source_length, max_target_length
    )
    for split, dataset in multi30k.items():
        # Count independently which pairs fit, by tokenizing one at a time.
        sources = [pair["de"] for pair in dataset["translation"]]
        targets = [pair["en"] for pair in dataset["translation"]]
        fits = [
            len(tokenizer(s)["input_ids"]) <= max_source_length
            and len(tokenizer(t)["input_ids"]) <= max_target_length
            for s, t in zip(sources, targets, strict=True)
        ]
        assert counts[split] == {"kept": sum(fits), "dropped": len(fits) - sum(fits), "truncated": 0}
        assert tokenized[split].num_rows == sum(fits)
    assert counts["train"]["dropped"] > 0 and counts["train"]["kept"] > 0  # the limits bite on this data
    train = tokenized["train"]
    assert train.column_names == ["input_ids", "attention_mask", "labels"]
    assert max(map(len, train["input_ids"])) <= max_source_length
    assert max(map(len, train["labels"])) <= max_target_length
    assert all(labels[-1] == EOS_TOKEN_ID for labels in train["labels"])


def test_tokenize_translation_with_long_pairs_truncate_keeps_every_pair_cut_to_its_limits(
    multi30k, tokenizer
):
    """`long_pairs="truncate"`: every pair is kept; a side longer than its limit is cut to it, keeping the
    </s> the tokenizer appends; a side that fits is as it was; the truncated pairs are counted."""
    max_source_length, max_target_length = 20, 16
    tokenized, counts = tokenize_translation(
        multi30k, tokenizer, "de", "en", max_source_length, max_target_length, long_pairs="truncate"
    )

    def cut(ids, limit):
        return ids if len(ids) <= limit else [*ids[: limit - 1], EOS_TOKEN_ID]

    for split, dataset in multi30k.items():
        sources = [tokenizer(pair["de"])["input_ids"] for pair in dataset["translation"]]
        targets = [tokenizer(pair["en"])["input_ids"] for pair in dataset["translation"]]
        long = sum(
            len(s) > max_source_length or len(t) > max_target_length
            for s, t in zip(sources, targets, strict=True)
        )
        assert counts[split] == {"kept": dataset.num_rows, "dropped": 0, "truncated": long}
        rows = tokenized[split]
        assert rows.column_names == ["input_ids", "attention_mask", "labels"]
        assert rows["input_ids"] == [cut(ids, max_source_length) for ids in sources]
        assert rows["labels"] == [cut(ids, max_target_length) for ids in targets]
        assert [len(mask) for mask in rows["attention_mask"]] == [len(ids) for ids in rows["input_ids"]]
    assert counts["train"]["truncated"] > 0  # the limits bite on this data


def test_a_truncated_side_keeps_every_token_its_tokenizer_appends():
    """A tokenizer that puts <s> before a text and </s> after it (BART's template): a truncated side keeps
    both, and is its limit long."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    from hf_vanilla_transformer.data.preprocessing import appended_tokens, tokenize_pairs

    words = "a b c d e f g h".split()
    backend = Tokenizer(
        models.WordLevel({w: i for i, w in enumerate(["<pad>", "<s>", "</s>", "<unk>", *words])}, "<unk>")
    )
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)]
    )
    bart_like = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    assert appended_tokens(bart_like) == (1, 1)
    pairs = DatasetDict(
        {"train": datasets.Dataset.from_dict({"s": ["a b c d e f g h", "a b"], "t": ["h g f e", "a"]})}
    )
    tokenized, counts = tokenize_pairs(
        pairs, bart_like, ("s", None), ("t", None), 5, 4, long_pairs="truncate"
    )
    assert tokenized["train"]["input_ids"] == [[1, 4, 5, 6, 2], [1, 4, 5, 2]]
    assert tokenized["train"]["labels"] == [[1, 11, 10, 2], [1, 4, 2]]
    assert counts["train"] == {"kept": 2, "dropped": 0, "truncated": 1}


def test_tokenize_drops_texts_longer_than_the_tokenizer_allows_without_transformers_warning(
    caplog, monkeypatch
):
    # transformers warns, once per tokenizer, that such texts "will result in indexing errors"; here they are
    # dropped and counted, so the warning is filtered. A fresh tokenizer, so it has not warned yet;
    # transformers' loggers do not propagate by default, so let them reach caplog.
    monkeypatch.setattr(logging.getLogger("transformers"), "propagate", True)
    fresh = train_fixture_tokenizer()
    long_text = " ".join(["Zwei junge Männer"] * 40)
    pairs = [{"de": long_text, "en": "Two men."}, {"de": "Zwei Männer.", "en": "Two men."}]
    data = DatasetDict({"train": datasets.Dataset.from_dict({"translation": pairs})})
    with caplog.at_level(logging.WARNING):
        _, counts = tokenize_translation(data, fresh, "de", "en", 32, 32)
    assert counts["train"] == {"kept": 1, "dropped": 1, "truncated": 0}
    assert not any("longer than the specified maximum" in record.getMessage() for record in caplog.records)
    assert len(fresh(long_text)["input_ids"]) > fresh.model_max_length  # the case transformers warns about


@pytest.mark.parametrize("truncating", [False, True])
def test_tokenized_ids_are_those_of_a_tokenizer_call_whichever_way_it_is_called(
    multi30k, tokenizer, truncating
):
    # Our generic fast tokenizers are encoded by their Rust tokenizer directly; one with truncation saved in
    # its tokenizer.json goes through the full call. Either way the ids are what `tokenizer(...)` gives.
    if truncating:
        tokenizer = train_fixture_tokenizer()
        tokenizer.backend_tokenizer.enable_truncation(12)
    tokenized, _ = tokenize_translation(multi30k, tokenizer, "de", "en", 64, 64)
    pairs = multi30k["validation"]["translation"]
    expected = tokenizer([p["de"] for p in pairs], text_target=[p["en"] for p in pairs], truncation=False)
    kept = [max(len(s), len(t)) <= 64 for s, t in zip(expected["input_ids"], expected["labels"], strict=True)]
    assert 0 < sum(kept) < len(kept)
    for column in ("input_ids", "attention_mask", "labels"):
        wanted = [ids for ids, keep in zip(expected[column], kept, strict=True) if keep]
        assert list(tokenized["validation"][column]) == wanted, column


def test_tokenize_translation_in_the_other_direction(multi30k, tokenizer):
    tokenized, _ = tokenize_translation(multi30k, tokenizer, "en", "de", 64, 64)
    first = tokenized["train"][0]
    assert first["input_ids"] == tokenizer(FIRST_PAIR["en"])["input_ids"]
    assert tokenizer.decode(first["labels"], skip_special_tokens=True) == FIRST_PAIR["de"]


def test_tokenize_translation_reuses_its_cache(multi30k, tokenizer, tmp_path):
    # Datasets read from disk cache `map` results under a fingerprint of the function and its arguments;
    # a stable fingerprint means the second run reads the first run's files instead of re-tokenizing.
    multi30k.save_to_disk(tmp_path / "saved")
    runs = [
        tokenize_translation(load_translation_dataset(tmp_path / "saved"), tokenizer, "de", "en", 64, 64)[0]
        for _ in range(2)
    ]
    first, second = (run["train"].cache_files for run in runs)
    assert first and first == second


def test_tokenize_translation_rejects_bad_languages_and_lengths(multi30k, tokenizer):
    with pytest.raises(ValueError, match=r"Language 'fr' is not in split 'train'; languages found: de, en"):
        tokenize_translation(multi30k, tokenizer, "de", "fr", 64, 64)
    with pytest.raises(
        ValueError,
        match=r"--max_target_length 100 is more than 64, the tokenizer's model_max_length: give "
        r"--max_target_length 64 or less, or retrain the tokenizer with a larger model_max_length\.$",
    ):
        tokenize_translation(multi30k, tokenizer, "de", "en", 64, 100)
    with pytest.raises(
        ValueError, match=r"--max_source_length must be an integer >= 2 \(a token and </s>\), got 0"
    ):
        tokenize_translation(multi30k, tokenizer, "de", "en", 0, 64)
    with pytest.raises(ValueError, match=r"^--long_pairs must be one of drop, truncate, got 'cut'\.$"):
        tokenize_translation(multi30k, tokenizer, "de", "en", 64, 64, long_pairs="cut")


# ---------------------------------------------------------------------------- collator


def test_collator_pads_inputs_with_pad_id_and_labels_with_minus_100(tokenizer):
    features = [
        {"input_ids": [5, 6, 7, EOS_TOKEN_ID], "attention_mask": [1, 1, 1, 1], "labels": [8, EOS_TOKEN_ID]},
        {"input_ids": [9, EOS_TOKEN_ID], "attention_mask": [1, 1], "labels": [10, 11, 12, EOS_TOKEN_ID]},
    ]
    batch = build_seq2seq_collator(tokenizer)(features)
    assert batch["input_ids"].tolist() == [
        [5, 6, 7, EOS_TOKEN_ID],
        [9, EOS_TOKEN_ID, PAD_TOKEN_ID, PAD_TOKEN_ID],
    ]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert batch["labels"].tolist() == [
        [8, EOS_TOKEN_ID, LABEL_PAD_TOKEN_ID, LABEL_PAD_TOKEN_ID],
        [10, 11, 12, EOS_TOKEN_ID],
    ]
    assert LABEL_PAD_TOKEN_ID == -100


def test_fixture_is_small_and_self_contained():
    # Tests must not depend on ../shared: the fixture holds everything they read.
    sizes = {path.name: len(list(iter_text_lines(path))) for path in FIXTURE.glob("*.gz")}
    assert sizes == {
        f"{prefix}.{lang}.gz": n
        for prefix, n in (("train", 300), ("val", 50), ("test_2016_flickr", 50))
        for lang in ("de", "en")
    }
