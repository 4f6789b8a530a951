#!/usr/bin/env bash
# A community fine-tune loaded with --trust-remote-code: the repository's Python runs inside the
# server at load time (SEC005). Bound to loopback, so it is not exposed.
exec vllm serve someone-on-the-hub/Qwen2.5-7B-Instruct-uncensored --trust-remote-code \
    --host 127.0.0.1 --max-model-len 8192
