"""A digest of what the layers compute and launch on fresh sampled blocks, to prove that a
change to their host path changed no result.

GCN (plain, improved, with edge weights, without self loops), GAT (plain, one head
averaged, one channel per head, with edge features filled by mean and by max) and SAGE
(mean, max, widening) run forward and backward on blocks from ``Graph.from_block``
(sorted by destination and not, with some self loops and rows of every length up to the
fanout), three seeds each. Two sections:

- ``cpu``: on the PyTorch-ops backend, the hash of each output and gradient;
- ``launches``: through the CUDA backend's host path on CPU tensors (``tests/cuda_path.py``),
  kernel storage poisoned, every launch in order: kernel, program source hash, grid,
  block, shared memory and every argument (tensors by dtype, shape and content hash).

The same kernels with the same arguments compute the same results on a GPU. Run from the
repository root: ``PYTHONPATH=src python scripts/block_layer_digest.py out.json
[--compare before.json]``; the comparison prints the entries that differ and
``N entries, M differ``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cuda_path import cuda_path_on_cpu  # noqa: E402
from recording import RecordingLoader  # noqa: E402

from gsparse import Graph, nn as gnn  # noqa: E402
from gsparse.kernels.memory import poisoned  # noqa: E402

FEATURES = 16
# name: (layer, bipartite block, extra argument: "weights" (GCN edge_weight), "features" (GAT edge_attr))
LAYERS = {
    "gcn": (lambda: gnn.GCNConv(FEATURES, 8), False, None),
    "gcn-improved": (lambda: gnn.GCNConv(FEATURES, 8, improved=True), False, None),
    "gcn-weights": (lambda: gnn.GCNConv(FEATURES, 8), False, "weights"),
    "gcn-no-loops": (lambda: gnn.GCNConv(FEATURES, 8, add_self_loops=False), False, None),
    "gat": (lambda: gnn.GATConv(FEATURES, 4, heads=2), False, None),
    "gat-one-head": (lambda: gnn.GATConv(FEATURES, 4, heads=1, concat=False), False, None),
    "gat-one-channel": (lambda: gnn.GATConv(FEATURES, 1, heads=3), False, None),
    "gat-edge-mean": (lambda: gnn.GATConv(FEATURES, 4, heads=2, edge_dim=3), False, "features"),
    "gat-edge-max": (lambda: gnn.GATConv(FEATURES, 4, heads=2, edge_dim=3, fill_value="max"), False,
                     "features"),
    "sage": (lambda: gnn.SAGEConv(FEATURES, 8), True, None),
    "sage-max": (lambda: gnn.SAGEConv(FEATURES, 8, aggr="max"), True, None),
    "sage-wide": (lambda: gnn.SAGEConv(FEATURES, 32), True, None),
}


def _digest(value: object) -> object:
    if isinstance(value, torch.Tensor):
        data = value.detach().contiguous().cpu().numpy().tobytes()
        return [str(value.dtype), list(value.shape), hashlib.sha256(data).hexdigest()[:16]]
    return repr(value)


class _Loader(RecordingLoader):
    """A recording loader that also logs each launch with its program's source hash."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[list[object]] = []

    def kernel(self, program, name: str, device_index: int):
        kernel = super().kernel(program, name, device_index)
        source = hashlib.sha256(program.source.encode()).hexdigest()[:16]
        prepare = kernel.prepare

        def logged_prepare(grid, block, args, *, shared_bytes=0, context=""):
            launch = prepare(grid, block, args, shared_bytes=shared_bytes, context=context)

            def run(*operands):
                launch(*operands)
                record = self.launches[name][-1]
                self.log.append([name, source, repr(record.grid), repr(record.block), record.shared_bytes,
                                 {p: _digest(v) for p, v in record.args.items()}])

            return run

        kernel.prepare = logged_prepare
        return kernel


def _block(seed: int, bipartite: bool, dst_sorted: bool) -> Graph:
    """A two-hop outer block: 24 seeds with up to 5 sources, their sources with up to 3;
    the first 7 edges are self loops."""
    gen = torch.Generator().manual_seed(seed)
    seeds, fanouts = 24, (5, 3)
    n1 = seeds * (1 + fanouts[0])
    n0 = n1 * (1 + fanouts[1])
    degree = torch.cat([torch.randint(0, fanouts[0] + 1, (seeds,), generator=gen),
                        torch.randint(0, fanouts[1] + 1, (n1 - seeds,), generator=gen)])
    dst = torch.repeat_interleave(torch.arange(n1), degree)
    src = torch.randint(0, n0, (dst.numel(),), generator=gen)
    src[:7] = dst[:7]
    edge_index = torch.stack([src, dst])
    if not dst_sorted:
        edge_index = edge_index[:, torch.randperm(edge_index.shape[1], generator=gen)]
    return Graph.from_block(edge_index, num_src=n0, num_dst=n1 if bipartite else n0,
                            dst_sorted=dst_sorted, max_degree=max(fanouts))


def _run() -> dict[str, object]:
    out: dict[str, object] = {}
    for name, (make, bipartite, extra) in LAYERS.items():
        for seed in range(3):
            for dst_sorted in (True, False):
                torch.manual_seed(seed)
                layer = make()
                g = _block(seed, bipartite, dst_sorted)
                x = torch.randn(g.num_src, FEATURES, requires_grad=True)
                if bipartite:
                    y = layer((x, x[: g.num_dst]), g)
                else:
                    args = {"weights": [torch.rand(g.num_edges) + 0.1],
                            "features": [torch.randn(g.num_edges, 3)]}.get(extra, [])
                    y = layer(x, g, *args)
                grads = torch.autograd.grad((y * y).sum(), [x, *layer.parameters()])
                out[f"{name} seed {seed} dst_sorted {dst_sorted}"] = [_digest(t) for t in (y, *grads)]
    return out


def digest() -> dict[str, object]:
    torch.set_num_threads(1)
    result: dict[str, object] = {"cpu": _run()}
    loader = _Loader()
    with cuda_path_on_cpu(loader), poisoned():
        _run()
    result["launches"] = {f"{i:04d}": entry for i, entry in enumerate(loader.log)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="where to write the digest (JSON)")
    parser.add_argument("--compare", help="an earlier digest to compare with")
    args = parser.parse_args()
    result = digest()
    Path(args.out).write_text(json.dumps(result, indent=1, sort_keys=True))
    if args.compare:
        before = json.loads(Path(args.compare).read_text())
        entries = differ = 0
        for section in ("cpu", "launches"):
            keys = sorted(set(before[section]) | set(result[section]))
            for key in keys:
                entries += 1
                if before[section].get(key) != result[section].get(key):
                    differ += 1
                    print(f"{section} {key}: differs")
        print(f"{entries} entries, {differ} differ")


if __name__ == "__main__":
    main()
