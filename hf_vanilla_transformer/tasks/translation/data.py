"""Parallel corpora for translation: read, load, tokenize and batch.

The layout everything converges on is the Hugging Face Hub's: a `datasets.DatasetDict` with `train`,
`validation` and `test` splits and one `translation` column holding `{language: sentence}` dicts,
e.g. `{"de": "Ein Hund rennt.", "en": "A dog runs."}` (the schema of `wmt14`, `iwslt2017`, ...).
Datasets with one text column per language instead (`de`, `en`: the schema of `bentrevett/multi30k`) are
turned into it on loading.

- `load_parallel_text` builds it from line-aligned plain-text files (Multi30k's raw layout works as is);
- `load_translation_dataset` loads it from the Hub, a `save_to_disk` folder, a folder of data files
  (parquet, JSON Lines, CSV) or a folder of line-aligned text files;
- `to_translation_schema` turns flat language columns into the `translation` column;
- `tokenize_translation` turns it into `input_ids`/`labels`, dropping (never truncating) too-long pairs;
- `build_seq2seq_collator` (from `preprocessing`) pads batches for a seq2seq model.
"""

from __future__ import annotations

import logging
import os
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import datasets
from datasets import Dataset, DatasetDict, Features, IterableDataset, Translation
from transformers import PreTrainedTokenizerBase

from ...caches import check_datasets_cache
from ...data.files import DATA_FILE_SUFFIXES, data_files_in, load_data_folder, load_saved_dataset
from ...data.preprocessing import LABEL_PAD_TOKEN_ID, build_seq2seq_collator, tokenize_pairs
from ...errors import MissingPathError, OfflineError, UsageError
from ...readers import is_local_path, iter_text_lines, nearest_sibling

logger = logging.getLogger(__name__)

# Multi30k's raw files are `{prefix}.{lang}.gz`; the Hub names the splits train/validation/test.
MULTI30K_SPLIT_FILES: dict[str, str] = {"train": "train", "validation": "val", "test": "test_2016_flickr"}

_TEXT_DTYPES = ("string", "large_string")

# How many offending line numbers an error or warning quotes before it says "...".
_MAX_LINES_QUOTED = 10


def _quote_line_numbers(numbers: list[int]) -> str:
    quoted = ", ".join(str(n) for n in numbers[:_MAX_LINES_QUOTED])
    return quoted + (", ..." if len(numbers) > _MAX_LINES_QUOTED else "")


def _text_file(data_dir: Path, prefix: str, lang: str) -> Path | None:
    """The file `{prefix}.{lang}` or `{prefix}.{lang}.gz` in `data_dir`, if there is one."""
    for name in (f"{prefix}.{lang}", f"{prefix}.{lang}.gz"):
        if (data_dir / name).is_file():
            return data_dir / name
    return None


def _find_file(data_dir: Path, prefix: str, lang: str) -> Path:
    """The file `{prefix}.{lang}` or `{prefix}.{lang}.gz` in `data_dir`, or an error listing what exists."""
    if (found := _text_file(data_dir, prefix, lang)) is not None:
        return found
    # Name what *is* there, so that a typo in a language code or a split prefix is obvious.
    pattern = re.compile(r"^(?P<prefix>.+?)\.(?P<lang>[A-Za-z_-]+)(?:\.gz)?$")
    languages_by_prefix = defaultdict(set)
    for path in data_dir.iterdir():
        if path.is_file() and (match := pattern.match(path.name)):
            languages_by_prefix[match["prefix"]].add(match["lang"])
    if prefix in languages_by_prefix:
        raise MissingPathError(
            f"No file for language '{lang}' in {data_dir} (looked for {prefix}.{lang} and "
            f"{prefix}.{lang}.gz); languages found: {', '.join(sorted(languages_by_prefix[prefix]))}."
        )
    # Parallel files come in pairs: a lone "README.md" is not a split.
    prefixes = sorted(p for p, languages in languages_by_prefix.items() if len(languages) > 1)
    raise MissingPathError(
        f"No '{prefix}.*' files in {data_dir}; file prefixes found: {', '.join(prefixes) or 'none'}. "
        "Map each split to its prefix with `split_files`, e.g. {'train': 'train', 'validation': 'val'}."
    )


