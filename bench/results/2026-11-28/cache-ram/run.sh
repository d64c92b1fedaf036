#!/bin/bash
# Alternating runs of the RAM-tier measurement (docs/PERFORMANCE.md), run in
# this directory: T=path/to/tpsrun M=path/to/gpt-oss-20b-4l.gguf ./run.sh
# (each run's --json in ram-i.json / none-i.json; summary.txt from them).
M=${M:-/tmp/models/gpt-oss-20b-4l.gguf}; T=${T:-tpsrun}
for i in 1 2 3; do
  for mode in ram none; do
    extra=""; [ $mode = ram ] && extra="--cache-ram 256"
    flock /tmp/tps-machine.lock nice -n 10 $T -q -m $M --prompts-file prompts.txt --parallel 1 --kv-size 640 --ctx 1024 -n 1 --temp 0 --json $extra > $mode-$i.json 2> $mode-$i.err
  done
done
