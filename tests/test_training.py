"""The training benchmark, end to end on the CPU at a small scale."""

from __future__ import annotations

import json

import pytest
import torch

from gsparse.bench import minibatch, training

pytest.importorskip("torch_geometric")


def test_training_benchmark_runs_on_cora(tmp_path, monkeypatch):
    # Cora ships with gsparse: with no data folder set, the benchmark finds the packaged copy.
    monkeypatch.delenv("GSPARSE_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    code = training.main(["--device", "cpu", "--workloads", "cora", "--models", "gat",
                          "--epochs", "1", "--warmup", "0", "--accuracy-epochs", "2", "--accuracy-seeds", "1",
                          "--out", str(tmp_path)])
    assert code == 0
    doc = json.loads((tmp_path / "training.json").read_text())
    assert doc["format"] == training.FORMAT
    assert [(t["workload"], t["model"]) for t in doc["timings"]] == [("cora", "gat")]
    for t in doc["timings"]:
        assert t["gsparse"]["epoch_ms"] > 0 and t["gsparse"]["inference_ms"] > 0
        assert t["pyg"]["format"] in ("adj_t", "edge_index") and t["speedup_epoch"] > 0
    (acc,) = doc["accuracy"]
    assert 0 <= acc["gsparse_mean"] <= 1 and 0 <= acc["pyg_mean"] <= 1
    assert "| cora | gat |" in (tmp_path / "training.md").read_text()


def test_models_start_from_the_same_weights():
    w = training.load_workload("arxiv-like@0.002", torch.device("cpu"))
    ours, theirs = training._model_pair("gat", w, seed=0)
    for (name, a), (_, b) in zip(sorted(ours.state_dict().items()), sorted(theirs.state_dict().items())):
        torch.testing.assert_close(a, b, msg=name)
    ours.eval(), theirs.eval()
    torch.testing.assert_close(ours(w.x, w.graph), theirs(w.x, w.edge_index), rtol=1e-4, atol=1e-4)


def test_a_failure_is_recorded_not_raised():
    w = training.load_workload("arxiv-like@0.002", torch.device("cpu"))
    model = training.build_model("gcn", training.gsparse_nn, w.x.shape[1] + 1, w.num_classes)
    result = training._measure(model, w, w.graph, epochs=1, warmup=0)
    assert result["error"].startswith("ValueError: x must have shape")


def test_workload_names_are_checked():
    with pytest.raises(ValueError, match="must be a preset"):
        training.load_workload("nope", torch.device("cpu"))
    with pytest.raises(ValueError, match="the scale after '@' must be a number"):
        training.load_workload("reddit-like@x", torch.device("cpu"))


def test_the_sampler_gives_local_blocks_sorted_by_destination():
    w = training.load_workload("arxiv-like@0.002", torch.device("cpu"))
    sampler = minibatch.NeighborSampler(w.graph, (5, 3))
    seeds = w.train_idx[:16]
    blocks = sampler.sample(seeds)
    batch, n1, n0 = blocks.sizes
    assert batch == 16 and batch <= n1 <= n0 == blocks.n_id.numel()
    assert torch.equal(blocks.n_id[:batch], seeds) and blocks.n_id.unique().numel() == n0
    assert (sampler.local == -1).all()  # the map is reset for the next step
    for edges, num_src, num_dst in ((blocks.inner, n1, batch), (blocks.outer, n0, n1)):
        assert (edges[0] < num_src).all() and (edges[1] < num_dst).all()
        assert (edges[1, 1:] >= edges[1, :-1]).all()
        assert torch.bincount(edges[1], minlength=num_dst).max() <= blocks.max_degree
    # every sampled edge is an edge of the base graph, in global ids
    src, dst = w.graph.edges()
    base = set(zip(src.tolist(), dst.tolist()))
    glob = blocks.n_id[blocks.outer]
    assert set(zip(glob[0].tolist(), glob[1].tolist())) <= base
    assert torch.equal(blocks.outer[:, :blocks.inner.shape[1]], blocks.inner)
    for bipartite in (True, False):
        outer, inner = minibatch.block_graphs(blocks, bipartite)
        assert outer.sync_free and (outer.num_src, inner.num_src) == (n0, n1)
        assert (outer.num_dst, inner.num_dst) == ((n1, batch) if bipartite else (n0, n1))


@pytest.mark.parametrize("gsparse_input", ["gather_features", "index_select"])
def test_minibatch_cells_run_on_the_cpu(tmp_path, gsparse_input):
    code = training.main(["--device", "cpu", "--workloads", "none", "--models", "sage", "gcn", "--minibatch",
                          "--minibatch-workload", "arxiv-like@0.002", "--minibatch-steps", "2",
                          "--minibatch-warmup", "0", "--batch-size", "8", "--fanouts", "4,3",
                          "--minibatch-input", gsparse_input, "--out", str(tmp_path)])
    assert code == 0
    doc = json.loads((tmp_path / "training.json").read_text())
    assert doc["timings"] == [] and [c["model"] for c in doc["minibatch"]] == ["sage", "gcn"]
    assert doc["config"]["minibatch"]["gsparse_input"] == gsparse_input
    for cell in doc["minibatch"]:
        assert cell["gsparse_input"] == gsparse_input
        assert cell["gsparse"]["step_ms"] > 0 and 0 < cell["gsparse"]["host_share"] <= 1
        assert cell["pyg"]["format"] in ("edge_index", "adj_t") and cell["speedup_step"] > 0
        # every step brings new blocks: a layer that kept the first one's (PyG's GCN with
        # cached=True) fails on the second
        assert all("error" not in cell[f"pyg/{fmt}"] for fmt in ("edge_index", "adj_t")), cell
    assert f"gsparse's input features by {gsparse_input})" in (tmp_path / "training.md").read_text()


def test_a_fused_input_is_the_gather_and_the_dropout_of_the_plain_one():
    """Without dropout (eval) both ways give the same step output; training, the fused
    model drops about half of its inputs and scales the rest as F.dropout does."""
    w = training.load_workload("arxiv-like@0.002", torch.device("cpu"))
    blocks = minibatch.NeighborSampler(w.graph, (4, 3)).sample(w.train_idx[:8])
    ours, _ = training._model_pair("sage", w, 0, one_graph=False)
    plain, fused = minibatch.BlockModel(ours, True), minibatch.BlockModel(ours, True, fused_input=True)
    graphs = minibatch.block_graphs(blocks, True)
    for model in (plain, fused):
        model.eval()
    want = plain(plain.inputs(w.x, blocks.n_id), graphs, blocks.sizes)
    torch.testing.assert_close(fused(fused.inputs(w.x, blocks.n_id), graphs, blocks.sizes), want)
    fused.train()
    x = fused.inputs(w.x, blocks.n_id)
    kept = x != 0
    assert 0.4 < kept.double().mean().item() < 0.6
    torch.testing.assert_close(x[kept], (w.x[blocks.n_id] * 2)[kept])


@pytest.mark.parametrize(("argv", "message"), [
    (["--workloads", "none"], "nothing to run"),
    (["--workloads"], "nothing to run"),
    (["--workloads", "none", "cora", "--minibatch"], "give it alone"),
])
def test_the_workloads_that_run_nothing_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit):
        training.main(["--device", "cpu", *argv])
    assert message in capsys.readouterr().err
