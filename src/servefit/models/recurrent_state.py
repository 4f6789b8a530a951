"""The recurrent state a linear-attention or state-space layer keeps per sequence (Gated DeltaNet,
KDA, Mamba 1 / 2, LFM2 ShortConv), completed from the few sizes a config gives: what the engines'
state pools are sized from."""

from __future__ import annotations

from typing import Any


def linear_attention_state(m: dict[str, Any]) -> dict[str, Any]:
    """Complete a Gated DeltaNet state description with the per-layer state sizes (elements):
    conv state (kernel - 1) x conv_dim and recurrent state value_heads x key_dim x value_dim."""
    out = dict(m)
    if m.get("kind") == "short_conv":  # LFM2 ShortConv: (L_cache - 1) x hidden conv state, no SSM state
        out.setdefault("conv_state_elems", (int(m.get("conv_kernel", 3)) - 1) * int(m.get("conv_dim", 0)))
        out.setdefault("ssm_state_elems", 0)
        return out
    if m.get("kind") == "mamba1":  # Mamba / Falcon-Mamba / Jamba: conv over d_inner, a d_inner x state SSM state
        d = int(m.get("d_inner", 0))
        out.setdefault("conv_dim", d)
        out.setdefault("conv_state_elems", (int(m.get("conv_kernel", 4)) - 1) * d)
        out.setdefault("ssm_state_elems", d * int(m.get("state_size", 16)))
        return out
    if m.get("kind") == "mamba2":
        heads, hd = int(m.get("num_heads", 0)), int(m.get("head_dim", 0))
        groups, state = int(m.get("n_groups", 1)), int(m.get("state_size", 0))
        conv_dim = heads * hd + 2 * groups * state
        out.setdefault("conv_dim", conv_dim)
        out.setdefault("conv_state_elems", (int(m.get("conv_kernel", 4)) - 1) * conv_dim)
        out.setdefault("ssm_state_elems", heads * hd * state)
        return out
    nk, nv = int(m.get("num_key_heads", 0)), int(m.get("num_value_heads", 0))
    dk, dv = int(m.get("key_head_dim", 0)), int(m.get("value_head_dim", 0))
    kernel = int(m.get("conv_kernel", 4))
    conv_dim = 2 * nk * dk + nv * dv
    out.setdefault("conv_dim", conv_dim)
    out.setdefault("conv_state_elems", (kernel - 1) * conv_dim)
    out.setdefault("ssm_state_elems", nv * dk * dv)
    return out
