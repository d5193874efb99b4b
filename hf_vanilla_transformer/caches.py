"""The libraries' caches a command needs, checked before it works: a cache that cannot be used (a folder
that is a file, or one this process cannot write: a read-only home on a cluster) is refused in one line
naming the variable that moves it, instead of a traceback from inside `datasets` after minutes of work. A
command that needs no cache (translating, plotting) never looks.

`datasets` converts data files (JSON Lines, CSV, parquet) to Arrow in its cache, `HF_DATASETS_CACHE` (under
`HF_HOME` unless set). This leaf imports nothing of ours but `errors`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from .errors import UsageError


def check_cache(folder: str | Path, variable: str, needed_for: str) -> None:
    """Refuse a cache `folder` that cannot be made or written, naming `variable` (the setting that moves it)
    and what needs it. Writability is tried (an unnamed temporary file), not read off the permission bits,
    which do not bind root."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise UsageError(
            f"The cache {folder} cannot be used ({reason}): {needed_for} needs it. Set {variable} (or "
            "HF_HOME) to a folder you can write."
        ) from error


def check_datasets_cache() -> None:
    """`datasets`' cache, where data files are converted to Arrow."""
    from datasets import config

    check_cache(config.HF_DATASETS_CACHE, "HF_DATASETS_CACHE", "reading data files")
