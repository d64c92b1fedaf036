#!/bin/bash
# Prefill at depth as tiles (#34 item 4), at f6caaf8 in /work/wt-tile, each run under the machine lock.
M=/tmp/models/gpt-oss-20b-4l.gguf
O=bench/results/2026-11-28/prefill-tile
flock /tmp/tps-machine.lock build/bin/bench_kernels --benchmark_filter='attention/prefill/avx2/(f16|q8_0|q4_0)/' \
  > $O/bench_kernels-prefill.txt 2>&1  # (built with kPrefillTile 8; the kernels and bench are the same at 16)
for T in f16 q8_0; do
  (date; flock /tmp/tps-machine.lock build/bin/tpsrun -m $M sweep --ctx 18700 --batch 2048 --tg 16 -t 2 --kv-type $T;
   echo "exit $?"; date) > $O/tps-$T-1x2.txt 2>&1
done
