"""One way to check a value (`validation`): each kind of range holds what it says, the model's configuration
and a command's options refuse a value through the same validator in the same words, and the module needs
nothing but the standard library, so that it travels with a saved folder and a command checks before torch
loads."""

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from huggingface_hub.errors import StrictDataclassFieldValidationError

from hf_vanilla_transformer import validation
from hf_vanilla_transformer.configuration_vanilla_transformer import (
    POSITION_EMBEDDING_TYPES,
    VanillaTransformerConfig,
)
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.saving import save_model_folder
from hf_vanilla_transformer.validation import (
    check_languages,
    check_task_name,
    describe_range,
    in_range,
    integer_in,
    number_in,
    one_of,
    optional,
)

from .conftest import tiny_config
from .remote_code import run_without_package
from .script_runner import run_code


@pytest.mark.parametrize(
    ("spec", "inside", "outside"),
    [
        (">= 1", [1, 2, 10**9], [0, -1, 0.5]),
        (">= 0", [0, 0.0, 3], [-1, -1e-9]),
        ("> 0", [1e-9, 1, 2.5], [0, 0.0, -3]),
        ("[0, 1)", [0, 0.5, 0.999], [1, -0.1, 2]),
        ("(0, 1]", [1e-9, 0.5, 1], [0, 1.01]),
        ("(0, 1)", [0.5], [0, 1]),
        ("[0, 1]", [0, 1], [-0.01, 1.01]),
        ("[1, 65535]", [1, 8080, 65535], [0, 65536]),
        ("any", [-(10**9), -1, 0, 1e9], []),
    ],
)
def test_each_kind_of_range_holds_what_it_says(spec, inside, outside):
    assert all(in_range(value, spec) for value in inside), [v for v in inside if not in_range(v, spec)]
    assert not any(in_range(value, spec) for value in outside), [v for v in outside if in_range(v, spec)]


def test_a_range_reads_as_an_error_or_a_help_text_says_it():
    assert describe_range(">= 1") == "at least 1"
    assert describe_range("> 0") == "more than 0"
    assert describe_range("[0, 1)") == "in [0, 1)"


@pytest.mark.parametrize(
    ("validator", "value", "message"),
    [
        (number_in("[0, 1)"), 1.5, "must be in [0, 1), got 1.5."),
        (number_in("[0, 1)"), "0.1", "must be in [0, 1), got '0.1'."),  # text that reads as a number
        (number_in(">= 1"), True, "must be at least 1, got True."),  # a flag is no number
        (integer_in(">= 1"), 0, "must be a positive integer, got 0."),
        (integer_in(">= 1"), 2.0, "must be a positive integer, got 2.0."),
        (integer_in(">= 0"), -1, "must be an integer at least 0, got -1."),
        (one_of("xavier", "fairseq"), "kaiming", "must be one of xavier, fairseq, got 'kaiming'."),
        (optional(integer_in(">= 1")), 0, "must be a positive integer, got 0."),
        (check_task_name, "Series", "must be None or a task name (lower-case letters, digits, _)"),
        (check_languages, ["de", "de"], "must be None or two different language codes, source then target"),
    ],
)
def test_a_validator_names_the_rule_and_the_value(validator, value, message):
    with pytest.raises(ValueError) as error:
        validator(value)
    assert str(error.value).startswith(message), str(error.value)


def test_a_validator_lets_what_keeps_its_rule_through():
    for validator, value in [
        (number_in("[0, 1)"), 0),
        (integer_in(">= 1"), 3),
        (one_of("xavier", "fairseq"), "fairseq"),
        (optional(integer_in(">= 1")), None),
        (check_task_name, None),
        (check_task_name, "number_words"),
        (check_languages, ["de", "en"]),
    ]:
        validator(value)


def test_one_validator_per_rule():
    """The same rule asked for twice is the same validator, so that a configuration field and an option that
    state one rule hold one check."""
    assert number_in("[0, 1)") is number_in("[0, 1)")
    assert one_of(*["sinusoidal", "learned"]) is one_of(*POSITION_EMBEDDING_TYPES)
    assert integer_in(">= 1") is not number_in(">= 1")


