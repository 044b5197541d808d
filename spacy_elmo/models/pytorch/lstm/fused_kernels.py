"""The Triton kernel of :mod:`.fused_layer` (imported at its first use: Triton is optional)."""
import triton
import triton.language as tl


@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def _tanh(x):
    return 2.0 * _sigmoid(2.0 * x) - 1.0


@triton.jit
def lstm_layer(
    gate_inputs_ptr, w_hidden_ptr, w_proj_ptr, h_ptr, c_ptr, trace_ptr,
    batch_sizes_ptr, offsets_ptr, h_offsets_ptr, lengths_ptr,
    hidden_size, proj_size,
    s_gi_k, s_gi_n, s_w_k, s_w_p, s_p_k, s_p_h, s_h_k, s_h_n, s_c_k, s_c_n, s_t_k, s_t_n,
    cell_clip, proj_clip,
    HAS_CELL_CLIP: tl.constexpr, HAS_PROJ_CLIP: tl.constexpr, KEEP_TRACE: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_P: tl.constexpr,
):
    """Every step of one layer for ``BLOCK_N`` sequences of one direction.

    Sequences are independent, so a program owns its rows for the whole layer: ``c`` stays in its rows of ``c_ptr``;
    step ``t`` reads ``h`` at ``h_offsets[t]`` (``[0]``: the initial state), gate inputs at ``offsets[t]``, writes
    ``h`` at ``h_offsets[t + 1]``. ``KEEP_TRACE``: ``trace`` rows (``6H + P``) keep gates, unclipped c and h, ``m``."""
    direction = tl.program_id(0).to(tl.int64)  # 64-bit addresses: a row times its stride may pass 2**31
    first = tl.program_id(1) * BLOCK_N
    rows = (first + tl.arange(0, BLOCK_N)).to(tl.int64)
    cols = tl.arange(0, BLOCK_P)
    col_ok = cols < proj_size
    n_steps = tl.load(lengths_ptr + first)  # rows are sorted by length: the first is the longest
    for t in range(0, n_steps):
        row_ok = rows < tl.load(batch_sizes_ptr + t)
        here = tl.load(offsets_ptr + t) + rows  # this step's packed rows
        h_prev = h_ptr + direction * s_h_k + (tl.load(h_offsets_ptr + t) + rows) * s_h_n
        gi_rows = gate_inputs_ptr + direction * s_gi_k + here * s_gi_n
        h_new = tl.zeros((BLOCK_N, BLOCK_P), dtype=tl.float32)
        for start in range(0, hidden_size, BLOCK_H):
            cells = start + tl.arange(0, BLOCK_H)
            cell_ok = cells < hidden_size
            tile_ok = row_ok[:, None] & cell_ok[None, :]
            gi = gi_rows[:, None] + cells[None, :]
            acc_i = tl.load(gi, mask=tile_ok, other=0.0).to(tl.float32)
            acc_f = tl.load(gi + hidden_size, mask=tile_ok, other=0.0).to(tl.float32)
            acc_o = tl.load(gi + 2 * hidden_size, mask=tile_ok, other=0.0).to(tl.float32)
            acc_j = tl.load(gi + 3 * hidden_size, mask=tile_ok, other=0.0).to(tl.float32)
            for k_start in range(0, proj_size, BLOCK_K):
                reduce = k_start + tl.arange(0, BLOCK_K)
                reduce_ok = reduce < proj_size
                h = tl.load(h_prev[:, None] + reduce[None, :], mask=row_ok[:, None] & reduce_ok[None, :], other=0.0)
                w = w_hidden_ptr + direction * s_w_k + reduce[:, None] * s_w_p + cells[None, :]
                w_ok = reduce_ok[:, None] & cell_ok[None, :]
                acc_i += tl.dot(h, tl.load(w, mask=w_ok, other=0.0), input_precision="ieee")
                acc_f += tl.dot(h, tl.load(w + hidden_size, mask=w_ok, other=0.0), input_precision="ieee")
                acc_o += tl.dot(h, tl.load(w + 2 * hidden_size, mask=w_ok, other=0.0), input_precision="ieee")
                acc_j += tl.dot(h, tl.load(w + 3 * hidden_size, mask=w_ok, other=0.0), input_precision="ieee")
            c_tile = c_ptr + direction * s_c_k + rows[:, None] * s_c_n + cells[None, :]
            gate_i, gate_f, gate_o, gate_j = _sigmoid(acc_i), _sigmoid(acc_f), _sigmoid(acc_o), _tanh(acc_j)
            cell_raw = gate_f * tl.load(c_tile, mask=tile_ok, other=0.0) + gate_i * gate_j
            cell = _clip(cell_raw, cell_clip, HAS_CELL_CLIP)
            tl.store(c_tile, cell, mask=tile_ok)
            m = tl.where(tile_ok, gate_o * _tanh(cell), 0.0)
            if KEEP_TRACE:
                kept = trace_ptr + direction * s_t_k + here[:, None] * s_t_n + cells[None, :]
                tl.store(kept, gate_i, mask=tile_ok)
                tl.store(kept + hidden_size, gate_f, mask=tile_ok)
                tl.store(kept + 2 * hidden_size, gate_o, mask=tile_ok)
                tl.store(kept + 3 * hidden_size, gate_j, mask=tile_ok)
                tl.store(kept + 4 * hidden_size, cell_raw, mask=tile_ok)
                tl.store(kept + 5 * hidden_size, m, mask=tile_ok)
            w_p = w_proj_ptr + direction * s_p_k + cells[:, None] * s_p_h + cols[None, :]
            h_new += tl.dot(m, tl.load(w_p, mask=cell_ok[:, None] & col_ok[None, :], other=0.0), input_precision="ieee")
        if KEEP_TRACE:
            kept = trace_ptr + direction * s_t_k + here[:, None] * s_t_n + cols[None, :]
            tl.store(kept + 6 * hidden_size, h_new, mask=row_ok[:, None] & col_ok[None, :])
        h_new = _clip(h_new, proj_clip, HAS_PROJ_CLIP)
        h_out = h_ptr + direction * s_h_k + (tl.load(h_offsets_ptr + t + 1) + rows) * s_h_n
        tl.store(h_out[:, None] + cols[None, :], h_new, mask=row_ok[:, None] & col_ok[None, :])
        tl.debug_barrier()  # the next step reads this step's h and c from other threads


