"""Publishing: the dry run assembles a folder that a process without the package loads with trust_remote_code
and uses."""

import json
import textwrap
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from hf_vanilla_transformer.interop.hub import build_hub_folder, push_folder, upload_plan
from hf_vanilla_transformer.saving import save_model_folder

from .script_runner import run_code, run_script_file

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


def test_push_to_hub_dry_run_assembles_a_folder_that_loads_and_lists_every_file(tmp_path, model_dir):
    card = tmp_path / "README.md"
    card.write_text(CARD)
    (model_dir / "eval-test-greedy.json").write_text('{"metrics": {"bleu": 1.0}}')
    folder = tmp_path / "hub"
    result = run_script_file(
        "push_to_hub.py", "--model", model_dir, "--card", card, "--dry_run", "--folder", folder, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    names = {p.name for p in folder.iterdir()}
    assert {
        "model.safetensors",
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "README.md",
        "eval-test-greedy.json",
        "modeling_vanilla_transformer.py",
        "configuration_vanilla_transformer.py",
        "pipeline_seq2seq.py",
    } <= names
    for name in names:  # the dry run lists every file it would upload
        assert f"  {name}  (" in result.stdout
    assert (folder / "README.md").read_text() == CARD  # the folder holds the card as written
    loaded = run_code(LOAD_AND_GENERATE, folder, cwd=tmp_path)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    output = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert isinstance(output["text"], str) and output["beams"] == 4


def test_push_uploads_the_folder_as_it_is_with_the_repository_in_the_card(tmp_path, model_dir, monkeypatch):
    """The Hub is unreachable here: a stand-in records the commit."""
    import huggingface_hub

    build_hub_folder(model_dir, tmp_path / "hub", card=_write_card(tmp_path))
    commits = []

    class FakeApi:
        def __init__(self, token=None):
            pass

        def create_repo(self, repo_id, private, exist_ok):
            return f"https://huggingface.co/{repo_id}"

        def create_commit(self, repo_id, operations, commit_message):
            commits.append({op.path_in_repo: op.path_or_fileobj for op in operations})

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    push_folder(tmp_path / "hub", "someone/vanilla-transformer-test")
    (uploaded,) = commits
    assert sorted(uploaded) == [name for name, _ in upload_plan(tmp_path / "hub")]
    card = uploaded["README.md"].decode()
    assert 'from_pretrained("someone/vanilla-transformer-test"' in card and "<owner>" not in card
    assert ModelCard(card).data.pipeline_tag == "translation"
    assert uploaded["model.safetensors"] == str(tmp_path / "hub" / "model.safetensors")  # as it is


def _write_card(tmp_path):
    card = tmp_path / "card.md"
    card.write_text(CARD)
    return card


def test_refreshing_a_card_folder_keeps_its_card(tmp_path, model_dir):
    folder = tmp_path / "model_cards" / "x"
    folder.mkdir(parents=True)
    (folder / "README.md").write_text(CARD)
    build_hub_folder(model_dir, folder)
    assert (folder / "README.md").read_text() == CARD and (folder / "model.safetensors").is_file()
    # Now it holds a model: replacing it is asked for, or refused with nothing changed.
    (folder / "eval-test-greedy.json").write_text("the shipped report")
    weights = (folder / "model.safetensors").read_bytes()
    result = run_script_file(
        "push_to_hub.py", "--model", model_dir, "--folder", folder, "--dry_run", cwd=tmp_path
    )
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"error: {folder} holds a model already (config.json, eval-test-greedy.json, model.safetensors): "
        f"pass --overwrite to replace it with {model_dir}, or another --folder."
    ]
    assert (folder / "eval-test-greedy.json").read_text() == "the shipped report"
    assert (folder / "model.safetensors").read_bytes() == weights
    build_hub_folder(model_dir, folder, overwrite=True)
    assert not (folder / "eval-test-greedy.json").exists()  # the replaced model's report goes with it


def test_card_with_broken_metadata_is_refused(tmp_path, model_dir):
    card = tmp_path / "README.md"
    card.write_text("---\nlanguage: [de\n---\n# broken\n")
    with pytest.raises(ValueError, match=f"The metadata of the model card {card} .* does not parse"):
        build_hub_folder(model_dir, tmp_path / "hub", card=card)
    assert not (tmp_path / "hub").exists()  # refused before anything is written
    result = run_script_file(
        "push_to_hub.py", "--model", model_dir, "--folder", tmp_path / "hub", "--card", card, "--dry_run",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"error: The metadata of the model card {card}")


def test_missing_card_is_named(tmp_path, model_dir):
    with pytest.raises(FileNotFoundError, match="No model card at"):
        build_hub_folder(model_dir, tmp_path / "hub", card=tmp_path / "nope.md")


def test_upload_plan_refuses_a_folder_that_is_not_hub_ready(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a Hub-ready model folder"):
        upload_plan(tmp_path)
