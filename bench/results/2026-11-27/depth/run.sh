#!/bin/bash
# Depth table for #34 item 1: tps sweep vs llama.cpp (node-llama-cpp's bundled CPU build) on 20b-4l.
set -x
cd /work/main
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
M=/tmp/models/gpt-oss-20b-4l.gguf
O=/tmp/depth
lscpu | grep -E "Model name|Flags" | cut -c1-120 > $O/cpu.txt
build/bin/tpstopo --bandwidth --json > $O/bandwidth.json 2>/dev/null
build/bin/tpsrun -m $M sweep --ctx 16384 --batch 2048 --tg 16 -t 2 > $O/tps-f16-1x2.txt 2>$O/tps-f16-1x2.err
for P in 2048 8192 16384; do
  node tests/reference/llama_ref.mjs bench $M --threads 2 --prompt-tokens $P --gen-tokens 16 --flash-attn on > $O/llama-fa-on-$P.json 2>$O/llama-fa-on-$P.err
done
node tests/reference/llama_ref.mjs bench $M --threads 2 --prompt-tokens 16384 --gen-tokens 16 --flash-attn off > $O/llama-fa-off-16384.json 2>$O/llama-fa-off-16384.err
build/bin/tpsrun -m $M sweep --ctx 16384 --batch 2048 --tg 16 -t 2 --kv-type q8_0 > $O/tps-q8_0-1x2.txt 2>$O/tps-q8_0-1x2.err
mpirun -np 2 build/bin/tpsrun -m $M sweep --ctx 16384 --batch 2048 --tg 16 -t 1 > $O/tps-f16-2x1.txt 2>$O/tps-f16-2x1.err
echo done > $O/done
