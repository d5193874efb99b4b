"""fairseq 0.12's text output, read for the side-by-side benchmarks (`scripts/benchmarks/`): the hypotheses
of `fairseq-generate` and the validation losses of `fairseq-train --log-format simple`. fairseq is not a
dependency: it runs in an environment of its own (`scripts/benchmarks/fairseq_prepare.sh`), and only what it
prints is read here.
"""

from __future__ import annotations

import math
import re

_VALIDATION = re.compile(r"valid on 'valid' subset \| loss (\d+(?:\.\d+)?) \|.*?\| num_updates (\d+)")


def read_hypotheses(text: str, count: int) -> list[str]:
    """The detokenised hypotheses (`D-<id>\\t<score>\\t<text>` lines) of `fairseq-generate`, in input
    order."""
    hypotheses = {}
    for line in text.splitlines():
        if line.startswith("D-"):
            index, _, rest = line[2:].split("\t", 2)
            hypotheses[int(index)] = rest.strip()
    missing = [index for index in range(count) if index not in hypotheses]
    if missing:
        raise ValueError(
            f"fairseq-generate's output has no hypothesis for {len(missing)} of {count} inputs (the first: "
            f"{missing[0]}); did it stop early? Its log ends the output file."
        )
    return [hypotheses[index] for index in range(count)]


def validation_curve(log_text: str) -> list[tuple[int, float]]:
    """(update, validation loss) from a `fairseq-train` log. fairseq logs its label-smoothed loss per target
    token in bits; it is returned in nats, the unit of this package's `eval_loss`, so the curves overlay."""
    return sorted((int(match[2]), float(match[1]) * math.log(2)) for match in _VALIDATION.finditer(log_text))
