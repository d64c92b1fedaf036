#!/bin/bash
# RAM tier on vs off, alternating, on a load that shares no prefix (every lookup misses; blocks the pool reuses are saved).
cd /work/main
for r in 1 2 3 4 5 6 7; do
  for ram in 0 64; do
    build/bin/tpsrun -q -m build/models/gpt-oss-small.gguf --prompts-file /tmp/tier-prompts.txt --parallel 4 -n 32 --temp 0 --kv-size 2048 --cache-ram $ram --json 2>/dev/null |
      python3 -c "import json,sys; d=json.load(sys.stdin); print($ram, d['steps'], d['seconds'], d['decode_tokens_per_s'], d['prompt_cache'].get('ram_saved_blocks',0), d['prompt_cache'].get('ram_misses',0))"
  done
done
