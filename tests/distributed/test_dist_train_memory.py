"""What the distributed training keeps for the backward: the fused ReLU-dropout, and the
self loops built without caching the local graph's edge list (one process, no group)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import gsparse
from gsparse.distributed import train as dist_train
from gsparse.distributed.dist_graph import _EdgeSet


def _relu_dropout_reference(h: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.native_dropout(F.relu(h), p, True)[0]  # differentiated through its mask


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_fused_relu_dropout_is_relu_then_dropout_with_the_same_mask(p):
    h0 = torch.randn(300, 17, dtype=torch.float64)
    h0[::7, ::3] = 0.0  # the ReLU's kink: no gradient there, as torch's ReLU
    grad = torch.randn(300, 17, dtype=torch.float64)

    ref_in = h0.clone().requires_grad_()
    want = _relu_dropout_reference(ref_in, p, seed=5)
    want.backward(grad)

    leaf = h0.clone().requires_grad_()
    torch.manual_seed(5)
    got = dist_train._ReLUDropout.apply(leaf * 1.0, p)
    got.backward(grad)
    assert_close(got, want)
    assert_close(leaf.grad, ref_in.grad)
    assert 0 < int((got == 0).sum()) < got.numel()


def _saved_bytes_by_shape(model, x, graph) -> dict[tuple[int, ...], int]:
    """Bytes of the distinct storages autograd saves during a forward, by tensor shape; the
    input features, alive anyway, left out."""
    seen: dict[int, tuple[tuple[int, ...], int]] = {}

    def pack(t):
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = (tuple(t.shape), storage.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x, graph)
    seen.pop(x.untyped_storage().data_ptr(), None)
    by_shape: dict[tuple[int, ...], int] = {}
    for shape, nbytes in seen.values():
        by_shape[shape] = by_shape.get(shape, 0) + nbytes
    return by_shape


def test_the_training_model_keeps_one_hidden_tensor_for_the_backward():
    g = gsparse.Graph.from_edge_index(torch.randint(0, 500, (2, 4000)), num_nodes=500)
    torch.manual_seed(0)
    model = dist_train.GCN(12, 64, 5)
    x = torch.randn(500, 12)
    saved = _saved_bytes_by_shape(model.train(), x, g)
    # The ReLU's output, the dropout's mask and its output, unfused: 4 + 1 + 4 bytes per entry.
    assert saved[(500, 64)] == 500 * 64 * 4
    model.eval()
    assert_close(model(x, g), model.conv2(F.relu(model.conv1(x, g)), g))


def test_recomputing_the_first_layer_keeps_its_propagation_out_of_the_saved_tensors():
    g = gsparse.Graph.from_edge_index(torch.randint(0, 500, (2, 4000)), num_nodes=500)
    x = torch.randn(500, 12)
    saved = {}
    for recompute in (False, True):
        torch.manual_seed(0)
        model = dist_train.GCN(12, 64, 5, recompute_first=recompute).train()
        saved[recompute] = _saved_bytes_by_shape(model, x, g)
    assert saved[False].get((500, 12)) == 500 * 12 * 4  # the first layer's propagated input
    assert (500, 12) not in saved[True]
    assert saved[True][(500, 64)] == saved[False][(500, 64)]


def test_recomputing_the_first_layer_trains_the_same():
    g = gsparse.Graph.from_edge_index(torch.randint(0, 300, (2, 3000)), num_nodes=300)
    x, y = torch.randn(300, 12), torch.randint(0, 5, (300,))
    losses = {}
    for recompute in (False, True):
        torch.manual_seed(0)
        model = dist_train.GCN(12, 32, 5, recompute_first=recompute).train()
        opt = torch.optim.Adam(model.parameters(), lr=0.05)
        losses[recompute] = []
        for _ in range(4):
            opt.zero_grad()
            loss = F.cross_entropy(model(x, g), y)
            loss.backward()
            opt.step()
            losses[recompute].append(loss.item())
    assert losses[True] == losses[False] and losses[True][-1] < losses[True][0]


def test_dropout_outside_its_range_is_refused():
    with pytest.raises(ValueError, match=r"dropout must lie in \[0, 1\), got 1.0"):
        dist_train.GCN(4, 8, 2, dropout=1.0)


def test_self_loops_of_a_share_leave_the_local_edge_list_uncached():
    rowptr = torch.tensor([0, 2, 3, 6])
    col = torch.tensor([0, 4, 1, 2, 2, 0])  # every row has a loop (row 2 two); sources 3, 4: halo
    eid = torch.tensor([5, 0, 3, 1, 4, 2])  # CSR position -> local edge id
    local = gsparse.Graph.from_csr(rowptr, col, 5, eid=eid)
    edges, origin, loop_edge = _EdgeSet(local, 3, 2).self_loops
    assert "_coo" not in local.__dict__
    assert origin.dtype == torch.int32
    # Each row: its edges that are not loops, in CSR order, then one loop (ids >= 6 added).
    assert edges.local.rowptr.tolist() == [0, 2, 3, 5]
    assert edges.local.col.tolist() == [4, 0, 1, 0, 2]
    assert origin.tolist() == [0, 6, 7, 2, 8]
    assert loop_edge.tolist() == [5, 3, 4]  # the last loop of row 2 by edge id: ids 1 and 4