@dataclass
class ModelOptions(Options):
    dropout: float = field(default=0.1, metadata={"help": "P_drop.", "range": "[0, 1)"})
    position_embedding_type: str = field(
        default="sinusoidal", metadata={"help": "Positions.", "choices": list(POSITION_EMBEDDING_TYPES)}
    )


def _config_validators(name: str) -> list:
    (config_field,) = [each for each in dataclasses.fields(VanillaTransformerConfig) if each.name == name]
    return config_field.metadata["validator"]


@pytest.mark.parametrize(
    ("name", "value", "validator"),
    [
        ("dropout", 1.5, number_in("[0, 1)")),
        ("position_embedding_type", "rotary", one_of(*POSITION_EMBEDDING_TYPES)),
    ],
)
def test_the_configuration_and_an_option_refuse_a_value_through_the_same_validator(name, value, validator):
    assert _config_validators(name) == [validator]
    with pytest.raises(StrictDataclassFieldValidationError, match=f"field '{name}'") as refused_config:
        setattr(tiny_config(), name, value)
    with pytest.raises(UsageError) as refused_option:
        ModelOptions(**{name: value})
    with pytest.raises(ValueError) as refused:
        validator(value)
    cause = refused_config.value.__cause__
    assert str(cause) == str(refused.value)
    assert str(refused_option.value) == f"--{name} {refused.value}"  # the same words, the option's name added


def test_a_number_is_checked_against_its_range_by_one_function(monkeypatch):
    """A configuration field's range and an option's are both checked by `validation.in_range`."""
    real, calls = validation.in_range, []

    def recording(value, spec):
        calls.append((value, spec))
        return real(value, spec)

    monkeypatch.setattr(validation, "in_range", recording)
    config = tiny_config()
    calls.clear()
    with pytest.raises(StrictDataclassFieldValidationError):
        config.dropout = 1.5
    assert calls == [(1.5, "[0, 1)")]
    calls.clear()
    with pytest.raises(UsageError):
        ModelOptions(dropout=1.5)
    assert calls == [(1.5, "[0, 1)")]


def test_the_validators_import_nothing_but_the_standard_library(tmp_path):
    """Loaded by path in a fresh interpreter, as transformers loads a saved folder's file: no torch,
    transformers or huggingface_hub is imported, and no module of the package is needed."""
    code = (
        "import importlib.util, json, sys\n"
        "spec = importlib.util.spec_from_file_location('validation', sys.argv[1])\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "module.number_in('[0, 1)')(0.5)\n"
        "heavy = ('torch', 'transformers', 'huggingface_hub', 'hf_vanilla_transformer')\n"
        "print(json.dumps(sorted(name for name in sys.modules if name.split('.')[0] in heavy)))\n"
    )
    result = run_code(code, validation.__file__, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


CHECK_SAVED_CONFIG = """
import json, sys
from huggingface_hub.errors import StrictDataclassFieldValidationError
from transformers import AutoConfig
config = AutoConfig.from_pretrained(sys.argv[1], trust_remote_code=True)
try:
    config.dropout = 1.5
except StrictDataclassFieldValidationError as error:
    refused = str(error.__cause__)
assert "hf_vanilla_transformer" not in sys.modules, "the package must not be needed"
print(json.dumps({"module": type(config).__module__, "refused": refused}))
"""


def test_a_saved_folder_carries_the_validators_its_configuration_checks_with(
    tmp_path, tiny_model, word_tokenizer
):
    folder = save_model_folder(tiny_model, word_tokenizer, tmp_path / "model")
    assert (folder / "validation.py").read_text() == Path(validation.__file__).read_text()
    loaded = run_without_package(CHECK_SAVED_CONFIG, str(folder), cwd=tmp_path)
    assert loaded["module"].startswith("transformers_modules.")  # the folder's code, not the package's
    assert loaded["refused"] == "must be in [0, 1), got 1.5."
