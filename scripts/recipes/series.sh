#!/usr/bin/env bash
# Series expansion, end to end: 50,000 generated examples, series BPE, training, averaging of the last 5
# checkpoints (§6.1), greedy and beam-search evaluation on the 2,000-example test split. Training is
# series.yaml (118 minutes by the clock, the learning rate decaying to zero as it ends) with the options given
# to this script after it (the run is outputs/series-50k, which averaging and evaluation read: not --output_dir):
#   bash scripts/recipes/series.sh
#   bash scripts/recipes/series.sh --decay_by_clock false --max_train_minutes none --max_steps 24000  # shipped
# Run again, it keeps the data it generated; the run it trained is continued with --resume_from_checkpoint
# true, or trained again with --overwrite.
set -euo pipefail
OUT=outputs/series-50k
DATA=outputs/data/series-50k
for OPTION in "$@"; do
    if [[ $OPTION == -h || $OPTION == --help ]]; then
        sed -n '2,/^set /{/^# \{0,1\}/s/^# \{0,1\}//p}' "$0"
        exit 0
    fi
    if [[ $OPTION =~ ^--output[-_]dir(=|$) ]]; then  # before the minutes of data
        echo "series.sh: the run is written to $OUT, which averaging and evaluation read; leave out" \
            "$OPTION, or run the script's commands one by one." >&2
        exit 2
    fi
done
python scripts/generate_series.py --num_examples 50000 --output_dir "$DATA"
python scripts/train_tokenizer.py --task series --vocab_size 1000 --overwrite \
    --dataset "$DATA" --output_dir outputs/tokenizers/series-bpe1k
python scripts/train.py scripts/recipes/series.yaml "$@"
python scripts/average_checkpoints.py --run_dir "$OUT" --last 5 --output_dir "$OUT/averaged" --overwrite
for MODEL in "$OUT/final" "$OUT/averaged"; do
    python scripts/evaluate_model.py --model "$MODEL" --task series --dataset "$DATA" \
        --split test --num_beams 1 --batch_size 100 --overwrite
done
python scripts/evaluate_model.py --model "$OUT/averaged" --task series --dataset "$DATA" \
    --split test --batch_size 50 --overwrite
