"""Publishing: the dry run assembles a folder that a fresh process loads with trust_remote_code and uses."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from hf_vanilla_transformer.hub import build_hub_folder
from hf_vanilla_transformer.saving import save_model_folder

ROOT = Path(__file__).resolve().parents[1]

CARD = textwrap.dedent(
    """\
    ---
    language: [de, en]
    license: apache-2.0
    library_name: transformers
    pipeline_tag: translation
    tags: [vanilla-transformer]
    ---
    # A test card
    model = AutoModelForSeq2SeqLM.from_pretrained("<owner>/vanilla-transformer-test", trust_remote_code=True)
    """
)

LOAD_AND_GENERATE = textwrap.dedent(
    """
    import json, sys
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
    folder = sys.argv[1]
    model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True)
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    ids = model.generate(**tokenizer("ein hund läuft", return_tensors="pt"), max_new_tokens=4)
    assert "hf_vanilla_transformer" not in sys.modules
    print(json.dumps({
        "text": tokenizer.decode(ids[0], skip_special_tokens=True),
        "beams": model.generation_config.num_beams,
    }))
    """
)


@pytest.fixture
def model_dir(tmp_path, tiny_model, word_tokenizer):
    return save_model_folder(tiny_model, word_tokenizer, tmp_path / "model")


def test_push_to_hub_dry_run_folder_loads_in_fresh_process(tmp_path, model_dir):
    card = tmp_path / "README.md"
    card.write_text(CARD)
    folder = tmp_path / "hub"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "push_to_hub.py"),
            "--model",
            str(model_dir),
            "--card",
            str(card),
            "--dry_run",
            "--repo_id",
            "someone/vanilla-transformer-test",
            "--folder",
            str(folder),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    names = {p.name for p in folder.iterdir()}
    assert {
        "model.safetensors",
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "README.md",
        "modeling_vanilla_transformer.py",
        "configuration_vanilla_transformer.py",
        "pipeline_seq2seq.py",
    } <= names
    published = ModelCard.load(folder / "README.md")
    assert published.data.pipeline_tag == "translation"
    assert 'from_pretrained("someone/vanilla-transformer-test"' in published.text
    assert "<owner>" not in published.text
    loaded = subprocess.run(
        [sys.executable, "-c", LOAD_AND_GENERATE, str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    output = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert isinstance(output["text"], str) and output["beams"] == 4


def test_card_with_broken_metadata_is_refused(tmp_path, model_dir):
    card = tmp_path / "README.md"
    card.write_text("---\nlanguage: [de\n---\n# broken\n")
    with pytest.raises(Exception, match="(?i)yaml|metadata|flow"):
        build_hub_folder(model_dir, card, tmp_path / "hub")


def test_missing_card_is_named(tmp_path, model_dir):
    with pytest.raises(FileNotFoundError, match="No model card at"):
        build_hub_folder(model_dir, tmp_path / "nope.md", tmp_path / "hub")
