"""LICENSE and CITATION.cff agree with pyproject.toml."""

import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_license_is_the_full_apache_text():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.lstrip().startswith("Apache License\n") and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and "Copyright [yyyy]" not in text


def test_citation_file_matches_the_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["cff-version"] == "1.2.0"
    assert (citation["title"], citation["version"]) == (project["name"], project["version"])
    import hf_vanilla_transformer

    assert hf_vanilla_transformer.__version__ == project["version"]
    assert citation["license"] == project["license"]["text"] == "Apache-2.0"
    (paper,) = citation["references"]
    assert paper["title"] == "Attention Is All You Need" and paper["year"] == 2017
    assert paper["authors"][0]["family-names"] == "Vaswani"


def test_model_cards_cite_the_package_as_citation_file_does():
    # A card travels to the Hub without the repository: its entry for the package names no version, which
    # would go stale as the package moves on, and the title and license of CITATION.cff.
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    cards = sorted((ROOT / "model_cards").glob("*/README.md"))
    assert cards
    for card in cards:
        text = card.read_text(encoding="utf-8")
        entry = text[text.index("@software{hf_vanilla_transformer") :]
        entry = entry[: entry.index("}}") + 2]
        assert "version" not in entry, card
        assert f"title = {{{citation['title']}}}" in entry, card
        assert f"license = {{{citation['license']}}}" in entry, card
