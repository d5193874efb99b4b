#!/usr/bin/env bash
# Multi30k German -> English, end to end: data, joint BPE, training (multi30k_de_en.yaml: 75 minutes),
# averaging of the last 5 checkpoints (§6.1), beam-search evaluation on test_2016_flickr.
#   bash scripts/recipes/multi30k_de_en.sh [path/to/multi30k]
set -euo pipefail
DATA=${1:-../shared/data/multi30k}
OUT=outputs/multi30k-de-en
python scripts/prepare_translation.py --data_dir "$DATA" --src_lang de --tgt_lang en \
    --output_dir outputs/data/multi30k-de-en
python scripts/train_tokenizer.py --task translation --vocab_size 8000 \
    --dataset_dir outputs/data/multi30k-de-en --output_dir outputs/tokenizers/multi30k-de-en-bpe8k
python scripts/train.py scripts/recipes/multi30k_de_en.yaml
python scripts/average_checkpoints.py --run_dir "$OUT" --last 5 --output_dir "$OUT/averaged"
for MODEL in "$OUT/final" "$OUT/averaged"; do
    python scripts/evaluate_model.py --model "$MODEL" --task translation \
        --dataset outputs/data/multi30k-de-en --source_lang de --target_lang en --split test
done
