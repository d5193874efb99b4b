#!/usr/bin/env bash
# Multi30k German -> English, end to end: data, joint BPE, training (multi30k_de_en.yaml: 75 minutes),
# averaging of the last 5 checkpoints (§6.1), beam-search evaluation on test_2016_flickr of the last
# checkpoint (final/, the product of multi30k_de_en.yaml) and of the average (averaged/, the product of the
# paper's recipe, multi30k_de_en_paper.yaml).
#
#   bash scripts/recipes/multi30k_de_en.sh                      # the Hub copy, bentrevett/multi30k (online)
#   bash scripts/recipes/multi30k_de_en.sh path/to/multi30k     # Multi30k's raw files, wherever they are
#   MULTI30K_DATA=path/to/multi30k bash scripts/recipes/multi30k_de_en.sh     # the same, from the environment
#   MULTI30K_RECIPE=scripts/recipes/multi30k_de_en_paper.yaml bash scripts/recipes/multi30k_de_en.sh  # eq. 3
#
# The data (first argument, else $MULTI30K_DATA, else bentrevett/multi30k) is a Hub dataset
# name or a local folder: Multi30k's raw files (train.de.gz, train.en.gz, val.*, test_2016_flickr.*, as in
# github.com/multi30k/dataset, data/task1/raw), a download of the Hub copy (train.jsonl, val.jsonl,
# test.jsonl), or a `save_to_disk` folder: 29,000 / 1,014 / 1,000 pairs (test: test_2016_flickr).
# Writes outputs/data/multi30k-de-en, outputs/tokenizers/multi30k-de-en-bpe8k and outputs/<the recipe's name>,
# outputs/multi30k-de-en or outputs/multi30k-de-en-paper (checkpoints, final/ and averaged/, each model folder
# with its eval-test-*.json report).
set -euo pipefail
DATA=${1:-${MULTI30K_DATA:-bentrevett/multi30k}}
RECIPE=${MULTI30K_RECIPE:-scripts/recipes/multi30k_de_en.yaml}
if [ ! -f "$RECIPE" ]; then  # before the data and tokenizer steps, which take minutes
    echo "MULTI30K_RECIPE: no recipe file at $RECIPE; give a YAML recipe such as" \
        "scripts/recipes/multi30k_de_en_paper.yaml (paths from where you run this script)." >&2
    exit 2
fi
NAME=$(basename "$RECIPE" .yaml)
OUT=outputs/${NAME//_/-}
python scripts/prepare_translation.py --dataset "$DATA" --source_lang de --target_lang en --overwrite \
    --output_dir outputs/data/multi30k-de-en
python scripts/train_tokenizer.py --task translation --vocab_size 8000 --overwrite \
    --dataset outputs/data/multi30k-de-en --output_dir outputs/tokenizers/multi30k-de-en-bpe8k
python scripts/train.py "$RECIPE" --output_dir "$OUT" --overwrite
python scripts/average_checkpoints.py --run_dir "$OUT" --last 5 --output_dir "$OUT/averaged" --overwrite
for MODEL in "$OUT/final" "$OUT/averaged"; do
    python scripts/evaluate_model.py --model "$MODEL" --task translation \
        --dataset outputs/data/multi30k-de-en --source_lang de --target_lang en --split test --batch_size 50 --overwrite
done
