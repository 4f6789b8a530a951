"""Engine-independent memory arithmetic: bytes per element, parameter groups, weight bytes
per quantization, KV bytes per token per layer kind. Engines compose these."""
