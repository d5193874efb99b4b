#!/usr/bin/env bash
# fairseq's side of the Multi30k comparisons (multi30k_seeds.py --fairseq_arm): its virtual environment, and
# our tokenizer's BPE pieces binarised for it, so both trainers see the same pieces.
#
#   bash scripts/benchmarks/fairseq_prepare.sh OUT [VALID_EXAMPLES]   # writes OUT/pieces and OUT/data-bin
#
# VALID_EXAMPLES keeps the first N validation pairs (all by default), as our recipes' max_eval_examples does,
# so that both sides' validation losses are on the same pairs. Run it in this package's environment, after the
# data and tokenizer steps of scripts/recipes/multi30k_de_en.sh (outputs/data/multi30k-de-en,
# outputs/tokenizers/multi30k-de-en-bpe8k). fairseq gets a virtual environment of its own (its pins clash with
# this package's), made on first use at $FAIRSEQ_VENV (outputs/fairseq-venv): fairseq-fixed 0.12.3.1, a
# maintained fairseq 0.12 sdist, builds on Python 3.11 against the same torch when cython, numpy, wheel and
# setuptools<70 are installed first and it is built without build isolation (about 5 minutes).
set -euo pipefail
OUT=$1
VALID_EXAMPLES=${2:-0}
DATA=outputs/data/multi30k-de-en
TOKENIZER=outputs/tokenizers/multi30k-de-en-bpe8k
FAIRSEQ_VENV=${FAIRSEQ_VENV:-outputs/fairseq-venv}
FS=$FAIRSEQ_VENV/bin
mkdir -p "$OUT"

if [ ! -x "$FS/fairseq-train" ]; then
    TORCH=$(python -c "import torch; print(torch.__version__.split('+')[0])")
    python -m venv "$FAIRSEQ_VENV"
    "$FS/pip" install "torch==$TORCH" cython numpy
    "$FS/pip" install "setuptools<70" wheel  # alone: torch asks for a newer setuptools than fairseq builds with
    "$FS/pip" install --no-build-isolation "fairseq-fixed==0.12.3.1"
fi

# Our tokenizer's pieces, one sentence a line, for fairseq (its own </s> is appended as ours is).
python - "$DATA" "$TOKENIZER" "$OUT/pieces" "$VALID_EXAMPLES" <<'PY'
import sys
from pathlib import Path

from datasets import load_from_disk
from transformers import AutoTokenizer

data, tokenizer, out = load_from_disk(sys.argv[1]), AutoTokenizer.from_pretrained(sys.argv[2]), Path(sys.argv[3])
valid_examples = int(sys.argv[4])
out.mkdir(parents=True, exist_ok=True)
for split, name in (("train", "train"), ("validation", "valid"), ("test", "test")):
    pairs = data[split]["translation"]
    if name == "valid" and valid_examples:
        pairs = pairs[:valid_examples]
    for lang in ("de", "en"):
        lines = [" ".join(tokenizer.tokenize(pair[lang])) for pair in pairs]
        (out / f"{name}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
PY
rm -rf "$OUT/data-bin"
"$FS/fairseq-preprocess" --source-lang de --target-lang en --joined-dictionary --workers 2 \
    --trainpref "$OUT/pieces/train" --validpref "$OUT/pieces/valid" --testpref "$OUT/pieces/test" \
    --destdir "$OUT/data-bin" > "$OUT/fairseq-preprocess.log"
