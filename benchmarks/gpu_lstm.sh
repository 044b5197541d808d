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
  for round in 1 2; do
    if [ -n "${BEFORE:-}" ]; then
      (cd "$BEFORE" && PYTHONPATH="$PWD" python3 benchmarks/bench_inference.py --device cuda --model "$model" \
        --batch-sizes 32 256 --n-sentences 2000 --repeats 5 --conllu "$conllu" | sed 's/^/before: /')
    fi
    python3 benchmarks/bench_inference.py --device cuda --model "$model" --batch-sizes 32 256 \
      --n-sentences 2000 --repeats 5 --conllu "$conllu"
  done
  python3 benchmarks/bench_inference.py --device cuda --model "$model" --batch-sizes 256 --n-sentences 2000 \
    --conllu "$conllu" --profile
fi
