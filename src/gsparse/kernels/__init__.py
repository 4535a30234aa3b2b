"""The generated kernels: one package per operator, each with the same modules.

- ``task``: what a call computes and the operand facts the code depends on (a plan's key);
- ``schedule``: one frozen dataclass per skeleton (:mod:`.schedule` is their base);
- ``space``: the schedules worth measuring for a task (:class:`.space.Space`), and for
  g-SpMM and g-SDDMM those of them LO-SpMM's constraints keep on a graph
  (``pruned_space``, :mod:`.pruning`);
- ``default``: the hand rule, a function of (task, graph statistics, target);
- ``codegen``: the CUDA source, pure, one module per skeleton, fixed device code in
  ``.cu`` files;
- ``plan``: launches prepared once per graph, task and schedule.

Shared by all: :mod:`.source` (C types, shipped device code, kernel signatures bound by
name, programs), :mod:`.operands` (layouts, vector widths), :mod:`.memory` (output
storage), :mod:`.pruning` (the constraints that prune a space before it is measured).
Only :mod:`gsparse.runtime` below touches CUDA.
"""

from . import sddmm, softmax, spmm

# The operators with generated kernels, by name: packages with the same interface.
OPERATORS = {"spmm": spmm, "sddmm": sddmm, "softmax": softmax}
