"""A mini-batch's input features: gathered from the feature table with dropout in one pass."""

from __future__ import annotations

import torch
from torch import Tensor

from .. import _gather_features as gather
from .._checks import FLOAT_DTYPES
from .._ops import direct_call_ok

__all__ = ["gather_features"]


def gather_features(x: Tensor, index: Tensor, p: float = 0.0, training: bool = True, *,
                    generator: torch.Generator | None = None) -> Tensor:
    """The rows ``x[index]`` of a feature table, with dropout of probability ``p`` applied
    as they are gathered: ``F.dropout(x[index], p, training)`` in one pass.

    A mini-batch step reads its nodes' features out of the whole table (``x[n_id]``) and
    usually drops out over them first. PyTorch does that in two kernels, which write the
    batch's features, read them back and write them again beside a mask; on a GPU this is
    one kernel that reads and writes each element once and stores no mask. Each kept
    element is scaled by ``1 / (1 - p)``, as :func:`torch.nn.functional.dropout` does.

    The mask is a counter-based random function (Philox4x32-10) of a seed, the output row
    and the feature, the seed drawn from ``generator`` (default: the device's default
    generator) on every call. The backward pass makes the same mask again, so nothing is
    kept for it but the seed, and a step captured in a CUDA graph draws a new mask on every
    replay. For one seed the CPU and the GPU drop the same elements; the masks are not
    those of :func:`torch.nn.functional.dropout`.

    Args:
        x: ``[N, *]`` floating features (float16, bfloat16, float32 or float64), on the CPU
            or a CUDA device. Its rows may lie any stride apart (a column slice of a wider
            table is read in place); each row's elements must be dense, else ``x`` is
            copied first.
        index: ``[B]`` int32 or int64 row ids in ``[0, N)``, on ``x``'s device. On a GPU
            they are checked by the kernel itself (an id out of range stops it with a
            device-side assertion that prints the id), so the host never waits.
        p: probability of dropping an element, in ``[0, 1]``.
        training: apply the dropout (``False``: only gather).
        generator: the random generator the seed is drawn from, on ``x``'s device. A step
            captured in a CUDA graph must use the default generator, or register its own
            with the graph.

    Returns:
        ``[B, *]`` in ``x``'s dtype, on its device. Differentiable with respect to ``x``
        (the output's gradient, dropped by the same mask, is summed into the rows it came
        from).

    Example::

        x = gsparse.nn.gather_features(features, n_id, p=0.5, training=model.training)
    """
    _check(x, index, p, training, generator)
    if not gather.rows_are_dense(x):
        x = x.contiguous()
    drop = training and p > 0
    seed = None
    if drop and p < 1:
        seed = torch.randint(-2**63, 2**63 - 1, (1,), dtype=torch.int64, device=x.device,
                             generator=generator)
    run = gather.gather if direct_call_ok(x) else gather.gather_op
    out = run(x, index, seed, float(p))
    # everything drops: F.dropout's zeros, NaN and infinity times 0 included
    return out * 0 if drop and p == 1 else out


def _check(x: object, index: object, p: object, training: object, generator: object) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"x must have a floating dtype {FLOAT_DTYPES}, got {x.dtype}")
    if x.dim() < 1:
        raise ValueError("x must have at least one dimension ([N, ...]), got a scalar")
    if not isinstance(index, Tensor):
        raise TypeError(f"index must be a torch.Tensor, got {type(index).__name__}")
    if index.dtype not in (torch.int32, torch.int64) or index.dim() != 1:
        raise TypeError(f"index must be a 1-D int32 or int64 tensor, got a {index.dim()}-D {index.dtype} one")
    if index.device != x.device:
        raise ValueError(f"index is on {index.device} but x is on {x.device}")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be a probability in [0, 1], got {p!r}")
    if not isinstance(training, bool):
        raise TypeError(f"training must be a bool, got {type(training).__name__}")
    if generator is not None and (not isinstance(generator, torch.Generator)
                                  or generator.device.type != x.device.type):
        raise ValueError(f"generator must be a torch.Generator on {x.device.type}, got {generator!r}")
    # on the CPU, before index_select's own error; not while tracing (it reads values)
    if x.device.type != "cuda" and not torch.compiler.is_compiling():
        outside = (index < 0) | (index >= x.shape[0])
        if outside.any():
            bad = int(outside.nonzero()[0])
            raise IndexError(f"index[{bad}] = {int(index[bad])} is out of range [0, {x.shape[0]}) "
                             f"(x has {x.shape[0]} rows)")
