#!/usr/bin/env bash
# What the open issues still need from the GPU machine, as lanes of steps on a 4-GPU host (kind
# nvidia-h100-x4) inside one device call of at most 10 minutes. Kept in the tree (not in an ignored
# folder) so a new checkout has the plan too.
#
# Here, once: .kb/ (KernelBench's level folders) and .whl/ (tomli-w, einops), as
# benchmarks/kernelbench_chunk.sh says. Then with the device tool, carrying .whl and .kb:
#   bash benchmarks/gpu_pending.sh measure    # the figures the issues wait on
#   bash benchmarks/gpu_pending.sh verify     # the GPU test suites on the final code (run it last)
#   bash benchmarks/gpu_pending.sh 0,1=kernelbench+devices 2=rnn+gain 3=shapes   # lanes by hand
# A lane is GPUS=STEP+STEP...: its steps run one after another on those GPUs; lanes run side by side.
# Every step stops (SIGINT, then its own cleanup) at the call's deadline: DEADLINE seconds after the
# start (default 570), and a step with under 30 s left is skipped and says so. Keep DEADLINE below
# the limit the device grants (its reply's limit_s: less than timeout_s when the session's device
# time runs short, and a fresh machine's start comes out of that time too).
# The device brings back 8 files at most, so every step's folder goes into $OUT/steps.tgz
# (tar -xzf it here); the last lines of each step's log are printed at the end.
#
# A step cut off by the deadline keeps its finished jobs (bench steps resume from .gpu-resume/, an
# ignored folder to carry). Steps (and the issue each serves):
#   kernelbench  KernelBench level 3 under the user's flags, eager and torch.compile, resuming
#                benchmarks/results/kernelbench_h100_compile/results.jsonl (43; give it two GPUs)
#   rnn          level3/35,36,40,42 as references, --flags default then strict (43)
#   devices      tests/gpu/test_gpu_devices.py (45; needs two GPUs)
#   gain         benchmarks/skill_gains.py --tasks gemm_bias_relu: the 3xTF32 twins raced (44)
#   loop         loop_throughput.py at five KernelBench problems, --baseline both (48)
#   shapes       kernelskill bench examples --shapes auto (47)
#   export       tests/export/test_export_triton.py -m gpu, then export_cost.py --backend triton (47)
#   exportcost   export_cost.py --backend triton alone (beside suite steps, which run the test)
#   exportcuda   export_cost.py --backend cuda: the eight CUDA packages of docs/export.md's table
#   suiteK/N     the K-th of N parts of every gpu-marked test (tests/gpu, tests/adversarial,
#                tests/bench, tests/export; SUITE="tests/gpu ..." picks folders), split by test id (45,
#                and every evaluator change)
#   leftover     the test ids listed in the carried .gpu-resume/leftover.txt
set -uo pipefail
[ $# -gt 0 ] || { sed -n '2,30p' "$0" >&2; exit 2; }
: "${OUT:?run this on the GPU machine, where \$OUT is the folder that comes back}"
case $1 in
measure) set -- 0,1=kernelbench+devices 2=rnn+gain+export 3=shapes+loop ;;
verify) set -- 0=suite1/3 1=suite2/3 2=suite3/3 3=loop+gain ;;
esac
[ -f /tmp/site/.installed ] || { python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    && touch /tmp/site/.installed; } || exit 1
start=$(date +%s); deadline=$(( start + ${DEADLINE:-570} ))
work=/tmp/gp-work; res=/tmp/gp-out
rm -rf "$work" "$res" && cp -r . "$work" && cd "$work" && mkdir -p "$res" || exit 1
export PYTHONPATH=/tmp/site:$work KERNELSKILL_CACHE=/tmp/kscache PYTHONUNBUFFERED=1
# The device's copy of the tree carries no history of its own: the caller names the commit it sent.
nvidia-smi -L > "$res/gpus.txt"; echo "${KS_COMMIT:-unknown: pass KS_COMMIT=<the commit sent>}" > "$res/commit.txt"
FIVE=.kb/KernelBench/level1/19_ReLU.py,.kb/KernelBench/level1/23_Softmax.py,.kb/KernelBench/level1/40_LayerNorm.py
FIVE=$FIVE,.kb/KernelBench/level1/1_Square_matrix_multiplication_.py
FIVE=$FIVE,.kb/KernelBench/level2/82_Conv2d_Tanh_Scaling_BiasAdd_Max.py

