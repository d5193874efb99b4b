"""The paper's output limit of source length + 50 (§6.1) for each source of a generate() batch, as a logits
processor (`SourceLengthLimit`); `generation.generate_batch` hands it to generate(). A module of its own
because a logits processor is a transformers class, defined with torch and transformers imported, while the
rest of `generation` (settings, batching) serves the CTranslate2 backend without them."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from transformers import LogitsProcessor


class SourceLengthLimit(LogitsProcessor):
    """Ends each source's output once it holds its own number of new tokens, `limits[i]` (the paper's input
    length + 50, §6.1), by forcing `</s>` as the next token (so `</s>` is the limit's one more). generate()
    has one `max_length` for a whole batch: without this, an output could run to the longest source's limit,
    and a sentence's translation would depend on the batch it was put in.

    Whether any output has reached its limit is decided on the host, from the step's length; the rows that
    have are then masked on the device, with the limits copied there once per generate() call. A step reads
    nothing back from the device: a read would wait for the step's queued work on a GPU."""

    def __init__(self, limits: Sequence[int], eos_token_id: int | Sequence[int]):
        self.limits = [int(limit) for limit in limits]
        self.eos = [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id)
        self.first = min(self.limits)
        self._row_limits: torch.Tensor | None = None  # one limit per row of the batch, on its device
        self._eos: torch.Tensor | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        generated = input_ids.shape[-1] - 1  # after the decoder start token
        if generated < self.first:
            return scores
        if self._row_limits is None or self._row_limits.shape[0] != scores.shape[0]:
            rows_per_source = scores.shape[0] // len(self.limits)  # beams (batch-major), else 1
            self._row_limits = torch.tensor(self.limits).repeat_interleave(rows_per_source).to(scores.device)
            self._eos = torch.tensor(self.eos, device=scores.device)
        ended = (self._row_limits <= generated)[:, None]
        scores = scores.masked_fill(ended, -math.inf)
        scores[:, self._eos] = scores[:, self._eos].masked_fill(ended, 0)
        return scores
