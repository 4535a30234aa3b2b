"""Every bad operator input gets an error that names the argument and what was wrong."""

from __future__ import annotations

import pytest
import torch

import gsparse

G = gsparse.Graph.from_edge_index(torch.tensor([[0, 1, 2], [1, 2, 1]]), num_src=3, num_dst=4)
X = torch.randn(3, 4)  # source nodes
V = torch.randn(4, 4)  # destination nodes
W = torch.randn(3, 4)  # edges


@pytest.mark.parametrize("call, error, message", [
    (lambda: gsparse.gspmm("graph", "mul", "sum", X, W), TypeError, "g must be a gsparse.Graph, got str"),
    (lambda: gsparse.gspmm(G, "pow", "sum", X, W), ValueError, r"op must be one of \('add'.*got 'pow'"),
    (lambda: gsparse.gspmm(G, "dot", "sum", X, W), ValueError, "op must be one of"),
    (lambda: gsparse.gspmm(G, "mul", "prod", X, W), ValueError, "reduce must be one of"),
    (lambda: gsparse.gspmm(G, "mul", "sum", None, W), TypeError, "lhs must be a torch.Tensor, got NoneType"),
    (lambda: gsparse.gspmm(G, "mul", "sum", X, None), TypeError, "rhs must be a torch.Tensor, got NoneType"),
    (lambda: gsparse.gspmm(G, "mul", "sum", V, W), ValueError, "lhs has 4 rows but the graph has 3 source nodes"),
    (lambda: gsparse.gspmm(G, "mul", "sum", X, torch.randn(5, 4)), ValueError,
     "rhs has 5 rows but the graph has 3 edges"),
    (lambda: gsparse.gspmm(G, "mul", "sum", X.long(), W), TypeError, "lhs must have a floating dtype"),
    (lambda: gsparse.gspmm(G, "mul", "sum", X.double(), W), TypeError,
     "lhs and rhs must have the same dtype, got torch.float64 and torch.float32"),
    (lambda: gsparse.gspmm(G, "mul", "sum", X, torch.randn(3, 3)), ValueError,
     r"feature shapes of lhs and rhs do not broadcast: \[4\] and \[3\]"),
    (lambda: gsparse.gspmm(G, "copy_lhs", "sum", torch.tensor(1.0)), ValueError, "lhs must have at least one dimension"),
    (lambda: gsparse.gspmm(G, "copy_lhs", "sum", X.to("meta")), ValueError, "lhs is on meta but the graph is on cpu"),
    (lambda: gsparse.gsddmm(G, "add", X, V, "u", "w"), ValueError, "rhs_target must be one of"),
    (lambda: gsparse.gsddmm(G, "add", X, X, "u", "v"), ValueError,
     "rhs has 3 rows but the graph has 4 destination nodes"),
    (lambda: gsparse.gsddmm(G, "add", W, V, "e", "v"), None, None),
    (lambda: gsparse.gsddmm(G, "dot", X, torch.randn(4, 5), "u", "v"), ValueError,
     r"dot needs equal last dimensions, got lhs \[4\] and rhs \[5\]"),
    (lambda: gsparse.gsddmm(G, "max", X, V), ValueError, "op must be one of"),
    (lambda: gsparse.edge_softmax(G, W, norm_by="both"), ValueError, "norm_by must be one of"),
    (lambda: gsparse.edge_softmax(G, X[:2]), ValueError, "logits has 2 rows but the graph has 3 edges"),
    (lambda: gsparse.edge_softmax(G, W.int()), TypeError, "logits must have a floating dtype"),
    # a schedule that is not one is refused on every device, also where none is used
    (lambda: gsparse.gspmm(G, "mul", "sum", X, W, schedule="fast"), TypeError,
     r"schedule must be a g-SpMM schedule \(gsparse.SpmmOnePass, .*\) or None, got 'fast'"),
    (lambda: gsparse.gspmm(G, "mul", "sum", X, W, schedule=gsparse.SddmmEdge()), TypeError,
     "schedule must be a g-SpMM schedule"),
    (lambda: gsparse.gsddmm(G, "dot", X, V, schedule={"lanes": 8}), TypeError,
     r"schedule must be a g-SDDMM schedule \(gsparse.SddmmEdge, .*got \{'lanes': 8\}"),
    (lambda: gsparse.gspmm(G, "mul", "sum", X, W, schedule=gsparse.SpmmOnePass()), None, None),
])
def test_bad_operator_inputs_are_named(call, error, message):
    if error is None:
        call()
        return
    with pytest.raises(error, match=message):
        call()
