#!/usr/bin/env bash
# The paper's WMT14 English -> German recipe end to end (Table 3, §5, §6.1): the data through `datasets`, one
# joint BPE vocabulary of about 37,000 tokens, training under `accelerate launch` with the shipped multi-GPU
# config, averaging of the last 5 (base) or 20 (big) checkpoints, and evaluation of the averaged model on
# newstest2013 and newstest2014 with beam 4 and length penalty 0.6: sacreBLEU with its signature, and the
# paper's tokenized BLEU (the figure its 27.3 / 28.4 compare with).
#   bash scripts/recipes/wmt14_en_de.sh base        # or big
# Settings from the environment (default in brackets):
#   DATASET       [wmt/wmt14]  the Hub dataset, or a local folder of the same schema (parquet or save_to_disk)
#   VOCAB_SIZE    [37000]  size of the joint BPE vocabulary
#   LAUNCH        [accelerate launch --config_file scripts/accelerate_configs/multi_gpu.yaml --num_processes N]
#                 N: the GPUs torch sees here, or 1 (CUDA_VISIBLE_DEVICES limits them): a process each. The
#                 paper's batches are 8 GPUs' worth: on 1, 2 or 4 GPUs the launch accumulates 8 / N batches
#                 per update (--gradient_accumulation_steps, unless TRAIN_OPTIONS sets it)
#   TRAIN_OPTIONS []       options after the recipe file, e.g. "--max_steps 1000"
# The data and tokenizer steps are skipped when their folders exist (delete a folder to redo its step).
set -euo pipefail
SIZE=${1:-}
case "$SIZE" in
    base) LAST=5 ;;
    big) LAST=20 ;;
    *) echo "usage: bash scripts/recipes/wmt14_en_de.sh base|big" >&2; exit 2 ;;
esac
DATA=outputs/data/wmt14-de-en                 # as in the recipe files
TOKENIZER=outputs/tokenizers/wmt14-en-de-bpe37k
OUT=outputs/wmt14-en-de-$SIZE
ACCUMULATE=()
if [ -z "${LAUNCH:-}" ]; then  # the config fixes no process count: one process per GPU present
    GPUS=$(python -c "import torch; print(max(torch.cuda.device_count(), 1))")
    LAUNCH="accelerate launch --config_file scripts/accelerate_configs/multi_gpu.yaml --num_processes $GPUS"
    if [ "$GPUS" -lt 8 ] && [ $((8 % GPUS)) -eq 0 ] && [[ "${TRAIN_OPTIONS:-}" != *--gradient_accumulation_steps* ]]; then
        ACCUMULATE=(--gradient_accumulation_steps $((8 / GPUS)))
    fi
fi

if [ -f "$DATA/dataset_dict.json" ]; then
    echo "Using the data in $DATA"
else
    python scripts/prepare_translation.py --dataset "${DATASET:-wmt/wmt14}" --dataset_config de-en \
        --source_lang en --target_lang de --output_dir "$DATA"
fi
if [ -f "$TOKENIZER/tokenizer.json" ]; then
    echo "Using the tokenizer in $TOKENIZER"
else
    python scripts/train_tokenizer.py --task translation --vocab_size "${VOCAB_SIZE:-37000}" \
        --dataset "$DATA" --output_dir "$TOKENIZER"
fi
# shellcheck disable=SC2086  # LAUNCH and TRAIN_OPTIONS are lists of words
# (An empty array is "unbound" to `set -u` before bash 4.4: hence the `+` form.)
$LAUNCH scripts/train.py "scripts/recipes/wmt14_en_de_$SIZE.yaml" ${ACCUMULATE[@]+"${ACCUMULATE[@]}"} ${TRAIN_OPTIONS:-}
python scripts/average_checkpoints.py --run_dir "$OUT" --last "$LAST" --output_dir "$OUT/averaged" --overwrite
for SPLIT in validation test; do
    python scripts/evaluate_model.py --model "$OUT/averaged" --task translation --dataset "$DATA" \
        --source_lang en --target_lang de --split "$SPLIT" --batch_size 64 --overwrite
done