@triton.jit
def _clip(x, clip, HAS_CLIP: tl.constexpr):
    if HAS_CLIP:
        x = tl.minimum(tl.maximum(x, -clip), clip)
    return x


@triton.jit
def _clip_gradient(grad, x, clip, HAS_CLIP: tl.constexpr):
    """`grad` where a clip of `x` passes it (``-clip <= x <= clip``, as clamp's backward), else 0."""
    if HAS_CLIP:
        grad = tl.where((x >= -clip) & (x <= clip), grad, 0.0)
    return grad


@triton.jit
def lstm_layer_backward(
    d_h_ptr, d_gates_ptr, d_c_ptr, d_h0_ptr, trace_ptr, c0_ptr, w_hidden_ptr, w_proj_ptr,
    batch_sizes_ptr, offsets_ptr, lengths_ptr,
    hidden_size, proj_size,
    s_dh_k, s_dh_n, s_dg_k, s_dg_n, s_dc_k, s_dc_n, s_d0_k, s_d0_n, s_t_k, s_t_n, s_c0_k, s_c0_n,
    s_w_k, s_w_p, s_p_k, s_p_h,
    cell_clip, proj_clip,
    HAS_CELL_CLIP: tl.constexpr, HAS_PROJ_CLIP: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_P: tl.constexpr,
):
    """The steps of :func:`lstm_layer` in reverse, for ``BLOCK_N`` sequences of one direction.

    In: ``d_h`` (packed, ``P``), the outputs' gradients; ``d_c`` (per sequence, ``H``), the final cells'; the forward's
    ``trace``. Per step, ``d_h`` through the projection's clip is written back (the projection's gradient reads it),
    gate gradients go to ``d_gates``, and ``d_gates W_h^T`` sums into the previous ``d_h`` (``d_h0`` at the first)."""
    direction = tl.program_id(0).to(tl.int64)  # 64-bit addresses: a row times its stride may pass 2**31
    first = tl.program_id(1) * BLOCK_N
    rows = (first + tl.arange(0, BLOCK_N)).to(tl.int64)
    cols = tl.arange(0, BLOCK_P)
    col_ok = cols < proj_size
    n_steps = tl.load(lengths_ptr + first)
    for back in range(0, n_steps):
        t = n_steps - 1 - back
        step = tl.zeros((BLOCK_N,), dtype=tl.int32) + t  # t per row: masks are tensors
        has_before, at_first = (step > 0)[:, None], (step == 0)[:, None]
        row_ok = rows < tl.load(batch_sizes_ptr + t)
        here = tl.load(offsets_ptr + t) + rows
        before = tl.load(offsets_ptr + tl.maximum(t - 1, 0)) + rows
        out_ok = row_ok[:, None] & col_ok[None, :]
        kept_here = trace_ptr + direction * s_t_k + here * s_t_n
        d_h_tile = d_h_ptr + direction * s_dh_k + here[:, None] * s_dh_n + cols[None, :]
        d_h = tl.load(d_h_tile, mask=out_ok, other=0.0)
        if HAS_PROJ_CLIP:
            h_raw = tl.load(kept_here[:, None] + 6 * hidden_size + cols[None, :], mask=out_ok, other=0.0)
            d_h = _clip_gradient(d_h, h_raw, proj_clip, HAS_PROJ_CLIP)
            tl.store(d_h_tile, d_h, mask=out_ok)
        d_h_before = tl.zeros((BLOCK_N, BLOCK_P), dtype=tl.float32)
        for start in range(0, hidden_size, BLOCK_H):
            cells = start + tl.arange(0, BLOCK_H)
            cell_ok = cells < hidden_size
            tile_ok = row_ok[:, None] & cell_ok[None, :]
            w_p = w_proj_ptr + direction * s_p_k + cells[None, :] * s_p_h + cols[:, None]  # W_p^T: (P, cells)
            d_m = tl.dot(d_h, tl.load(w_p, mask=col_ok[:, None] & cell_ok[None, :], other=0.0), input_precision="ieee")
            kept = kept_here[:, None] + cells[None, :]
            gate_i = tl.load(kept, mask=tile_ok, other=0.0)
            gate_f = tl.load(kept + hidden_size, mask=tile_ok, other=0.0)
            gate_o = tl.load(kept + 2 * hidden_size, mask=tile_ok, other=0.0)
            gate_j = tl.load(kept + 3 * hidden_size, mask=tile_ok, other=0.0)
            cell_raw = tl.load(kept + 4 * hidden_size, mask=tile_ok, other=0.0)
            tanh_c = _tanh(_clip(cell_raw, cell_clip, HAS_CELL_CLIP))
            d_c_tile = d_c_ptr + direction * s_dc_k + rows[:, None] * s_dc_n + cells[None, :]
            d_c = tl.load(d_c_tile, mask=tile_ok, other=0.0) + d_m * gate_o * (1.0 - tanh_c * tanh_c)
            d_c = _clip_gradient(d_c, cell_raw, cell_clip, HAS_CELL_CLIP)
            kept_before = trace_ptr + direction * s_t_k + before[:, None] * s_t_n + 4 * hidden_size + cells[None, :]
            c_before = _clip(tl.load(kept_before, mask=tile_ok & has_before, other=0.0), cell_clip, HAS_CELL_CLIP)
            c_initial = tl.load(c0_ptr + direction * s_c0_k + rows[:, None] * s_c0_n + cells[None, :],
                                mask=tile_ok & at_first, other=0.0)
            c_prev = tl.where(has_before, c_before, c_initial)
            d_i = d_c * gate_j * gate_i * (1.0 - gate_i)
            d_f = d_c * c_prev * gate_f * (1.0 - gate_f)
            d_o = d_m * tanh_c * gate_o * (1.0 - gate_o)
            d_j = d_c * gate_i * (1.0 - gate_j * gate_j)
            d_gates = d_gates_ptr + direction * s_dg_k + here[:, None] * s_dg_n + cells[None, :]
            tl.store(d_gates, d_i, mask=tile_ok)
            tl.store(d_gates + hidden_size, d_f, mask=tile_ok)
            tl.store(d_gates + 2 * hidden_size, d_o, mask=tile_ok)
            tl.store(d_gates + 3 * hidden_size, d_j, mask=tile_ok)
            tl.store(d_c_tile, d_c * gate_f, mask=tile_ok)
            w_h = w_hidden_ptr + direction * s_w_k + cols[None, :] * s_w_p + cells[:, None]  # W_h^T: (cells, P)
            w_ok = cell_ok[:, None] & col_ok[None, :]
            d_h_before += tl.dot(d_i, tl.load(w_h, mask=w_ok, other=0.0), input_precision="ieee")
            d_h_before += tl.dot(d_f, tl.load(w_h + hidden_size, mask=w_ok, other=0.0), input_precision="ieee")
            d_h_before += tl.dot(d_o, tl.load(w_h + 2 * hidden_size, mask=w_ok, other=0.0), input_precision="ieee")
            d_h_before += tl.dot(d_j, tl.load(w_h + 3 * hidden_size, mask=w_ok, other=0.0), input_precision="ieee")
        before_tile = d_h_ptr + direction * s_dh_k + before[:, None] * s_dh_n + cols[None, :]
        before_ok = out_ok & has_before
        tl.store(before_tile, tl.load(before_tile, mask=before_ok, other=0.0) + d_h_before, mask=before_ok)
        d_h0 = d_h0_ptr + direction * s_d0_k + rows[:, None] * s_d0_n + cols[None, :]
        tl.store(d_h0, d_h_before, mask=out_ok & at_first)
        tl.debug_barrier()  # the next (earlier) step reads what this one wrote from other threads
