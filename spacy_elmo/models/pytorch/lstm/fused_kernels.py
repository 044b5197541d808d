"""The Triton kernels of :mod:`.fused_step` (imported at its first use: Triton is optional)."""
import triton
import triton.language as tl


@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def _tanh(x):
    return 2.0 * _sigmoid(2.0 * x) - 1.0


@triton.jit
def gates_and_cell(
    gate_inputs_ptr, h_ptr, c_prev_ptr, w_hidden_ptr, c_ptr, m_ptr,
    n_rows, proj_size, hidden_size,
    s_gi_k, s_gi_n, s_h_k, s_h_n, s_cp_k, s_cp_n, s_w_k, s_w_p, s_c_k, s_c_n,
    cell_clip,
    HAS_STATE: tl.constexpr, HAS_CLIP: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr,
):
    direction = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    cells = tl.program_id(2) * BLOCK_H + tl.arange(0, BLOCK_H)
    row_ok = rows < n_rows
    cell_ok = cells < hidden_size
    tile_ok = row_ok[:, None] & cell_ok[None, :]
    gi = gate_inputs_ptr + direction * s_gi_k + rows[:, None] * s_gi_n + cells[None, :]
    acc_i = tl.load(gi, mask=tile_ok, other=0.0).to(tl.float32)
    acc_f = tl.load(gi + hidden_size, mask=tile_ok, other=0.0).to(tl.float32)
    acc_o = tl.load(gi + 2 * hidden_size, mask=tile_ok, other=0.0).to(tl.float32)
    acc_j = tl.load(gi + 3 * hidden_size, mask=tile_ok, other=0.0).to(tl.float32)
    if HAS_STATE:
        for start in range(0, proj_size, BLOCK_K):
            reduce = start + tl.arange(0, BLOCK_K)
            reduce_ok = reduce < proj_size
            h = tl.load(
                h_ptr + direction * s_h_k + rows[:, None] * s_h_n + reduce[None, :],
                mask=row_ok[:, None] & reduce_ok[None, :], other=0.0,
            )
            w = w_hidden_ptr + direction * s_w_k + reduce[:, None] * s_w_p + cells[None, :]
            w_ok = reduce_ok[:, None] & cell_ok[None, :]
            acc_i += tl.dot(h, tl.load(w, mask=w_ok, other=0.0), input_precision="ieee")
            acc_f += tl.dot(h, tl.load(w + hidden_size, mask=w_ok, other=0.0), input_precision="ieee")
            acc_o += tl.dot(h, tl.load(w + 2 * hidden_size, mask=w_ok, other=0.0), input_precision="ieee")
            acc_j += tl.dot(h, tl.load(w + 3 * hidden_size, mask=w_ok, other=0.0), input_precision="ieee")
    cell = _sigmoid(acc_i) * _tanh(acc_j)
    if HAS_STATE:
        c_prev = tl.load(
            c_prev_ptr + direction * s_cp_k + rows[:, None] * s_cp_n + cells[None, :], mask=tile_ok, other=0.0
        ).to(tl.float32)
        cell += _sigmoid(acc_f) * c_prev
    if HAS_CLIP:
        cell = tl.minimum(tl.maximum(cell, -cell_clip), cell_clip)
    out = direction * s_c_k + rows[:, None] * s_c_n + cells[None, :]
    tl.store(c_ptr + out, cell.to(c_ptr.dtype.element_ty), mask=tile_ok)
    tl.store(m_ptr + out, (_sigmoid(acc_o) * _tanh(cell)).to(m_ptr.dtype.element_ty), mask=tile_ok)


@triton.jit
def projection(
    m_ptr, w_proj_ptr, h_ptr,
    n_rows, hidden_size, proj_size,
    s_m_k, s_m_n, s_w_k, s_w_h, s_h_k, s_h_n,
    proj_clip,
    HAS_CLIP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_K: tl.constexpr,
):
    direction = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.program_id(2) * BLOCK_P + tl.arange(0, BLOCK_P)
    row_ok = rows < n_rows
    col_ok = cols < proj_size
    acc = tl.zeros((BLOCK_N, BLOCK_P), dtype=tl.float32)
    for start in range(0, hidden_size, BLOCK_K):
        reduce = start + tl.arange(0, BLOCK_K)
        reduce_ok = reduce < hidden_size
        m = tl.load(
            m_ptr + direction * s_m_k + rows[:, None] * s_m_n + reduce[None, :],
            mask=row_ok[:, None] & reduce_ok[None, :], other=0.0,
        )
        w = tl.load(
            w_proj_ptr + direction * s_w_k + reduce[:, None] * s_w_h + cols[None, :],
            mask=reduce_ok[:, None] & col_ok[None, :], other=0.0,
        )
        acc += tl.dot(m, w, input_precision="ieee")
    if HAS_CLIP:
        acc = tl.minimum(tl.maximum(acc, -proj_clip), proj_clip)
    tl.store(
        h_ptr + direction * s_h_k + rows[:, None] * s_h_n + cols[None, :],
        acc.to(h_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :],
    )
