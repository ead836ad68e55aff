"""FLOPs of one training step, counted (never timed) with torch.utils.flop_counter.FlopCounterMode:
the matrix products and attention of forward and backward, as that counter defines them (element-wise
operators and the optimizer's update are not counted).

Two CPU kernels the counter has no formula for get one here. The CPU's fused attention
(``_scaled_dot_product_flash_attention_for_cpu`` and its backward) is counted by the counter's own
formulas for the GPU's fused attention (``sdpa_flop_count``, ``sdpa_backward_flop_count``: the
score and value products, causal masks not discounted). The CPU's fused LSTM kernel
(``mkldnn_rnn_layer`` and its backward) is no matrix product the counter
knows; its formula is given here: per token and layer, the gate matrices W_ih (G*H, I) and W_hh (G*H, H)
cost 2 * G*H * (I + H) forward and twice that backward, as the same products would if run one by one
(what the counter sees of a GRU, which the CPU runs as per-step ``addmm``)."""

from __future__ import annotations

import math

from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from .counters import aten


def _rnn_layer_flops(input_shape, w_ih_shape, w_hh_shape) -> int:
    gates_hidden, in_features = w_ih_shape  # (G*H, I)
    hidden = w_hh_shape[1]  # (G*H, H)
    tokens = math.prod(input_shape) // in_features
    return 2 * tokens * gates_hidden * (in_features + hidden)


def _rnn_layer_forward(input, weight0, weight1, *args, out_shape=None, **kwargs) -> int:
    return _rnn_layer_flops(input, weight0, weight1)


def _rnn_layer_backward(input, weight1, weight2, *args, out_shape=None, **kwargs) -> int:
    return 2 * _rnn_layer_flops(input, weight1, weight2)


def _cpu_attention_forward(query, key, value, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query, key, value)


def _cpu_attention_backward(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out, query, key, value)


CPU_FORMULAS = {
    aten.mkldnn_rnn_layer: _rnn_layer_forward,
    aten.mkldnn_rnn_layer_backward: _rnn_layer_backward,
    aten._scaled_dot_product_flash_attention_for_cpu: _cpu_attention_forward,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_attention_backward,
}


def step_flops(step, batch: dict) -> int:
    """FLOPs of one training step (``bench.cost.TrainingStep``: forward, loss, backward, optimizer) on ``batch``."""
    with FlopCounterMode(display=False, custom_mapping=CPU_FORMULAS) as counter:
        step(batch)
    step.release()
    return int(counter.get_total_flops())
