#!/usr/bin/env bash
# fairseq-train with scripts/recipes/multi30k_de_en_paper.yaml's model and schedule, for the Multi30k
# comparisons (multi30k_seeds.py --fairseq_arm): transformer-small (d_model 256, 3 + 3 layers, 8 heads, d_ff
# 1024, shared embeddings, dropout 0.1), label smoothing 0.1, Adam (0.9, 0.98, 1e-9), no clipping, eq. 3 as
# fairseq's inverse_sqrt (warmup 600, peak 1.28e-3), batches of up to 4,096 tokens.
#
#   bash scripts/benchmarks/fairseq_train.sh DATA_BIN SAVE_DIR [fairseq-train options ...]
#   LINEAR_DECAY_UPDATES=N bash scripts/benchmarks/fairseq_train.sh ...   # the same warmup and peak, then a
#                                                                          # linear decay to 0 at update N
#
# The caller adds how training ends, the seed, validation and saving; OMP_NUM_THREADS sets the threads.
# DATA_BIN comes from fairseq_prepare.sh, which also makes $FAIRSEQ_VENV. fairseq's linear decay
# (polynomial_decay, power 1) needs its end as an update count: it cannot end with a clock as ours can.
set -euo pipefail
DATA_BIN=$1
SAVE_DIR=$2
shift 2
FS=${FAIRSEQ_VENV:-outputs/fairseq-venv}/bin
PEAK=$(python -c "from hf_vanilla_transformer.training import paper_peak_learning_rate as p; print(0.5 * p(256, 600))")
SCHEDULE=(--lr-scheduler inverse_sqrt --warmup-updates 600 --warmup-init-lr 0)
if [[ -n ${LINEAR_DECAY_UPDATES:-} ]]; then
    SCHEDULE=(--lr-scheduler polynomial_decay --power 1 --end-learning-rate 0 --warmup-updates 600
        --total-num-update "$LINEAR_DECAY_UPDATES")
fi
exec "$FS/fairseq-train" "$DATA_BIN" --cpu --num-workers 0 \
    --arch transformer --share-all-embeddings --encoder-layers 3 --decoder-layers 3 \
    --encoder-embed-dim 256 --decoder-embed-dim 256 --encoder-ffn-embed-dim 1024 --decoder-ffn-embed-dim 1024 \
    --encoder-attention-heads 8 --decoder-attention-heads 8 --dropout 0.1 \
    --criterion label_smoothed_cross_entropy --label-smoothing 0.1 \
    --optimizer adam --adam-betas "(0.9, 0.98)" --adam-eps 1e-9 --clip-norm 0 \
    --lr "$PEAK" "${SCHEDULE[@]}" --max-tokens 4096 \
    --save-dir "$SAVE_DIR" --log-format simple --log-interval 50 "$@"
