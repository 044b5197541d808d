#!/usr/bin/env bash
# The GPU step, in one call and without spaCy (torch, h5py, numpy): pretraining steps fed by the
# batch worker with no host synchronisation allowed (--sync-check) and the device's busy share
# (--busy), at english-compact's size and the original's; then prediction with english-compact's
# weights at batch 32 and 256; and the kernel launches per step and per batch. With BEFORE set to
# a checkout of an earlier version, that version's pretraining figures come first, in the same call.
#
#   [BEFORE=../old-checkout] bash benchmarks/gpu_step.sh [EWT_DEV_CONLLU]
set -euo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
pretrain() { python3 benchmarks/bench_pretrain.py --device cuda --tokens-per-step 65536 --steps 20 --warmup 3 "$@"; }
if [ -n "${BEFORE:-}" ]; then
  (cd "$BEFORE" && PYTHONPATH="$PWD" python3 benchmarks/bench_pretrain.py --device cuda --sizes compact original \
    --tokens-per-step 65536 --steps 20 --warmup 3 --precision fp32 | sed 's/^/before: /')
fi
pretrain --sizes compact original --precision fp32 --sync-check
pretrain --sizes compact --precision fp32 --busy
if [ $# -ge 1 ]; then
  python3 benchmarks/bench_inference.py --device cuda --model "$PWD/spacy_elmo/resources/english_compact" \
    --n-sentences 2000 --conllu "$(realpath "$1")" --batch-sizes 32 256 --repeats 5
fi
python3 benchmarks/count_launches.py
