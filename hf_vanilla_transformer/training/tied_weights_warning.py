"""The Trainer's "missing keys" warning on resuming, silenced when only tied copies are missing."""

from __future__ import annotations

import ast
import logging

import torch


class TiedKeysWarningFilter(logging.Filter):
    """Drops the Trainer's "There were missing keys in the checkpoint model loaded" warning on resuming when
    the only keys missing are tied weights (the shared embeddings and output projection): the checkpoint
    holds them once, by design, and loading that one copy restores them all. The warning says weights were
    lost when none were. Any other missing key, or a message worded otherwise, still passes."""

    PREFIX = "There were missing keys in the checkpoint model loaded: "

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        names: dict[int, list[str]] = {}
        for name, parameter in model.named_parameters(remove_duplicate=False):
            names.setdefault(id(parameter), []).append(name)
        self.tied_groups = [group for group in names.values() if len(group) > 1]

    def only_tied_copies(self, missing: set[str]) -> bool:
        """Whether every missing key is a name of a tied parameter that was loaded under another name."""
        covered = set()
        for group in self.tied_groups:
            if not set(group) <= missing:
                covered.update(group)
        return bool(missing) and missing <= covered

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not message.startswith(self.PREFIX):
            return True
        try:
            missing = ast.literal_eval(message[len(self.PREFIX) :].rstrip("."))
        except (ValueError, SyntaxError):
            return True
        return not (isinstance(missing, list) and self.only_tied_copies(set(missing)))
