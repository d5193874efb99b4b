"""Translate a file with a CTranslate2 export and nothing else in the process: the export's own
`CTranslate2Seq2Seq`, loaded by path as its docstring shows (no torch, no transformers), one batch of
`batch_size` lines at a time, sorted by length by CTranslate2, each line whole (no sentence splitting). The
floor that translate.py's `--backend ctranslate2` is timed against by `startup.py`, which runs it by its path
with the arguments EXPORT_DIR INPUT OUTPUT BATCH_SIZE.
"""

import importlib.util
import os
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "hf_vanilla_transformer"


def main() -> None:
    model_dir, source, output, batch_size = sys.argv[1:]
    spec = importlib.util.spec_from_file_location(
        "ct2_inference", PACKAGE / "interop" / "ctranslate2_inference.py"
    )
    inference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(inference)
    model = inference.CTranslate2Seq2Seq(model_dir, intra_threads=len(os.sched_getaffinity(0)))
    lines = Path(source).read_text(encoding="utf-8").splitlines()
    translations = model.generate(lines, split_sentences=False, max_batch_size=int(batch_size))
    Path(output).write_text("".join(line + "\n" for line in translations), encoding="utf-8")


if __name__ == "__main__":
    main()
