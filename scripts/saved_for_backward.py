"""Bytes a 2-layer model's forward keeps for its backward (unique storages), on the CPU.

    PYTHONPATH=src python3 scripts/saved_for_backward.py

A random graph of 20,000 nodes and 200,000 edges, 128 input features, hidden 64, 16
classes; gsparse's GCNConv, SAGEConv and GATConv (4 heads). Counted with
``torch.autograd.graph.saved_tensors_hooks``: every tensor any autograd node saves.
"""
import torch, gsparse
from gsparse import nn as gnn
torch.manual_seed(0)
N, E, F, H, C = 20000, 200000, 128, 64, 16
src = torch.randint(0, N, (E,)); dst = torch.randint(0, N, (E,))
g = gsparse.Graph.from_edge_index(torch.stack([src, dst]), num_src=N, num_dst=N)
x = torch.randn(N, F)
def model(kind):
    if kind == "gcn": return gnn.GCNConv(F, H), gnn.GCNConv(H, C)
    if kind == "sage": return gnn.SAGEConv(F, H), gnn.SAGEConv(H, C)
    if kind == "gat": return gnn.GATConv(F, H // 4, heads=4), gnn.GATConv(H, C, heads=1)
for kind in ("gcn", "sage", "gat"):
    c1, c2 = model(kind)
    seen = {}
    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = c2(torch.relu(c1(x, g)), g)
    print(f"{kind}: {sum(seen.values()) / 2**20:.1f} MiB saved for backward ({len(seen)} storages)")