def _read_parallel_split(
    src_path: Path, tgt_path: Path, src_lang: str, tgt_lang: str
) -> list[dict[str, str]]:
    """Read two line-aligned files into `{src_lang: ..., tgt_lang: ...}` pairs, dropping empty pairs."""
    sources = list(iter_text_lines(src_path))
    targets = list(iter_text_lines(tgt_path))
    if len(sources) != len(targets):
        raise UsageError(
            f"Parallel files differ in length: '{src_path}' has {len(sources)} lines but '{tgt_path}' has "
            f"{len(targets)}. Line N of one must translate line N of the other; re-align or re-export them."
        )
    if not sources:
        raise UsageError(
            f"'{src_path}' and '{tgt_path}' are empty: a split is pairs of lines. Download or make them "
            "again, or leave the split out (`split_files`)."
        )
    pairs, empty_lines = [], []
    for line_number, (source, target) in enumerate(zip(sources, targets, strict=True), start=1):
        source, target = source.strip(), target.strip()
        # A pair with one side empty teaches nothing; drop both sides so the corpus stays aligned.
        if not source or not target:
            empty_lines.append(line_number)
            continue
        pairs.append({src_lang: source, tgt_lang: target})
    if empty_lines:
        logger.warning(
            "Dropped %d pairs with an empty line in '%s' or '%s' (lines %s).",
            len(empty_lines),
            src_path,
            tgt_path,
            _quote_line_numbers(empty_lines),
        )
    return pairs


def load_parallel_text(
    data_dir: str | os.PathLike,
    src_lang: str,
    tgt_lang: str,
    split_files: Mapping[str, str] | None = None,
) -> DatasetDict:
    """Read line-aligned plain-text files into a `DatasetDict` with the Hub's `translation` schema.

    Each split is the pair of files `{prefix}.{src_lang}[.gz]` and `{prefix}.{tgt_lang}[.gz]` in `data_dir`,
    where line N of one translates line N of the other. Lines are stripped of surrounding whitespace, and
    pairs where either side is empty are dropped together (with a warning naming the lines).

    Args:
        data_dir: folder holding the files, e.g. Multi30k's `data/task1/raw`.
        src_lang, tgt_lang: language codes as they appear in the file names (`de`, `en`, ...). Both languages
            end up in the `translation` column; the direction only matters when tokenizing.
        split_files: split name -> file prefix. Defaults to Multi30k's layout, `MULTI30K_SPLIT_FILES`
            (`train`, `val` -> validation, `test_2016_flickr` -> test). Pass e.g.
            `{**MULTI30K_SPLIT_FILES, "test": "test_2017_flickr"}` to pick another test set.

    Returns:
        A `DatasetDict` whose splits each have a `translation` column typed `datasets.Translation`.
    """
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise MissingPathError(
            f"Data folder '{data_dir}' does not exist; pass the folder holding the text files."
        )
    if src_lang == tgt_lang:
        raise UsageError(f"Source and target language are both '{src_lang}'; pass two different languages.")
    split_files = dict(MULTI30K_SPLIT_FILES if split_files is None else split_files)
    # Hub order: (source, target), like wmt14's Translation(languages=["de", "en"]) for de-en.
    features = Features({"translation": Translation(languages=[src_lang, tgt_lang])})
    splits = {}
    for split, prefix in split_files.items():
        src_path = _find_file(data_dir, prefix, src_lang)
        tgt_path = _find_file(data_dir, prefix, tgt_lang)
        pairs = _read_parallel_split(src_path, tgt_path, src_lang, tgt_lang)
        splits[split] = Dataset.from_dict({"translation": pairs}, features=features)
    return DatasetDict(splits)


