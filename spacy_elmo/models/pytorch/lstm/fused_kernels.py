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
    gate_inputs_ptr, w_hidden_ptr, w_proj_ptr, h_ptr, c_ptr,
    batch_sizes_ptr, offsets_ptr, h_offsets_ptr, lengths_ptr,
    hidden_size, proj_size,
    s_gi_k, s_gi_n, s_w_k, s_w_p, s_p_k, s_p_h, s_h_k, s_h_n, s_c_k, s_c_n,
    cell_clip, proj_clip,
    HAS_CELL_CLIP: tl.constexpr, HAS_PROJ_CLIP: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_P: tl.constexpr,
):
    """Every step of one layer for ``BLOCK_N`` sequences of one direction.

    Sequences are independent, so a program owns its rows for the whole layer:
    ``c`` stays in its rows of ``c_ptr``, and ``h`` of step ``t - 1`` is read back
    from the rows step ``t - 1`` wrote (``h_offsets[t]``; ``h_offsets[0]`` points at
    the initial state). Step ``t``'s gate inputs start at row ``offsets[t]``. Per step and block of cells: the four gates from the
    gate inputs plus ``h W_h``, the cell and its clip, ``m = o * tanh(c)``, and
    ``m W_p`` summed over the blocks into the new ``h``, clipped and written at
    ``h_offsets[t + 1]``.
    """
    direction = tl.program_id(0)
    first = tl.program_id(1) * BLOCK_N
    rows = first + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, BLOCK_P)
    col_ok = cols < proj_size
    n_steps = tl.load(lengths_ptr + first)  # rows are sorted by length: the first is the longest
    for t in range(0, n_steps):
        row_ok = rows < tl.load(batch_sizes_ptr + t)
        h_prev = h_ptr + direction * s_h_k + (tl.load(h_offsets_ptr + t) + rows) * s_h_n
        gi_rows = gate_inputs_ptr + direction * s_gi_k + (tl.load(offsets_ptr + t) + rows) * s_gi_n
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
            cell = _sigmoid(acc_f) * tl.load(c_tile, mask=tile_ok, other=0.0) + _sigmoid(acc_i) * _tanh(acc_j)
            if HAS_CELL_CLIP:
                cell = tl.minimum(tl.maximum(cell, -cell_clip), cell_clip)
            tl.store(c_tile, cell, mask=tile_ok)
            m = tl.where(tile_ok, _sigmoid(acc_o) * _tanh(cell), 0.0)
            w_p = w_proj_ptr + direction * s_p_k + cells[:, None] * s_p_h + cols[None, :]
            h_new += tl.dot(m, tl.load(w_p, mask=cell_ok[:, None] & col_ok[None, :], other=0.0), input_precision="ieee")
        if HAS_PROJ_CLIP:
            h_new = tl.minimum(tl.maximum(h_new, -proj_clip), proj_clip)
        h_out = h_ptr + direction * s_h_k + (tl.load(h_offsets_ptr + t + 1) + rows) * s_h_n
        tl.store(h_out[:, None] + cols[None, :], h_new, mask=row_ok[:, None] & col_ok[None, :])
        tl.debug_barrier()  # the next step reads this step's h and c from other threads
