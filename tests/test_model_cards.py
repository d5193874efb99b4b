"""Every model card's YAML metadata parses as the Hub reads it, and its model-index names real metrics;
each card stays short and refers to nothing a Hub reader cannot see."""

import re
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

CARDS = sorted((Path(__file__).resolve().parents[1] / "model_cards").glob("*/README.md"))


def test_there_are_model_cards():
    assert CARDS, "model_cards/<name>/README.md is missing"


@pytest.mark.parametrize("card_path", CARDS, ids=lambda p: p.parent.name)
def test_card_metadata_parses(card_path):
    card = ModelCard.load(card_path)
    data = card.data
    assert data.library_name == "transformers"
    assert data.pipeline_tag and data.license
    # A natural-language model names its languages; the series model reads and writes formulas, none.
    assert bool(data.language) == (data.pipeline_tag == "translation")
    assert "custom_code" in data.tags  # the Hub's marker for models loaded with trust_remote_code
    assert data.eval_results, "the model-index must list the measured metrics"
    for result in data.eval_results:
        assert isinstance(result.metric_value, int | float)
    assert "trust_remote_code=True" in card.text
    assert "scripts/evaluate_model.py" in card.text  # the command that produced the numbers


# About 120 lines, with room for a few rows of examples: run-by-run history belongs in docs/experiments/.
MAX_CARD_LINES = 130
# Things that exist only in our repository or on our machines: git history, local paths, unshipped runs.
PRIVATE_REFERENCES = {
    "a `git show`": re.compile(r"git show"),
    "a commit hash": re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b"),
    "a path under ../shared": re.compile(r"\.\./shared"),
    "an unshipped run folder": re.compile(r"outputs/[\w.-]*-run\d+"),
}


@pytest.mark.parametrize("card_path", CARDS, ids=lambda p: p.parent.name)
def test_card_is_short(card_path):
    lines = len(card_path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_CARD_LINES, (
        f"{card_path} has {lines} lines, over {MAX_CARD_LINES}: move run-by-run detail to docs/experiments/"
    )


@pytest.mark.parametrize("card_path", CARDS, ids=lambda p: p.parent.name)
def test_card_refers_to_nothing_private(card_path):
    text = card_path.read_text(encoding="utf-8")
    for what, pattern in PRIVATE_REFERENCES.items():
        match = pattern.search(text)
        assert match is None, f"{card_path} mentions {what}: {match.group(0)!r}; Hub readers cannot follow it"


def test_cards_cite_the_package_and_the_paper_alike():
    """One citation of the package and of the paper, the same in every card."""
    blocks = []
    for card_path in CARDS:
        text = card_path.read_text(encoding="utf-8")
        entries = re.findall(
            r"@(?:software|inproceedings)\{(?:hf_vanilla_transformer|vaswani2017attention),.*?\}\}",
            text,
            re.S,
        )
        assert len(entries) == 2, f"{card_path} must cite the paper and the package"
        blocks.append(entries)
    assert all(block == blocks[0] for block in blocks)
