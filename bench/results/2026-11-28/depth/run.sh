#!/bin/bash
# Depth sweep for #34 after the one-pass attention and q4_0 (tpsrun at HEAD of main).
cd /work/main
M=/tmp/models/gpt-oss-20b-4l.gguf
O=/tmp/depth2
lscpu | grep -E "Model name" > $O/cpu.txt
git -C /work/main log -1 --format=%h > $O/commit.txt
for T in f16 q8_0; do
  /usr/bin/time -f "%e s" build/bin/tpsrun -m $M sweep --ctx 18700 --batch 2048 --tg 16 -t 2 --kv-type $T > $O/tps-$T-1x2.txt 2>$O/tps-$T-1x2.err
done
echo done > $O/done
