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
# BASELINE=both adds torch.compile to every task. The results file is benchmarks/results/$NAME,
# NAME = kernelbench_<card> (kernelbench_h100, from nvidia-smi; CARD=h100 to name it) or
# kernelbench_<card>_compile with BASELINE=both; LEVELS=2 (say) picks levels.
# What comes back lies in $OUT/$NAME: results.jsonl, bench.log, report.md, baseline.json.
set -uo pipefail
seconds=${1:-540}
executor=${2:-pool}
: "${OUT:?run this on the GPU machine, where \$OUT is the folder that comes back}"
# The wheels once per machine (a second install beside running tests would swap files under them).
[ -f /tmp/site/.installed ] || { python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    && touch /tmp/site/.installed; } || exit 1
[ -n "${GPUS:-}" ] && export CUDA_VISIBLE_DEVICES=$GPUS
baseline=${BASELINE:-eager}
# The results of one kind of card stay together: kernelbench_h100, kernelbench_h200_compile, ...
card=${CARD:-$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oiE 'h[0-9]+' | tr A-Z a-z)}
name=kernelbench_${card:-gpu}; [ "$baseline" = eager ] || name=${name}_$baseline
[ "$baseline" = both ] && name=${name/%_both/_compile}
work=/tmp/kb-w-$name        # one working copy per results file: two chunks can run side by side
rm -rf "$work" && cp -r . "$work" && cd "$work" || exit 1
export PYTHONPATH=/tmp/site:$work KERNELSKILL_CACHE=${KERNELSKILL_CACHE:-/tmp/kscache} PYTHONUNBUFFERED=1
out=/tmp/kbout/$name; back=$OUT/$name
mkdir -p "$out" "$back"
[ -f "$out/results.jsonl" ] || [ ! -f "benchmarks/results/$name/results.jsonl" ] \
    || cp "benchmarks/results/$name/results.jsonl" "$out/"
nvidia-smi -L > "$back/bench.log"     # the GPUs first (one command brings back 8 files at most)
start=$(date +%s)
timeout -s INT "$seconds" python3 -m kernelskill bench .kb/KernelBench --levels "${LEVELS:-1,2,3}" --reference \
    --device cuda --baseline "$baseline" --executor "$executor" --out "$out" >> "$back/bench.log" 2>&1
echo "bench rc=$? wall=$(( $(date +%s) - start ))s executor=$executor" >> "$back/bench.log"
for f in results.jsonl report.md baseline.json; do [ -f "$out/$f" ] && cp "$out/$f" "$back/"; done
tail -3 "$back/bench.log"
