#!/usr/bin/env bash
# One resumable chunk of KernelBench as shipped, every reference timed against itself, on the GPU
# machine (one command there runs 10 minutes at most). It resumes
# benchmarks/results/kernelbench_h100/results.jsonl and leaves the grown file and the log in $OUT;
# copy results.jsonl back over that file here and commit it, and the next chunk goes on from it.
#
# Here, once: put KernelBench's level folders in .kb/ (ignored) and the wheels in .whl/:
#   echo /.kb/ >> .git/info/exclude; mkdir -p .kb
#   git --git-dir=<a fetched ScalingIntelligence/KernelBench>/.git archive HEAD KernelBench/level1 \
#       KernelBench/level2 KernelBench/level3 | tar -x -C .kb
#   ../shared/scripts/fetch-wheels tomli-w einops     (einops: level3/48-49 Mamba2 import it)
# Then with the device tool, carrying .whl and .kb:
#   bash benchmarks/kernelbench_chunk.sh [SECONDS] [EXECUTOR]
# SECONDS: the chunk's length (default 540; SIGINT ends it and keeps every finished job);
# EXECUTOR: pool (the default: every visible GPU, one timing worker each) or local (one job after
# another). With GPUS=1 (say) the chunk sees that GPU only, so tests can use another beside it.
set -uo pipefail
seconds=${1:-540}
executor=${2:-pool}
: "${OUT:?run this on the GPU machine, where \$OUT is the folder that comes back}"
# The wheels once per machine (a second install beside running tests would swap files under them).
[ -f /tmp/site/.installed ] || { python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    && touch /tmp/site/.installed; } || exit 1
rm -rf /tmp/kb-w && cp -r . /tmp/kb-w && cd /tmp/kb-w || exit 1
export PYTHONPATH=/tmp/site:/tmp/kb-w KERNELSKILL_CACHE=${KERNELSKILL_CACHE:-/tmp/kscache} PYTHONUNBUFFERED=1
[ -n "${GPUS:-}" ] && export CUDA_VISIBLE_DEVICES=$GPUS
mkdir -p /tmp/kbout
[ -f /tmp/kbout/results.jsonl ] || cp benchmarks/results/kernelbench_h100/results.jsonl /tmp/kbout/
nvidia-smi -L > "$OUT/gpus.txt"
start=$(date +%s)
timeout -s INT "$seconds" python3 -m kernelskill bench .kb/KernelBench --levels 1,2,3 --reference --device cuda \
    --executor "$executor" --out /tmp/kbout > "$OUT/bench.log" 2>&1
echo "bench rc=$? wall=$(( $(date +%s) - start ))s executor=$executor" >> "$OUT/bench.log"
cp /tmp/kbout/results.jsonl "$OUT/"
[ -f /tmp/kbout/report.md ] && cp /tmp/kbout/report.md "$OUT/"
tail -3 "$OUT/bench.log"
