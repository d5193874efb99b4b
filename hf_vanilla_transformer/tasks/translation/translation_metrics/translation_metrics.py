"""sacreBLEU and chrF for translation, as a local `evaluate` module.

Load it by path (nothing is downloaded, unlike loading sacrebleu by its Hub name)::

    from hf_vanilla_transformer.tasks.translation.translation_metrics import load_translation_metric

    metric = load_translation_metric()
    metric.compute(predictions=["Ein Hund läuft."], references=[["Ein Hund rennt."]])

evaluate copies this file into its module cache and imports it from there, so it imports this package as
installed (for what all metrics share), never a neighbouring file.
"""

import datasets
import evaluate
from sacrebleu.metrics import BLEU, CHRF

from hf_vanilla_transformer.metrics import check_pairs

_CITATION = """\
@inproceedings{post-2018-call,
    title = "A Call for Clarity in Reporting {BLEU} Scores",
    author = "Post, Matt",
    booktitle = "Proceedings of the Third Conference on Machine Translation: Research Papers",
    year = "2018",
    pages = "186--191",
}
@inproceedings{popovic-2015-chrf,
    title = "chr{F}: character n-gram {F}-score for automatic {MT} evaluation",
    author = "Popovi{\'c}, Maja",
    booktitle = "Proceedings of the Tenth Workshop on Statistical Machine Translation",
    year = "2015",
    pages = "392--395",
}
"""

_DESCRIPTION = """\
Corpus-level BLEU (Papineni et al., 2002) and chrF (Popović, 2015) computed by the sacrebleu
library on detokenised, cased text, each reported with its sacrebleu signature so that scores
are comparable across papers (Post, 2018). sacrebleu tokenises internally (13a by default), so
pass plain detokenised sentences, not BPE pieces or pre-tokenised text.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list[str]`): detokenised system outputs, one per segment.
    references (`list[str]` or `list[list[str]]`): one reference per segment, or a list of
        references per segment (every segment needs the same number of references).
    lowercase (`bool`, defaults to `False`): lowercase hypotheses and references before BLEU
        (case-insensitive BLEU). chrF stays cased either way (its signature keeps `case:mixed`).
    tokenize (`str`, defaults to `"13a"`): sacrebleu tokeniser for BLEU, e.g. `"13a"`, `"intl"`,
        `"none"`.

Returns:
    score (`float`): BLEU, 0-100.
    signature (`str`): sacrebleu signature of the BLEU settings, e.g.
        `nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0`.
    precisions (`list[float]`): modified 1- to 4-gram precisions, 0-100.
    bp (`float`): brevity penalty.
    sys_len (`int`), ref_len (`int`): hypothesis and effective reference lengths in tokens.
    chrf (`float`): chrF (character 6-grams, beta 2), 0-100.
    chrf_signature (`str`): sacrebleu signature of the chrF settings.

Examples:
    >>> from hf_vanilla_transformer.tasks.translation.translation_metrics import load_translation_metric
    >>> metric = load_translation_metric()
    >>> result = metric.compute(
    ...     predictions=["The cat sat on the mat."], references=["The cat sat on the mat."]
    ... )
    >>> round(result["score"], 1), result["signature"].startswith("nrefs:1|case:mixed")
    (100.0, True)
"""


def _reference_streams(references: list[str] | list[list[str]]) -> list[list[str]]:
    """Turn per-segment references into sacrebleu's layout: one list per reference set.

    sacrebleu wants ``[[ref1 of seg1, ref1 of seg2, ...], [ref2 of seg1, ...]]``, i.e. the
    transpose of the per-segment lists that evaluate hands us.
    """
    per_segment = [[refs] if isinstance(refs, str) else list(refs) for refs in references]
    counts = {len(refs) for refs in per_segment}
    if len(counts) > 1:
        first_bad = next(i for i, refs in enumerate(per_segment) if len(refs) != len(per_segment[0]))
        raise ValueError(
            f"every prediction needs the same number of references: segment 0 has "
            f"{len(per_segment[0])}, segment {first_bad} has {len(per_segment[first_bad])}. "
            "Pad with duplicates of an existing reference or drop the extra ones."
        )
    if counts == {0}:
        raise ValueError("each prediction needs at least one reference; got empty reference lists")
    return [list(stream) for stream in zip(*per_segment, strict=True)]


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class TranslationMetrics(evaluate.Metric):
    """sacreBLEU + chrF with signatures; see the module docstring for how to load it."""

    def _info(self):
        string = datasets.Value("string", id="sequence")
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            # Two accepted layouts: several references per segment, or exactly one.
            features=[
                datasets.Features(
                    {"predictions": string, "references": datasets.Sequence(string, id="references")}
                ),
                datasets.Features({"predictions": string, "references": string}),
            ],
            codebase_urls=["https://github.com/mjpost/sacrebleu"],
            reference_urls=["https://aclanthology.org/W18-6319/", "https://aclanthology.org/W15-3049/"],
        )

    def _compute(self, predictions, references, lowercase: bool = False, tokenize: str = "13a"):
        check_pairs(predictions, references, "BLEU")
        streams = _reference_streams(references)

        bleu = BLEU(lowercase=lowercase, tokenize=tokenize)
        bleu_score = bleu.corpus_score(predictions, streams)
        chrf = CHRF()
        chrf_score = chrf.corpus_score(predictions, streams)
        return {
            "score": bleu_score.score,
            "signature": str(bleu.get_signature()),
            "precisions": bleu_score.precisions,
            "bp": bleu_score.bp,
            "sys_len": bleu_score.sys_len,
            "ref_len": bleu_score.ref_len,
            "chrf": chrf_score.score,
            "chrf_signature": str(chrf.get_signature()),
        }
