"""The code a newcomer starts from keeps working: README's quick start and examples/, shortened."""

from __future__ import annotations

import importlib.util
import re
import runpy
from pathlib import Path

import pytest
import torch

import gsparse
from gsparse.runtime import nvrtc_version

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
needs_nvrtc = pytest.mark.skipif(nvrtc_version() is None, reason="needs NVRTC")
# Cora's 7 classes: the largest holds 32% of the test nodes, so a model that learned
# nothing scores at most that.
ABOVE_CHANCE = 0.45


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _test_accuracy(out: str) -> float:
    return float(re.search(r"test accuracy:? ([0-9.]+)", out).group(1))


def _quick_start() -> str:
    """The Python block of README's "Quick start" section, as written."""
    section = (ROOT / "README.md").read_text().split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_the_readme_quick_start_runs_as_written_and_learns(capsys, tmp_path):
    code = _quick_start()
    assert code.count("range(200)") == 1
    script = tmp_path / "quick_start.py"
    script.write_text(code.replace("range(200)", "range(20)"))  # the rest as written
    torch.manual_seed(0)
    runpy.run_path(str(script), run_name="__main__")
    assert _test_accuracy(capsys.readouterr().out) > ABOVE_CHANCE


def test_the_full_batch_gcn_example_learns(capsys):
    assert _load("gcn_full_batch").main(["--epochs", "20"]) == 0
    assert _test_accuracy(capsys.readouterr().out) > ABOVE_CHANCE


def test_the_minibatch_sage_example_learns_and_reports_its_step_time(capsys):
    assert _load("minibatch_sage").main(["--epochs", "4"]) == 0
    out = capsys.readouterr().out
    assert _test_accuracy(out) > ABOVE_CHANCE
    assert re.search(r"[0-9.]+ ms per step \([0-9.]+ sampling, [0-9.]+ training\)", out), out


def test_the_minibatch_sampler_builds_blocks_of_real_edges_capped_at_the_fanout():
    data = gsparse.datasets.cora()
    # Without Cora's repeated edges, a pair repeated in a block is the sampler's doing.
    base = gsparse.Graph.from_edge_index(torch.unique(data.edge_index, dim=1), num_nodes=data.num_nodes)
    real = set(zip(*(ids.tolist() for ids in base.edges())))
    seeds = torch.tensor([5, 17, 2500, 0])
    nodes, blocks = _load("minibatch_sage").NeighborSampler(base, [3, 5], seed=1).sample(seeds)
    assert torch.equal(nodes[:4], seeds) and nodes.unique().numel() == nodes.numel()
    assert blocks[-1].num_dst == 4 and blocks[0].num_src == nodes.numel()
    for block, fanout in zip(blocks[::-1], [3, 5]):  # from the seeds outwards
        ids = nodes[: block.num_src]  # a block's sources: its destinations, then the nodes it reached
        src, dst = block.edges()
        assert {(int(ids[u]), int(ids[v])) for u, v in zip(src, dst)} <= real
        assert torch.unique(torch.stack([src, dst]), dim=1).shape[1] == block.num_edges
        assert torch.equal(block.in_degrees(), base.in_degrees()[ids[: block.num_dst]].clamp(max=fanout))
        assert block.sync_free  # built by Graph.from_block


def test_the_gat_example_compiles_without_a_graph_break_and_matches_eager(capsys):
    torch._dynamo.reset()
    args = ["--epochs", "1", "--repeats", "1", "--heads", "2", "--hidden", "4", "--backend", "aot_eager"]
    assert _load("gat_compile").main(args) == 0  # compiled with fullgraph=True: a break raises
    out = capsys.readouterr().out
    assert re.search(r"max \|output diff\| [0-9.e+-]+, max \|gradient diff\| [0-9.e+-]+", out), out
    assert re.search(r"eager [0-9.]+ ms, compiled [0-9.]+ ms", out), out


@needs_nvrtc
def test_the_schedule_example_prints_the_forced_kernel_and_its_resource_report(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("GSPARSE_CACHE_DIR", str(tmp_path))
    example = _load("schedule")
    assert example.main(["--features", "32"]) == 0
    out = capsys.readouterr().out
    assert f"forced              {example.FORCED}" in out
    assert f"// schedule {example.FORCED}: {example.FORCED.to_json()}" in out  # the source's header
    assert 'extern "C" __global__' in out and "\ngspmm(" in out
    assert re.search(r"forced .* gspmm: \d+ registers, \d+ B static shared memory, 0 B spill stores", out), out
    assert re.search(r"model's pick +r\d+\.", out) and re.search(r"hand rule's pick +r\d+\.", out)


@needs_nvrtc
def test_the_schedule_example_forces_a_schedule_given_as_json(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("GSPARSE_CACHE_DIR", str(tmp_path))
    split = gsparse.SpmmSplitRows(feature_lanes=16, edge_lanes=2, row_split=32)
    assert _load("schedule").main(["--no-source", "--target", "a100", "--schedule", split.to_json()]) == 0
    out = capsys.readouterr().out
    assert f"forced              {split}" in out and "built for sm_80" in out
    assert "gspmm_split: " in out and "gspmm_split_merge: " in out  # both kernels reported


def test_the_schedule_example_refuses_a_schedule_that_cannot_run_the_call(capsys):
    too_wide = gsparse.SpmmOnePass(feature_lanes=4, vector_width=8)  # rows of 3 float32 features
    with pytest.raises(SystemExit) as exit_:
        _load("schedule").main(["--features", "3", "--no-source", "--schedule", too_wide.to_json()])
    assert exit_.value.code == 2
    assert "--schedule cannot run this call" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.parametrize("name, args", [
    ("gcn_full_batch", ["--epochs", "30"]),
    ("minibatch_sage", ["--epochs", "4"]),
    ("gat_compile", ["--epochs", "30", "--repeats", "3"]),
    ("schedule", ["--no-source", "--repeats", "5"]),
])
def test_every_example_runs_on_a_gpu(name, args, capsys):
    torch._dynamo.reset()
    assert _load(name).main([*args, "--device", "cuda"]) == 0
    out = capsys.readouterr().out
    if name == "schedule":
        assert re.search(r"max \|diff\| from the CPU ([0-9.e+-]+)", out), out
    else:
        assert _test_accuracy(out) > ABOVE_CHANCE


@pytest.mark.slow
def test_the_cora_example_trains_every_model_and_compiles_it_without_a_graph_break(capsys):
    pytest.importorskip("torch_geometric.nn")
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
    given = gsparse.Graph.from_edge_index(edge_index, num_nodes=data.num_nodes)
    inferred = gsparse.Graph.from_edge_index(edge_index)
    assert (inferred.num_src, inferred.num_dst) == (given.num_src, given.num_dst) == (2708, 2708)
    assert torch.equal(inferred.edge_index, given.edge_index)
    assert edge_attr.shape == (edge_index.shape[1], 1) and bool(torch.isfinite(edge_attr).all())
    assert torch.allclose(x.sum(1)[x.sum(1) > 0], torch.ones(1))  # row-normalised features
