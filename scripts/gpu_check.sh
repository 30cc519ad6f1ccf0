#!/usr/bin/env bash
# One short GPU session for the token-loss kernels (about 5 minutes on an H200, Triton compile included):
#   1. the kernel parity tests, compiled on CUDA (no interpreter);
#   2. the GPU tier of the loss benchmark (entropy grad: all variants, the 65536-token sequence, the
#      fused-linear case, the launch sweep), then entropy none (where Liger's loss can join).
# Results (text + JSON) go to $OUT (default ./gpu-out). Each part has its own timeout; a failure is
# recorded and the script goes on. Needs python3 with torch + triton; rlnb is used from the checkout.
# Optional peers: put trl / liger_kernel (and accelerate) in ./.gpu_peers to have them compared.
set -x
OUT=${OUT:-./gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
[ -d .gpu_peers ] && export PYTHONPATH="$PYTHONPATH:$PWD/.gpu_peers"
export TOKENIZERS_PARALLELISM=false
# rlnb/__init__ imports the tasks, which import `datasets`; a GPU box may lack it: use the stand-in.
$PY -c "import datasets" 2>/dev/null || export PYTHONPATH="$PYTHONPATH:$PWD/scripts/gpu_stubs"

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
$PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))" \
    > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"

timeout 150 $PY -m pytest -q -x -o addopts="" -p no:cacheprovider tests/test_kernels.py tests/test_kernels_training.py \
    tests/test_logprobs.py > "$OUT/tests.txt" 2>&1
echo "tests rc=$?" | tee -a "$OUT/tests.txt"
tail -5 "$OUT/tests.txt"

timeout 270 $PY -m rlnb.bench loss --device cuda --entropy grad --out "$OUT/bench-cuda-grad.json" \
    > "$OUT/bench-cuda-grad.txt" 2>&1
echo "bench grad rc=$?" | tee -a "$OUT/bench-cuda-grad.txt"
cat "$OUT/bench-cuda-grad.txt"

timeout 100 $PY -m rlnb.bench loss --device cuda --entropy none \
    --variants naive_fp32,trl,liger,rlnb_triton,rlnb_triton_inplace --out "$OUT/bench-cuda-none.json" \
    > "$OUT/bench-cuda-none.txt" 2>&1
echo "bench none rc=$?" | tee -a "$OUT/bench-cuda-none.txt"
cat "$OUT/bench-cuda-none.txt"
exit 0
