#!/usr/bin/env bash
# The LSTM engine on one GPU, in one call and without spaCy (torch, Triton, h5py, pytest):
# the engine's CUDA tests, then the step paths side by side with the fused one, in prediction
# and in training, at english-compact's size and the original's; with a CoNLL-U file (UD
# English-EWT dev), also `embed`-style inference with english-compact's weights.
#
#   bash benchmarks/gpu_lstm.sh [EWT_DEV_CONLLU]
set -euo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python3 -m pytest -q -p no:cacheprovider tests/models/pytorch/lstm -k cuda
for size in compact original; do
  python3 benchmarks/bench_lstm_paths.py --device cuda --size "$size" --batch-sizes 32 256 \
    --paths prediction fused --batches 10 --repeats 3
  python3 benchmarks/bench_lstm_paths.py --device cuda --size "$size" --batch-sizes 32 256 \
    --train --paths recurrence fused --batches 10 --repeats 3
done
if [ $# -ge 1 ]; then
  python3 benchmarks/bench_inference.py --device cuda --model english-compact --batch-sizes 32 256 --conllu "$1"
fi
