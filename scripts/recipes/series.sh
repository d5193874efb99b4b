#!/usr/bin/env bash
# Series expansion, end to end: 50,000 generated examples, series BPE, training, averaging of the last 5
# checkpoints (§6.1), greedy and beam-search evaluation on the 2,000-example test split. Training is
# series.yaml (118 minutes by the clock, the learning rate decaying to zero as it ends) with the options given
# to this script after it; the run is outputs/series-50k, which averaging and evaluation read (so neither
# --output_dir nor --dataset):
#   bash scripts/recipes/series.sh
#   bash scripts/recipes/series.sh --decay_by_clock false --max_train_minutes none --max_steps 24000
# SERIES_EXAMPLES=N trains on N generated examples instead (outputs/data/series-<N>, the run
# outputs/series-<N>; 200000 is written 200k). Their validation and test splits are the 50,000's, generated
# first for them and for the tokenizer, so that every run scores on the same test split:
#   SERIES_EXAMPLES=200000 bash scripts/recipes/series.sh --decay_by_clock false --max_train_minutes none \
#       --max_steps 24000  # the shipped model
# Run again, it keeps the data it generated; the run it trained is continued with --resume_from_checkpoint
# true, or trained again with --overwrite.
set -euo pipefail
for OPTION in "$@"; do
    if [[ $OPTION == -h || $OPTION == --help ]]; then
        sed -n '2,/^set /{/^# \{0,1\}/s/^# \{0,1\}//p}' "$0"
        exit 0
    fi
done
EXAMPLES=${SERIES_EXAMPLES:-50000}
if [[ ! $EXAMPLES =~ ^[1-9][0-9]*$ ]]; then
    echo "series.sh: SERIES_EXAMPLES=$EXAMPLES is not a number of examples; give one such as 200000." >&2
    exit 2
fi
BASE=outputs/data/series-50k
NAME=series-${EXAMPLES%000}k
[[ $EXAMPLES == *000 ]] || NAME=series-$EXAMPLES
OUT=outputs/$NAME
DATA=outputs/data/$NAME
for OPTION in "$@"; do
    if [[ $OPTION =~ ^--output[-_]dir(=|$) ]]; then  # before the minutes of data
        echo "series.sh: the run is written to $OUT, which averaging and evaluation read; leave out" \
            "$OPTION, or run the script's commands one by one." >&2
        exit 2
    fi
    if [[ $OPTION =~ ^--dataset(=|$) ]]; then
        echo "series.sh: the data is the $EXAMPLES examples it generates in $DATA; leave out $OPTION, or" \
            "set SERIES_EXAMPLES for another number of them." >&2
        exit 2
    fi
done
python scripts/generate_series.py --num_examples 50000 --output_dir "$BASE"
python scripts/train_tokenizer.py --task series --vocab_size 1000 --overwrite \
    --dataset "$BASE" --output_dir outputs/tokenizers/series-bpe1k
if [[ $DATA == "$BASE" ]]; then
    python scripts/train.py scripts/recipes/series.yaml "$@"
else
    python scripts/generate_series.py --num_examples "$EXAMPLES" --held_out_from "$BASE" --output_dir "$DATA"
    python scripts/train.py scripts/recipes/series.yaml --dataset "$DATA" --output_dir "$OUT" "$@"
fi
python scripts/average_checkpoints.py --run_dir "$OUT" --last 5 --output_dir "$OUT/averaged" --overwrite
for MODEL in "$OUT/final" "$OUT/averaged"; do
    python scripts/evaluate_model.py --model "$MODEL" --task series --dataset "$DATA" \
        --split test --num_beams 1 --batch_size 100 --overwrite
done
python scripts/evaluate_model.py --model "$OUT/averaged" --task series --dataset "$DATA" \
    --split test --batch_size 50 --overwrite
