#!/usr/bin/env bash
# Series expansion, end to end: 50,000 generated examples, series BPE, training (series.yaml: 118 minutes
# by the clock, the learning rate decaying to zero as it ends), averaging of the last 5 checkpoints (§6.1),
# greedy and beam-search evaluation on the 2,000-example test split.
#   bash scripts/recipes/series.sh
set -euo pipefail
OUT=outputs/series-50k
python scripts/generate_series.py --num_examples 50000 --output_dir outputs/data/series-50k
python scripts/train_tokenizer.py --task series --vocab_size 1000 --overwrite \
    --dataset outputs/data/series-50k --output_dir outputs/tokenizers/series-bpe1k
python scripts/train.py scripts/recipes/series.yaml --overwrite
python scripts/average_checkpoints.py --run_dir "$OUT" --last 5 --output_dir "$OUT/averaged" --overwrite
for MODEL in "$OUT/final" "$OUT/averaged"; do
    python scripts/evaluate_model.py --model "$MODEL" --task series --dataset outputs/data/series-50k \
        --split test --num_beams 1 --batch_size 100 --overwrite
done
python scripts/evaluate_model.py --model "$OUT/averaged" --task series --dataset outputs/data/series-50k \
    --split test --batch_size 50 --overwrite
