#!/usr/bin/env bash
# Qwen3 8B on the lab box (2 × L40S). Override with MODEL=... ./serve.sh
set -euo pipefail

MODEL=${MODEL:-Qwen/Qwen3-8B}
MAX_LEN=32768
export VLLM_ALLOW_LONG_MAX_MODEL_LEN=0

CUDA_VISIBLE_DEVICES=0,1 exec vllm serve "$MODEL" \
  --tensor-parallel-size 2 \
  --max-model-len "$MAX_LEN" \
  --gpu-memory-utilization 0.92 \
  --kv-cache-dtype fp8 \
  --port 8000
