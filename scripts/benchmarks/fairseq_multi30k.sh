#!/usr/bin/env bash
# fairseq beside this package's trainer on Multi30k de→en, for the same minutes each, one after the other,
# each alone on the machine: the same BPE pieces (our tokenizer's, fed to fairseq-preprocess
# --joined-dictionary), the same model (transformer-small: d_model 256, 3 + 3 layers, 8 heads, d_ff 1024,
# shared embeddings, dropout 0.1, label smoothing 0.1), the same eq. 3 schedule (warmup 600, peak 1.28e-3),
# Adam (0.9, 0.98, 1e-9), 4,096-token batches, no validation; the last 5 checkpoints averaged the same way;
# beam 4 with length penalty 0.6 on test_2016_flickr, both outputs scored by the same sacreBLEU and chrF
# (this package's translation metric) on detokenised text. docs/benchmarks.md reports a run.
#
#   bash scripts/benchmarks/fairseq_multi30k.sh [MINUTES]          # default 25; writes outputs/fairseq-vs-ours-<M>min
#
# Run it in this package's environment, after the data and tokenizer steps of scripts/recipes/multi30k_de_en.sh;
# fairseq_prepare.sh makes fairseq's environment (on first use) and its data, fairseq_train.sh holds its side
# of the recipe. fairseq-generate loads its own checkpoints unpickling them whole, which torch >= 2.6 allows
# only with TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1: it reads only the files this script's fairseq run wrote.
set -euo pipefail
MINUTES=${1:-25}
OUT=outputs/fairseq-vs-ours-${MINUTES}min
DATA=outputs/data/multi30k-de-en
FAIRSEQ_VENV=${FAIRSEQ_VENV:-outputs/fairseq-venv}
FS=$FAIRSEQ_VENV/bin
THREADS=${THREADS:-2}
mkdir -p "$OUT"

bash scripts/benchmarks/fairseq_prepare.sh "$OUT"

# fairseq, MINUTES of training (--stop-time-hours counts training time and saves when it stops).
rm -rf "$OUT/fairseq"
OMP_NUM_THREADS=$THREADS bash scripts/benchmarks/fairseq_train.sh "$OUT/data-bin" "$OUT/fairseq" --seed 0 \
    --stop-time-hours "$(python -c "print($MINUTES / 60)")" --max-epoch 10000 --disable-validation \
    --save-interval-updates 200 --keep-interval-updates 5 --no-epoch-checkpoints > "$OUT/fairseq-train.log" 2>&1

# The last 5 checkpoints averaged: the final one (checkpoint_last.pt) and up to 4 interval ones before it, as
# scripts/average_checkpoints.py averages ours (fairseq's own averaging script is not in its package).
"$FS/python" - "$OUT/fairseq" <<'EOF'
import argparse
import sys
from pathlib import Path

import torch

# Tensors only, plus the one non-tensor type fairseq 0.12 stores (its arguments, an argparse.Namespace): no
# other object is unpickled.
torch.serialization.add_safe_globals([argparse.Namespace])
folder = Path(sys.argv[1])
last = torch.load(folder / "checkpoint_last.pt", map_location="cpu", weights_only=True)
updates = last["optimizer_history"][-1]["num_updates"]
interval = sorted(folder.glob("checkpoint_*_*.pt"), key=lambda path: int(path.stem.rsplit("_", 1)[1]))
earlier = [path for path in interval if int(path.stem.rsplit("_", 1)[1]) < updates][-4:]
states = [torch.load(path, map_location="cpu", weights_only=True)["model"] for path in earlier] + [last["model"]]
last["model"] = {key: sum(state[key].float() for state in states) / len(states) for key in last["model"]}
torch.save(last, folder / "averaged.pt")
print(f"fairseq: averaged {', '.join(path.name for path in earlier)} and checkpoint_last.pt (update {updates})")
EOF
TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 OMP_NUM_THREADS=$THREADS "$FS/fairseq-generate" "$OUT/data-bin" --cpu \
    --path "$OUT/fairseq/averaged.pt" --gen-subset test --beam 4 --lenpen 0.6 --max-len-a 1 --max-len-b 50 \
    --batch-size 50 --post-process sentencepiece > "$OUT/fairseq-test.out"

# Ours, the same minutes, with the paper's recipe (eq. 3, as fairseq's inverse_sqrt) and no validation.
rm -rf "$OUT/ours"
python scripts/train.py scripts/recipes/multi30k_de_en_paper.yaml --max_train_minutes "$MINUTES" --eval_strategy no \
    --output_dir "$OUT/ours" > "$OUT/ours-train.log" 2>&1
# The last 5 checkpoints, or all of them in a run too short to save 5 (as fairseq's side above takes them).
SAVED=$(find "$OUT/ours" -maxdepth 1 -name "checkpoint-*" | wc -l)
python scripts/average_checkpoints.py --run_dir "$OUT/ours" --last $((SAVED < 5 ? SAVED : 5)) \
    --output_dir "$OUT/ours/averaged"
python scripts/evaluate_model.py --model "$OUT/ours/averaged" --task translation --dataset "$DATA" \
    --source_lang de --target_lang en --split test --batch_size 50 --show_examples 0 > "$OUT/ours-test.log"

# Both outputs through the same metric; updates, passes over the data and seconds per update from each log.
python - "$OUT" "$DATA" <<'EOF'
import json
import re
import sys
from pathlib import Path

from datasets import load_from_disk

from hf_vanilla_transformer.benchmarks.fairseq_logs import read_hypotheses
from hf_vanilla_transformer.evaluation.metrics import load_translation_metric

out, data = Path(sys.argv[1]), load_from_disk(sys.argv[2])
references = [pair["en"] for pair in data["test"]["translation"]]
fairseq_output = (out / "fairseq-test.out").read_text(encoding="utf-8")
fairseq_predictions = read_hypotheses(fairseq_output, len(references))
report = json.loads(next((out / "ours" / "averaged").glob("eval-test-beam4-*.json")).read_text())
ours_predictions = [example["prediction"] for example in report["examples"]]
assert [example["reference"] for example in report["examples"]] == references

log = (out / "fairseq-train.log").read_text(encoding="utf-8")
fairseq_updates = int(re.findall(r"num_updates (\d+)", log)[-1])
batches = int(re.search(r"epoch 001:\s+\d+ / (\d+)", log).group(1))
fairseq_seconds = float(re.findall(r"\| wall (\d+(?:\.\d+)?)", log)[-1])  # since the start
records = [json.loads(line) for line in (out / "ours" / "loss_log.jsonl").read_text().splitlines()]
end = next(r for r in reversed(records) if "train_runtime" in r)
rows = [
    ("fairseq-fixed 0.12.3.1", fairseq_updates, fairseq_updates / batches, fairseq_seconds, fairseq_predictions),
    ("ours (scripts/train.py)", end["step"], end["epoch"], end["train_runtime"], ours_predictions),
]
metric = load_translation_metric()
print("| trainer | updates | passes over the data | s / update | sacreBLEU | chrF |\n|---|---|---|---|---|---|")
for name, updates, passes, seconds, predictions in rows:
    scores = metric.compute(predictions=predictions, references=references)
    print(f"| {name} | {updates:,} | {passes:.1f} | {seconds / updates:.2f} | {scores['score']:.2f} | "
          f"{scores['chrf']:.2f} |")
EOF
