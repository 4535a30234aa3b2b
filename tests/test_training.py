"""The training benchmark, end to end on the CPU at a small scale."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from gsparse.bench import training

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
pytest.importorskip("torch_geometric")


@pytest.mark.skipif(not (DATA / "cora.npz").is_file(), reason="needs shared/data/cora.npz")
def test_training_benchmark_runs_on_cora(tmp_path):
    code = training.main(["--device", "cpu", "--workloads", "cora", "--models", "gat",
                          "--epochs", "1", "--warmup", "0", "--accuracy-epochs", "2", "--accuracy-seeds", "1",
                          "--data-dir", str(DATA), "--out", str(tmp_path)])
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
