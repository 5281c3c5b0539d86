"""The Triton kernel: one program per (row, block of columns) of the gated input.

Inputs are loaded in their dtype, computed in float32 and rounded once on store.
``ACT`` is a compile-time constant, so each activation is its own specialised
kernel with no branch at run time.
"""

from __future__ import annotations

import triton
import triton.language as tl

SILU = 0
GELU = 1
GELU_TANH = 2


@triton.jit
def gated_kernel(
    out_ptr,
    x_ptr,
    d,
    x_row_stride,
    out_row_stride,
    ACT: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """out[row, c] = act(x[row, c]) * x[row, d + c] for the columns of this program."""
    row = tl.program_id(0).to(tl.int64)  # row * stride may pass 2**31 on large inputs
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < d
    x_row = x_ptr + row * x_row_stride
    a = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(x_row + d + cols, mask=mask, other=0.0).to(tl.float32)
    if ACT == 0:
        act = a * tl.sigmoid(a)
    elif ACT == 1:
        act = 0.5 * a * (1.0 + tl.math.erf(a * 0.7071067811865476))
    else:
        # 0.5 * a * (1 + tanh(u)) == a * sigmoid(2u): no cancellation for negative a.
        u = 0.7978845608028654 * (a + 0.044715 * a * a * a)
        act = a * tl.sigmoid(2.0 * u)
    result = (act * b).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + row * out_row_stride + cols, result, mask=mask)


def launch(out_2d, x_2d, act: int) -> None:
    """Run the kernel over 2-D views: x [rows, 2d] and out [rows, d], unit column stride."""
    rows, d = out_2d.shape
    block = min(1024, triton.next_power_of_2(max(d, 16)))
    grid = (rows, triton.cdiv(d, block))
    gated_kernel[grid](
        out_2d, x_2d, d, x_2d.stride(0), out_2d.stride(0), ACT=act, BLOCK=block
    )