def load_translation_dataset(
    name_or_path: str | os.PathLike,
    config_name: str | None = None,
    languages: Sequence[str] | None = None,
    **load_kwargs: Any,
) -> DatasetDict:
    """Load a translation `DatasetDict` in the `translation` schema from the Hub or a local folder.

    - a folder written by `DatasetDict.save_to_disk` -> `datasets.load_from_disk`
      (`files.load_saved_dataset`);
    - a folder of data files (parquet, JSON Lines, CSV), such as a download of a Hub dataset repository ->
      `datasets.load_dataset(folder)` (`files.load_data_folder`), which infers each file's split from its
      name as the Hub does (`train-00000-of-00001.parquet`, `val.jsonl`, ...). With `config_name`, the
      subfolder of that name is used when it exists (the Hub keeps each config in its own folder);
    - a folder of line-aligned text files in Multi30k's layout (`train.de.gz`, ...) -> `load_parallel_text`,
      when `languages` are given (checked before data files, so other files beside the text do not matter);
    - anything else is a Hub dataset: `datasets.load_dataset(name_or_path, config_name)`, e.g.
      `load_translation_dataset("wmt/wmt14", "de-en")`. That needs a network connection.

    Args:
        name_or_path: Hub dataset id or local folder.
        config_name: Hub config (e.g. `de-en`), or the subfolder of a local folder holding that config.
        languages: `(source, target)` language codes, e.g. `("de", "en")`. Needed for datasets with one
            text column per language (e.g. `bentrevett/multi30k`: `en`, `de`), which `to_translation_schema`
            packs into the `translation` column, and for folders of text files; datasets that have a
            `translation` column already are checked to hold both languages in every split.
        load_kwargs: go to `datasets.load_dataset` (e.g. `cache_dir`, `revision`, `streaming`).

    A local file that is cut short or does not read (a text file, a data file, an Arrow file of a saved
    folder, its JSON) is refused in one line naming it (`readers`, `files`).
    """
    if languages is not None and (isinstance(languages, str) or len(languages) != 2):
        raise UsageError(f"`languages` is the pair (source, target), e.g. ('de', 'en'); got {languages!r}.")
    path = Path(name_or_path)
    if path.is_file():
        raise UsageError(
            f"'{path}' is a file, not a dataset folder: pass the folder that holds it (a folder of parquet, "
            "JSON Lines or CSV files, of line-aligned text files, or a `save_to_disk` folder)."
        )
    if path.is_dir():
        loaded = _load_local_folder(path, config_name, languages, **load_kwargs)
    else:
        name = str(name_or_path)
        if is_local_path(name):  # fail here rather than with a confusing error from the Hub
            sibling = nearest_sibling(name)
            hint = (
                f"Did you mean {sibling}?"
                if sibling is not None
                else "Pass a folder written by `save_to_disk`, a folder of parquet or JSON Lines files, a "
                "folder of line-aligned text files, or a Hub dataset id such as 'wmt14' or "
                "'bentrevett/multi30k'."
            )
            raise MissingPathError(f"'{name}' is not a dataset folder. {hint}")
        check_datasets_cache()
        try:
            loaded = datasets.load_dataset(name, config_name, **load_kwargs)
        except ConnectionError as error:  # offline or unreachable, and not in the datasets cache
            raise OfflineError(
                f"Cannot load the Hub dataset {name!r} ({error}): connect (and unset HF_HUB_OFFLINE), or "
                "pass a local dataset folder."
            ) from None
    return to_translation_schema(loaded, languages, source=str(name_or_path))


