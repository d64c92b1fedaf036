#!/bin/bash
# The disk tier with an ~8k-token prefix (prefix.txt: the 2,320-token one of ../cache-disk four times), as
# ../cache-disk/run.sh: T=path/to/tpsrun M=path/to/gpt-oss-20b-4l.gguf ./run.sh, run in this directory.
M=${M:-/tmp/models/gpt-oss-20b-4l.gguf}; T=${T:-tpsrun}
P="$(cat prefix.txt)"
run() { flock /tmp/tps-machine.lock nice -n 10 $T -m $M -p "$1" -n 1 --temp 0 --json --ctx 10240 --batch 2048 --cache-ram 256 --cache-dir "$2"; }
for i in 1 2; do
  rm -rf cache-$i
  run "$P Question: what does rank 0 send each step?" cache-$i > prefill-$i.json 2> prefill-$i.err
  ls -l cache-$i | wc -l > cache-$i.txt
  run "$P Question: where do the KV blocks live?" cache-$i > restore-$i.json 2> restore-$i.err
  rm -rf cache-$i
done
