"""Every model card's YAML metadata parses as the Hub reads it, and its model-index names real metrics."""

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
    assert data.pipeline_tag and data.license and data.language
    assert data.eval_results, "the model-index must list the measured metrics"
    for result in data.eval_results:
        assert isinstance(result.metric_value, int | float)
    assert "trust_remote_code=True" in card.text
    assert "scripts/evaluate_model.py" in card.text  # the command that produced the numbers
