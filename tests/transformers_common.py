"""transformers' own common model tests (`ModelTesterMixin`, from tests/test_modeling_common.py of the
installed release), for test_common_*.py: our model under them, and MarianMTModel beside it as the control
that shows the harness itself passes a model transformers ships.

transformers' wheel has no tests; its sdist carries the top-level test modules. They are fetched once per
installed release from the package index (the sdist, about 11 MB, checked against the index's sha256)
into $HF_VANILLA_TRANSFORMER_CACHE (default ~/.cache/hf-vanilla-transformer)/transformers-tests/<version>/.
Where the index cannot be reached the common tests are skipped, naming why, except under CI (`CI` set),
where that is a failure: CI must run them.

The sdist leaves out two subpackages that test_modeling_common.py imports for mixins of other suites:
tests/generation (`GenerationTesterMixin`, the `generate()` tests) and tests/exporters (`ExportTesterMixin`,
`torch.export`). Empty stand-ins take their place, so those two suites do not run here; `generate()` is
tested by our own tests (tests/test_modeling.py, every decoding strategy).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import json
import os
import shutil
import sys
import tarfile
import types
import urllib.request
from pathlib import Path, PurePosixPath

import pytest
import transformers
from filelock import FileLock

PACKAGE = "transformers_common_tests"


def cache_dir() -> Path:
    root = os.environ.get("HF_VANILLA_TRANSFORMER_CACHE") or Path.home() / ".cache" / "hf-vanilla-transformer"
    return Path(root) / "transformers-tests" / transformers.__version__


def _download(folder: Path) -> None:
    """The sdist's tests/ folder, unpacked into `folder` / tests (only regular files under tests/). The file
    is found through the index's JSON simple API (PEP 691) and checked against the hash the index gives:
    `pip download` would first build the sdist's metadata, which needs build tools a test venv lacks."""
    version = transformers.__version__
    name = f"transformers-{version}.tar.gz"
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    request = urllib.request.Request(
        f"{index}/transformers/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        files = json.load(response)["files"]
    entry = next((entry for entry in files if entry["filename"] == name), None)
    if entry is None:
        raise OSError(f"{index} lists no {name}.")
    with urllib.request.urlopen(entry["url"], timeout=600) as response:
        archive = response.read()
    if hashlib.sha256(archive).hexdigest() != entry["hashes"]["sha256"]:
        raise OSError(f"{name} from {entry['url']} does not match the index's sha256.")
    # Unpacked beside, then renamed: an interrupted run leaves no half-filled tests/ that looks complete.
    partial = folder / "tests.partial"
    shutil.rmtree(partial, ignore_errors=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            parts = PurePosixPath(member.name).parts
            if not member.isfile() or len(parts) < 3 or parts[1] != "tests" or ".." in parts:
                continue
            target = partial.joinpath(*parts[2:])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tar.extractfile(member).read())
    shutil.rmtree(folder / "tests", ignore_errors=True)  # what an older, broken fetch may have left
    partial.rename(folder / "tests")


def _stand_in(name: str, **attributes) -> None:
    module = types.ModuleType(name)
    module.__path__ = []  # a package, so that its submodule can be registered below it
    module.__dict__.update(attributes)
    sys.modules[name] = module


def load_modeling_common() -> types.ModuleType:
    """transformers' tests/test_modeling_common.py for the installed release, imported as
    `transformers_common_tests.test_modeling_common`; skips (fails under CI) where it cannot be fetched."""
    if f"{PACKAGE}.test_modeling_common" in sys.modules:
        return sys.modules[f"{PACKAGE}.test_modeling_common"]
    folder = cache_dir()
    tests = folder / "tests"
    if not (tests / "test_modeling_common.py").is_file():
        try:
            with FileLock(str(folder) + ".lock"):  # one download when test processes start together
                if not (tests / "test_modeling_common.py").is_file():
                    _download(folder)
        except (OSError, KeyError, ValueError) as error:
            message = f"transformers {transformers.__version__}'s test files could not be fetched: {error}"
            if os.environ.get("CI"):
                pytest.fail(message, pytrace=False)
            pytest.skip(message, allow_module_level=True)
    package = types.ModuleType(PACKAGE)
    package.__path__ = [str(tests)]
    sys.modules[PACKAGE] = package

    class GenerationTesterMixin:
        """Stand-in: the sdist has no tests/generation (the module docstring says why this is enough)."""

    class ExportTesterMixin:
        """Stand-in: the sdist has no tests/exporters."""

    _stand_in(f"{PACKAGE}.generation")
    _stand_in(f"{PACKAGE}.generation.test_utils", GenerationTesterMixin=GenerationTesterMixin)
    _stand_in(f"{PACKAGE}.exporters")
    _stand_in(f"{PACKAGE}.exporters.test_export", ExportTesterMixin=ExportTesterMixin)
    return importlib.import_module(f"{PACKAGE}.test_modeling_common")


@contextlib.contextmanager
def in_name_tables(model_type: str, base_model: str, seq2seq_model: str):
    """List an out-of-tree model in transformers' name tables for the duration, as its own models are listed
    (`MODEL_MAPPING_NAMES` for the bare model, `MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES` for the model
    with the language-model head). The common tests read those tables to know a class's kind: which gets
    labels, which is a bare model without a loss. Registering with the Auto classes does not reach them."""
    from transformers.models.auto import modeling_auto

    tables = [
        (modeling_auto.MODEL_MAPPING_NAMES, base_model),
        (modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES, seq2seq_model),
    ]
    for table, name in tables:
        table[model_type] = name
    try:
        yield
    finally:
        for table, _ in tables:
            table.pop(model_type, None)


class Seq2SeqModelTester:
    """What `ModelTesterMixin` asks of a model tester, for an encoder-decoder translation model: a tiny
    configuration (`make_config(**sizes)` builds it from the sizes below) and a batch for it. Source rows end
    in </s>; the decoder input is random ids; masks mark non-padding."""

    def __init__(self, parent, make_config, pad_token_id: int, eos_token_id: int, first_plain_id: int):
        self.parent = parent
        self.make_config = make_config
        self.pad_token_id, self.eos_token_id, self.first_plain_id = pad_token_id, eos_token_id, first_plain_id
        self.batch_size = 13
        self.seq_length = self.encoder_seq_length = self.decoder_seq_length = 7
        self.is_training = True
        self.vocab_size = 99
        self.hidden_size = 16
        self.num_hidden_layers = 2
        self.num_attention_heads = 4
        self.intermediate_size = 4
        self.max_position_embeddings = 100

    def get_config(self):
        return self.make_config(
            vocab_size=self.vocab_size,
            d_model=self.hidden_size,
            encoder_layers=self.num_hidden_layers,
            decoder_layers=self.num_hidden_layers,
            encoder_attention_heads=self.num_attention_heads,
            decoder_attention_heads=self.num_attention_heads,
            encoder_ffn_dim=self.intermediate_size,
            decoder_ffn_dim=self.intermediate_size,
            dropout=0.1,
            attention_dropout=0.1,
            max_position_embeddings=self.max_position_embeddings,
        )

    def prepare_config_and_inputs_for_common(self):
        import torch

        shape = (self.batch_size, self.seq_length)
        input_ids = torch.randint(self.first_plain_id, self.vocab_size, shape)
        input_ids[:, -1] = self.eos_token_id
        decoder_input_ids = torch.randint(self.first_plain_id, self.vocab_size, shape)
        inputs = {
            "input_ids": input_ids,
            "attention_mask": input_ids.ne(self.pad_token_id),
            "decoder_input_ids": decoder_input_ids,
            "decoder_attention_mask": decoder_input_ids.ne(self.pad_token_id),
        }
        return self.get_config(), inputs
