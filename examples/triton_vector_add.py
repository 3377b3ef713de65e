"""An example user kernel for `kind: callable`: Triton's vector add, out = x + y, memory-bound.

Use it in a sweep (`config/sim-attention.yaml` has it on the simulator, `config/h200.yaml` on the H200):

    kernel:
      kind: callable
      target: examples.triton_vector_add:make_vector_add   # or examples/triton_vector_add.py:make_vector_add
      args: {n: 67108864}
      flops: 67108864          # one add per element
      bytes: 805306368         # x and y read, out written: 3 x 4 bytes per element (fp32)
      dtype: fp32

fingrav calls `make_vector_add(**args)` with the measured GPU current and its own stream current; the factory
allocates the inputs there and returns a function of no arguments that launches the kernel once on the current
stream (torch's, which Triton launches on), so that fingrav can capture it in a CUDA graph and replay it.

Triton and torch are imported when the factory runs, never at import: the simulator (which imports the module to
check the target but never calls the factory) and `fingrav` itself work without them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

BLOCK = 1024

# set by _kernel(): module globals, so that the jit function resolves `tl` as a global (Triton's rule)
triton: Any = None
tl: Any = None
_KERNEL: Any = None


def _kernel() -> Any:
    """The jit-compiled add kernel (built once; compiled by Triton at its first launch)."""
    global triton, tl, _KERNEL
    if _KERNEL is not None:
        return _KERNEL
    triton = importlib.import_module("triton")
    tl = importlib.import_module("triton.language")

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):  # noqa: N803 - Triton's convention
        pid = tl.program_id(axis=0)
        offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x + y, mask=mask)

    _KERNEL = add_kernel
    return _KERNEL


def make_vector_add(n: int = 1 << 24, block: int = BLOCK) -> Callable[[], None]:
    """Allocate x, y (random fp32, n elements) and out on the current GPU; return launch(): out = x + y, once, on
    the current stream. Work per launch: n flop, 12 n bytes."""
    import torch

    if int(n) <= 0 or int(block) <= 0:
        raise ValueError(f"n={n} and block={block} must be positive")
    n, block = int(n), int(block)
    device = torch.device("cuda", torch.cuda.current_device())
    x = torch.randn(n, device=device, dtype=torch.float32)
    y = torch.randn(n, device=device, dtype=torch.float32)
    out = torch.empty_like(x)
    kernel = _kernel()
    grid = (triton.cdiv(n, block),)

    def launch() -> None:
        kernel[grid](x, y, out, n, BLOCK_SIZE=block)

    return launch
