"""The examples a newcomer starts from keep working: examples/cora.py, shortened."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

pytest.importorskip("torch_geometric.nn")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_cora_example_trains_every_model_and_compiles_it_without_a_graph_break(capsys):
    cora = _load("cora")
    torch._dynamo.reset()
    assert cora.main(["--seeds", "1", "--epochs", "3"]) == 0
    table = capsys.readouterr().out
    for model in ("GCN", "GAT (edge_dim=1)", "SAGE"):
        row = next(line for line in table.splitlines() if line.startswith(f"| {model} |"))
        assert "no graph break" in row, row  # compiled with fullgraph=True: a break raises
        assert row.count("±") == 2, row  # gsparse and PyG both trained


def test_the_cora_example_builds_the_same_graph_with_and_without_num_nodes():
    data, x, edge_index, edge_attr = _load("cora").load_cora()
    import gsparse

    given = gsparse.Graph.from_edge_index(edge_index, num_nodes=data.num_nodes)
    inferred = gsparse.Graph.from_edge_index(edge_index)
    assert (inferred.num_src, inferred.num_dst) == (given.num_src, given.num_dst) == (2708, 2708)
    assert torch.equal(inferred.edge_index, given.edge_index)
    assert edge_attr.shape == (edge_index.shape[1], 1) and bool(torch.isfinite(edge_attr).all())
    assert torch.allclose(x.sum(1)[x.sum(1) > 0], torch.ones(1))  # row-normalised features