# run_step NAME SECONDS DIR: the step's commands; what it writes goes to DIR, beside its log.txt
run_step() {
    local name=$1 t=$2 o=$3
    case $name in
    kernelbench)
        OUT=$o LEVELS=3 BASELINE=both GPUS=$CUDA_VISIBLE_DEVICES bash benchmarks/kernelbench_chunk.sh $((t - 15)) pool ;;
    rnn)
        mkdir -p /tmp/rnn && for k in 35_LSTM 36_LSTMHn 40_GRUHidden 42_GRUBidirectionalHidden; do
            cp .kb/KernelBench/level3/$k.py /tmp/rnn/; done
        for f in default strict; do
            timeout -s INT $((t / 2 - 5)) python3 -m kernelskill bench /tmp/rnn --reference --device cuda \
                --flags $f --executor local --out /tmp/rnn-$f
            cp /tmp/rnn-$f/report.md "$o/report_$f.md"; cp /tmp/rnn-$f/results.jsonl "$o/results_$f.jsonl"
        done ;;
    devices) timeout -s INT "$t" python3 -m pytest -m gpu -q tests/gpu/test_gpu_devices.py ;;
    gain) timeout -s INT "$t" python3 benchmarks/skill_gains.py --device cuda --tasks gemm_bias_relu \
            --json "$o/skill_gains_tf32x3_gemm_bias_relu_h100.json" ;;
    loop) timeout -s INT "$t" python3 benchmarks/loop_throughput.py --device cuda --kernelbench $FIVE \
            --candidates 3 --baseline both --json "$o/loop_kernelbench_both_h100.json" ;;
    shapes)     # resumes the rows of an earlier call when .gpu-resume/shapes/results.jsonl is carried
        mkdir -p /tmp/ex-shapes && { [ ! -f .gpu-resume/shapes/results.jsonl ] || cp .gpu-resume/shapes/results.jsonl /tmp/ex-shapes/; }
        timeout -s INT "$t" python3 -m kernelskill bench examples --device cuda --shapes auto --out /tmp/ex-shapes
        cp /tmp/ex-shapes/results.jsonl "$o/"; [ ! -f /tmp/ex-shapes/report.md ] || cp /tmp/ex-shapes/report.md "$o/" ;;
    export|exportcost)     # exportcost: the figures only (a suite step already runs the test)
        [ "$name" = exportcost ] || timeout -s INT $((t / 3)) python3 -m pytest -m gpu -q tests/export/test_export_triton.py
        timeout -s INT $((deadline - $(date +%s) - 10)) python3 benchmarks/export_cost.py --backend triton --jobs 4 \
            --json "$o/export_cost_triton.json" ;;
    exportcuda)
        timeout -s INT $((deadline - $(date +%s) - 10)) python3 benchmarks/export_cost.py --backend cuda --jobs 8 \
            --only conv_bn_relu,cross_entropy,gemm_bias_relu,layernorm,maxpool2d,relu_gelu,rmsnorm,softmax_rows \
            --json "$o/export_cost_cuda.json" ;;
    leftover)   # the test ids in the carried .gpu-resume/leftover.txt (what an earlier call did not reach)
        mapfile -t ids < .gpu-resume/leftover.txt
        timeout -s INT "$t" python3 -m pytest -m gpu -q -p no:cacheprovider --durations=8 "${ids[@]}" ;;
    suite*/*)
        local k=${name#suite}; local n=${k#*/}; k=${k%/*}
        mapfile -t ids < <(python3 -m pytest -m gpu -q --collect-only ${SUITE:-tests/gpu tests/adversarial tests/bench \
            tests/export} 2>/dev/null | grep '::' | awk -v n="$n" -v k="$k" 'NR % n == k % n')
        echo "part $k of $n: ${#ids[@]} tests"
        timeout -s INT "$t" python3 -m pytest -m gpu -q -p no:cacheprovider --durations=8 "${ids[@]}" ;;
    *) echo "no step called $name (see the list at the top of $0)"; return 2 ;;
    esac
}

# lane GPUS STEP+STEP...: the steps one after another on those GPUs, each within the deadline
lane() {
    local gpus=$1 steps=$2 name left
    ( export CUDA_VISIBLE_DEVICES=$gpus
      for name in ${steps//+/ }; do
          local dir=$res/${name//\//of}; mkdir -p "$dir"     # suite2/4 -> suite2of4
          left=$(( deadline - $(date +%s) ))
          if [ "$left" -lt 30 ]; then echo "skipped: ${left}s left before the deadline" > "$dir/log.txt"; continue; fi
          local t0=$(date +%s)
          run_step "$name" "$left" "$dir" > "$dir/log.txt" 2>&1
          echo "rc=$? wall=$(( $(date +%s) - t0 ))s gpus=$gpus" >> "$dir/log.txt"
          # as each step ends, its last lines reach the output too (what a cut-off call still returns)
          echo "== $name ($(date +%T))"; tail -n 3 "$dir/log.txt"
      done ) &
}

# What has finished so far, packed into $OUT/steps.tgz every 20 s and at the end: a call cut off by
# the device (its limit can be below DEADLINE when the session's device time runs short) still
# brings back every step that ended before the cut, and the log of the ones running then.
pack() { tar -czf "$OUT/.steps.tgz" -C "$res" . 2>/dev/null && mv -f "$OUT/.steps.tgz" "$OUT/steps.tgz"; }
( while sleep 20; do pack; done ) &
packer=$!
for spec; do
    [[ $spec == *=* ]] || { echo "lane $spec: write GPUS=STEP+STEP, e.g. 0,1=kernelbench+devices" >&2; exit 2; }
    lane "${spec%%=*}" "${spec#*=}"
done
wait_lanes() { local p; for p in $(jobs -p); do [ "$p" = "$packer" ] || wait "$p"; done; }
wait_lanes
kill "$packer" 2>/dev/null
pack
for f in "$res"/*/log.txt; do echo "== ${f#$res/}"; tail -n 4 "$f"; done
