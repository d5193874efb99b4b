"""fairseq 0.12's outputs, read for the side-by-side benchmarks (`scripts/benchmarks/`): the hypotheses of
`fairseq-generate`, the validation losses of `fairseq-train --log-format simple`, and its checkpoints' update
counts and averages. fairseq is not a dependency: it runs in an environment of its own
(`scripts/benchmarks/fairseq_prepare.sh`), and only what it prints and saves is read here.
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

import torch

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


def _load_checkpoint(path: Path) -> dict:
    # Tensors, plus the one other type fairseq 0.12 stores (its arguments, an argparse.Namespace): nothing
    # else is unpickled.
    with torch.serialization.safe_globals([argparse.Namespace]):
        return torch.load(path, map_location="cpu", weights_only=True)


def checkpoint_updates(path: str | Path) -> int:
    """The updates a fairseq checkpoint was saved after."""
    return int(_load_checkpoint(Path(path))["optimizer_history"][-1]["num_updates"])


def average_last_checkpoints(folder: str | Path, after_update: int, last: int = 5) -> tuple[Path, list[str]]:
    """Average `checkpoint_last.pt` with the interval checkpoints (`checkpoint_<epoch>_<update>.pt`) saved
    before it, at most `last` in all and only those after update `after_update` (the warmup: an average
    reaching into it mixes in a model still far from trained). Writes `averaged.pt` beside them, which
    `fairseq-generate --path` reads; returns its path and the averaged files' names."""
    folder = Path(folder)
    final = _load_checkpoint(folder / "checkpoint_last.pt")
    updates = final["optimizer_history"][-1]["num_updates"]
    interval = {int(path.stem.rsplit("_", 1)[1]): path for path in folder.glob("checkpoint_*_*.pt")}
    earlier = [interval[step] for step in sorted(interval) if after_update < step < updates]
    earlier = earlier[len(earlier) - (last - 1) :] if last > 1 else []
    states = [_load_checkpoint(path)["model"] for path in earlier] + [final["model"]]
    final["model"] = {key: sum(state[key].float() for state in states) / len(states) for key in states[-1]}
    torch.save(final, folder / "averaged.pt")
    return folder / "averaged.pt", [path.name for path in earlier] + ["checkpoint_last.pt"]