def _load_local_folder(
    path: Path, config_name: str | None, languages: Sequence[str] | None, **load_kwargs: Any
) -> DatasetDict:
    """The `DatasetDict` in a local folder, as laid out by `save_to_disk`, the Hub or Multi30k."""
    if (path / "dataset_dict.json").is_file() or (path / "state.json").is_file():
        loaded = load_saved_dataset(path)
        if not isinstance(loaded, DatasetDict):
            raise UsageError(
                f"'{path}' holds a single Dataset, not a DatasetDict. Save the splits together: "
                "`DatasetDict(train=..., validation=..., test=...).save_to_disk(path)`."
            )
        return loaded
    if config_name is not None and (path / config_name).is_dir():
        path = path / config_name
    # Raw text first: a folder of text files may also hold other files (notes as .json, image lists as
    # .csv) that would otherwise send it to `datasets.load_dataset`, which cannot read the text files.
    if languages is not None and _has_parallel_text(path, languages):
        src_lang, tgt_lang = languages
        return load_parallel_text(path, src_lang, tgt_lang)
    if data_files_in(path):
        return load_data_folder(path, **load_kwargs)
    if languages is not None:  # no training pair either: its error lists the file prefixes found
        src_lang, tgt_lang = languages
        return load_parallel_text(path, src_lang, tgt_lang)
    raise UsageError(
        f"'{path}' is a folder but holds neither a `save_to_disk` dataset (dataset_dict.json) nor data files "
        f"({', '.join(DATA_FILE_SUFFIXES)}). For line-aligned text files pass `languages` or use "
        "`load_parallel_text`."
    )


def _has_parallel_text(path: Path, languages: Sequence[str]) -> bool:
    """Whether `path` holds the training pair of line-aligned text files, `train.{lang}[.gz]` per language."""
    return all(_text_file(path, MULTI30K_SPLIT_FILES["train"], lang) is not None for lang in languages)


def _first_example(dataset: IterableDataset) -> dict:
    """A stream's first example, for a stream whose features `datasets` does not know before reading."""
    return next(iter(dataset.take(1)), {})


def _is_text_column(dataset: Dataset | IterableDataset, column: str) -> bool:
    if dataset.features is None:  # a stream of unknown features: its first example says
        return isinstance(_first_example(dataset).get(column), str)
    return column in dataset.column_names and getattr(dataset.features[column], "dtype", None) in _TEXT_DTYPES


def _column_names(dataset: Dataset | IterableDataset) -> list[str]:
    if dataset.column_names is None:  # a stream of unknown features
        return list(_first_example(dataset))
    return dataset.column_names


def _pack_translation(batch: dict[str, list], languages: list[str]) -> dict[str, list[dict[str, str]]]:
    columns = [batch[lang] for lang in languages]
    return {"translation": [dict(zip(languages, texts, strict=True)) for texts in zip(*columns, strict=True)]}


def to_translation_schema(
    dataset_dict: DatasetDict, languages: Sequence[str] | None = None, source: str = "the dataset"
) -> DatasetDict:
    """Return `dataset_dict` with a `translation` column of `{language: sentence}` dicts in every split.

    A split that has one already is kept as it is (after checking it holds `languages`, when given). A split
    with one text column per language (`de`, `en`, as in `bentrevett/multi30k`) gets those columns packed
    into a `translation` column typed `datasets.Translation(languages)`; other columns are kept. Anything
    else raises a `ValueError` naming the columns found and those expected. `source` names the dataset in
    errors. Streamed splits (`IterableDataset`, `load_dataset(..., streaming=True)`) are packed as they are
    read, and the result is of `dataset_dict`'s own type (`IterableDatasetDict` for a stream).
    """
    if languages is not None:
        if isinstance(languages, str):  # a string is a sequence too: "de" would read as ("d", "e")
            raise UsageError(
                f"Pass the languages as a sequence, e.g. ('de', 'en'), not the string {languages!r}."
            )
        languages = list(languages)
        if len(set(languages)) != len(languages) or len(languages) < 2:
            raise UsageError(f"Pass two or more different languages, got {languages}.")
    converted = {}
    for split, dataset in dataset_dict.items():
        columns = _column_names(dataset)
        if "translation" in columns:
            found = translation_languages(dataset)
            for lang in languages or ():
                if lang not in found:
                    raise UsageError(
                        f"Language '{lang}' is not in split '{split}' of {source}; languages found: "
                        f"{', '.join(found)}."
                    )
            converted[split] = dataset
        elif languages is not None and all(_is_text_column(dataset, lang) for lang in languages):
            features = None
            if dataset.features is not None:  # else a stream's: they stay unknown until it is read
                features = Features({k: v for k, v in dataset.features.items() if k not in languages})
                features["translation"] = Translation(languages=languages)
            progress = {}
            if not isinstance(dataset, IterableDataset):  # a stream is packed as it is read: no progress bar
                progress["desc"] = f"Packing columns {', '.join(languages)} into 'translation' ({split})"
            converted[split] = dataset.map(
                _pack_translation,
                fn_kwargs={"languages": languages},
                batched=True,
                remove_columns=languages,
                features=features,
                **progress,
            )
        else:
            expected = (
                f"one text column per language ({', '.join(repr(lang) for lang in languages)})"
                if languages is not None
                else "one text column per language, with the languages passed (e.g. `languages=('de', 'en')`)"
            )
            not_text = [c for c in languages or () if c in columns and not _is_text_column(dataset, c)]
            raise UsageError(
                f"Split '{split}' of {source} has neither a 'translation' column of {{language: sentence}} "
                f"dicts (as in wmt14) nor {expected} (as in bentrevett/multi30k). Columns found: "
                f"{', '.join(columns) or 'none'}."
                + (f" Not text: {', '.join(not_text)}." if not_text else "")
            )
    # A DatasetDict stays one, and so does a stream's IterableDatasetDict.
    return (type(dataset_dict) if isinstance(dataset_dict, dict) else DatasetDict)(converted)


