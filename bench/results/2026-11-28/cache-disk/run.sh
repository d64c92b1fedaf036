#!/bin/bash
# The disk tier's measurement (docs/PERFORMANCE.md), run in this directory:
# T=path/to/tpsrun M=path/to/gpt-oss-20b-4l.gguf ./run.sh. Three times,
# alternating: a prompt of prefix.txt and a question prefilled from an
# empty --cache-dir (prefill-i.json), then a restart on that directory with
# another question after the same prefix (restore-i.json); summary.txt
# from them (summarize.py).
M=${M:-/tmp/models/gpt-oss-20b-4l.gguf}; T=${T:-tpsrun}
P="$(cat prefix.txt)"
run() { flock /tmp/tps-machine.lock nice -n 10 $T -m $M -p "$1" -n 1 --temp 0 --json --cache-ram 256 --cache-dir "$2"; }
for i in 1 2 3; do
  rm -rf cache-$i
  run "$P Question: what does rank 0 send each step?" cache-$i > prefill-$i.json 2> prefill-$i.err
  ls -l cache-$i > cache-$i.txt
  run "$P Question: where do the KV blocks live?" cache-$i > restore-$i.json 2> restore-$i.err
  rm -rf cache-$i  # the block files (their listing: cache-i.txt)
done
