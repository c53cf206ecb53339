#!/bin/bash
# Run every CUDA skill example against a CPU reference on an sm_90 GPU (H100/H200), and the
# Triton/Python examples against PyTorch when torch+triton with CUDA are importable.
# Usage: bash skills/_gpu_check/run.sh [BUILD_DIR]. Prints PASS/FAIL lines; exit 1 on any FAIL.
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-/tmp/kernelskill-gpu-check}"
python3 "$here/harnesses.py" "$build" || exit 1
cd "$build" || exit 1
ls h_*.cu | xargs -P "$(nproc)" -I{} sh -c \
  'nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -o "$(basename {} .cu)" {} > "$(basename {} .cu).log" 2>&1 || echo "FAIL compile {}: $(head -c 2000 "$(basename {} .cu).log")"'
for f in h_*.cu; do
  b="$(basename "$f" .cu)"
  [ -x "$b" ] && { timeout 60 ./"$b" || echo "FAIL $b exited $?"; }
done 2>&1 | tee results.txt
if python3 -c "import torch, triton; assert torch.cuda.is_available()" 2>/dev/null; then
  python3 "$here/py_check.py" 2>&1 | tee -a results.txt
fi
! grep -q "^FAIL" results.txt