def translation_languages(dataset: Dataset | IterableDataset) -> list[str]:
    """The language codes in a dataset's `translation` column (`["de", "en"]`), or a `ValueError`."""
    if dataset.features is None:  # a stream of unknown features: its first example says
        pair = _first_example(dataset).get("translation")
        if isinstance(pair, dict):
            return list(pair)
    feature = (dataset.features or {}).get("translation")
    if feature is None:
        raise UsageError(
            f"The dataset has no 'translation' column (columns: {', '.join(_column_names(dataset))}). "
            "Expected the Hub schema: a 'translation' column of {language: sentence} dicts."
        )
    if isinstance(feature, Translation):
        return list(feature.languages)
    if isinstance(feature, dict):  # e.g. parquet written without Hugging Face metadata: a struct of strings
        return list(feature)
    raise UsageError(f"The 'translation' column has type {feature}; expected {{language: sentence}} dicts.")


def tokenize_translation(
    dataset_dict: DatasetDict,
    tokenizer: PreTrainedTokenizerBase,
    src_lang: str,
    tgt_lang: str,
    max_source_length: int,
    max_target_length: int,
    num_proc: int | None = None,
    long_pairs: str = "drop",
) -> tuple[DatasetDict, dict[str, dict[str, int]]]:
    """Tokenize every split of a translation `DatasetDict` (`src_lang` -> `tgt_lang`) with `tokenize_pairs`:
    sources become `input_ids`, targets `labels`, too-long pairs are dropped or truncated (`long_pairs`) and
    counted."""
    for split, dataset in dataset_dict.items():
        languages = translation_languages(dataset)
        for lang in (src_lang, tgt_lang):
            if lang not in languages:
                raise UsageError(
                    f"Language '{lang}' is not in split '{split}'; languages found: {', '.join(languages)}."
                )
    return tokenize_pairs(
        dataset_dict,
        tokenizer,
        source=("translation", src_lang),
        target=("translation", tgt_lang),
        max_source_length=max_source_length,
        max_target_length=max_target_length,
        num_proc=num_proc,
        long_pairs=long_pairs,
    )


__all__ = [
    "LABEL_PAD_TOKEN_ID",
    "MULTI30K_SPLIT_FILES",
    "build_seq2seq_collator",
    "iter_text_lines",
    "load_parallel_text",
    "load_translation_dataset",
    "to_translation_schema",
    "tokenize_translation",
    "translation_languages",
]
