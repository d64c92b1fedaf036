#!/bin/bash
cd /work/main
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun -np 2 build/bin/tpsrun -m /tmp/models/gpt-oss-20b-4l.gguf sweep --ctx 37440 --batch 4096 --tg 64 -t 1 --kv-type f16 --json > /tmp/d32r/2x1.json 2>/tmp/d32r/2x1.err
build/bin/tpsrun -m /tmp/models/gpt-oss-20b-4l.gguf sweep --ctx 37440 --batch 4096 --tg 64 -t 1 --kv-type f16 --json > /tmp/d32r/1x1.json 2>/tmp/d32r/1x1.err
echo done > /tmp/d32r/done
