#!/usr/bin/env bash
# The LSTM engine on one GPU, in one call and without spaCy (torch, Triton, h5py, pytest):
# the engine's CUDA tests, then the step paths side by side with the fused one, in prediction
# and in training, at english-compact's size and the original's; with a CoNLL-U file (UD
# English-EWT dev), also `embed`-style inference with english-compact's weights and where its
# time goes; with BEFORE set to a checkout of an earlier version, that version's inference too.
#
#   [BEFORE=../old-checkout] bash benchmarks/gpu_lstm.sh [EWT_DEV_CONLLU]
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
  model=$PWD/spacy_elmo/resources/english_compact conllu=$(realpath "$1")
  # The bench_inference.py of the checkout it is called in, on english-compact's weights and EWT dev.
  infer() { python3 benchmarks/bench_inference.py --device cuda --model "$model" --n-sentences 2000 --conllu "$conllu" "$@"; }
  for round in 1 2; do
    if [ -n "${BEFORE:-}" ]; then
      (cd "$BEFORE" && PYTHONPATH="$PWD" infer --batch-sizes 32 256 --repeats 5 | sed 's/^/before: /')
    fi
    infer --batch-sizes 32 256 --repeats 5
  done
  infer --batch-sizes 256 --profile
fi
