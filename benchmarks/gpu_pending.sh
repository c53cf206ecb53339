#!/usr/bin/env bash
# What the open issues still need from the GPU machine, in three device calls of at most 10 minutes
# each, on a 4-GPU host (kind nvidia-h100-x4; every step names its GPU, so the steps of one call run
# side by side). Kept in the tree (not in an ignored folder) so a new checkout has the plan too.
#
# Here, once: .kb/ (KernelBench's level folders) and .whl/ (tomli-w, einops, ...), as
# benchmarks/kernelbench_chunk.sh says. Then with the device tool, carrying .whl and .kb:
#   bash benchmarks/gpu_pending.sh B      # the GPU suite on the current code, bench examples, RNNs
#   bash benchmarks/gpu_pending.sh A      # KernelBench's last chunk, two devices, skill gain, loop cut
#   bash benchmarks/gpu_pending.sh C      # the Triton export on the GPU, adversarial + bench GPU tests
# What comes back lies in $OUT/<step>/ (a log per step; JSON where a benchmark writes one).
#
#   A  GPUs 0,1: KernelBench level3/45-50 under the user's flags, eager and torch.compile
#                (issue 43: the baseline's last six tasks; resumes
#                benchmarks/results/kernelbench_h100_compile/results.jsonl)
#      GPU 2:    tests/gpu/test_gpu_devices.py on GPUs 2,3 (issue 45), then the retiled 3xTF32 pair
#                (issue 44: benchmarks/skill_gains.py --tasks tf32x3_short_k_gemm)
#      GPU 3:    loop_throughput.py --kernelbench FIVE --baseline both (issue 48: the spares that
#                import Inductor, measured on a GPU)
#   B  GPU 0:    kernelskill bench examples --shapes auto (issue 47: how many generalize, CUDA+Triton)
#      GPU 1:    the four recurrent tasks level3/35,36,40,42 as references, --flags default then
#                strict (issue 43: is their slower eager TF32 or a busy host?)
#      GPUs 2,3: the GPU suite, tests/gpu in two halves (issue 45: the final code)
#   C  GPU 0:    tests/export/test_export_triton.py -m gpu, then export_cost.py --backend triton
#                (issue 47)
#      GPU 1:    the gpu-marked tests outside tests/gpu: adversarial and bench
set -uo pipefail
part=${1:?which part: A, B or C}
case $part in A|B|C) ;; *) echo "part $part: choose A, B or C" >&2; exit 2 ;; esac
: "${OUT:?run this on the GPU machine, where \$OUT is the folder that comes back}"
[ -f /tmp/site/.installed ] || { python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    && touch /tmp/site/.installed; } || exit 1
work=/tmp/gp-work
rm -rf "$work" && cp -r . "$work" && cd "$work" || exit 1
export PYTHONPATH=/tmp/site:$work KERNELSKILL_CACHE=/tmp/kscache PYTHONUNBUFFERED=1
nvidia-smi -L > "$OUT/gpus.txt"
FIVE=.kb/KernelBench/level1/19_ReLU.py,.kb/KernelBench/level1/23_Softmax.py,.kb/KernelBench/level1/40_LayerNorm.py
FIVE=$FIVE,.kb/KernelBench/level1/1_Square_matrix_multiplication_.py
FIVE=$FIVE,.kb/KernelBench/level2/82_Conv2d_Tanh_Scaling_BiasAdd_Max.py

# step NAME GPUS COMMAND...: COMMAND on those GPUs, its log in $OUT/NAME/log.txt
step() {
    local name=$1 gpus=$2; shift 2
    mkdir -p "$OUT/$name"
    ( export CUDA_VISIBLE_DEVICES=$gpus; start=$(date +%s)
      eval "$@" > "$OUT/$name/log.txt" 2>&1
      echo "rc=$? wall=$(( $(date +%s) - start ))s" >> "$OUT/$name/log.txt" ) &
}

case $part in
A)
    # its results come back in $OUT/kernelbench_h100_compile/ (the chunk script's own folder)
    step kernelbench 0,1 "GPUS=0,1 BASELINE=both LEVELS=3 bash benchmarks/kernelbench_chunk.sh 480 pool"
    step devices_and_gain 2,3 "python3 -m pytest -m gpu -q tests/gpu/test_gpu_devices.py \
        && CUDA_VISIBLE_DEVICES=2 python3 benchmarks/skill_gains.py --tasks tf32x3_short_k_gemm \
           --json $OUT/devices_and_gain/skill_gains_tf32x3_h100.json"
    step loop_both 3 "timeout 540 python3 benchmarks/loop_throughput.py --device cuda --kernelbench $FIVE \
        --candidates 3 --baseline both --json $OUT/loop_both/loop_kernelbench_both_h100.json"
    ;;
B)
    step examples_shapes 0 "timeout 560 python3 -m kernelskill bench examples --device cuda --shapes auto \
        --out /tmp/ex-shapes && cp /tmp/ex-shapes/report.md /tmp/ex-shapes/results.jsonl $OUT/examples_shapes/"
    mkdir -p /tmp/rnn && for t in 35_LSTM 36_LSTMHn 40_GRUHidden 42_GRUBidirectionalHidden; do
        cp .kb/KernelBench/level3/$t.py /tmp/rnn/; done
    step rnn_flags 1 "for f in default strict; do timeout 270 python3 -m kernelskill bench /tmp/rnn --reference \
        --device cuda --flags \$f --executor local --out /tmp/rnn-\$f; cp /tmp/rnn-\$f/report.md \
        $OUT/rnn_flags/report_\$f.md; cp /tmp/rnn-\$f/results.jsonl $OUT/rnn_flags/results_\$f.jsonl; done"
    files=$(ls tests/gpu/test_gpu_*.py)
    half=$(( $(echo "$files" | wc -l) / 2 ))
    step gpu_suite_1 2 "timeout 580 python3 -m pytest -m gpu -q $(echo "$files" | head -n $half | tr '\n' ' ')"
    step gpu_suite_2 3 "timeout 580 python3 -m pytest -m gpu -q $(echo "$files" | tail -n +$((half + 1)) | tr '\n' ' ')"
    ;;
C)
    step export_triton 0 "python3 -m pytest -m gpu -q tests/export/test_export_triton.py \
        && timeout 400 python3 benchmarks/export_cost.py --backend triton \
           --json $OUT/export_triton/export_cost_triton_h100.json"
    step gpu_elsewhere 1 "timeout 580 python3 -m pytest -m gpu -q tests/adversarial tests/bench"
    ;;
esac
wait
tail -n 3 "$OUT"/*/log.txt
