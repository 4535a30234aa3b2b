"""Training and judging cost models on collected cells, whole families held out."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
import torch

from gsparse.datasets.structure import describe_structure
from gsparse.kernels import spmm
from gsparse.target import H100
from gsparse.tune import train
from gsparse.tune.collect import _task_dict
from gsparse.tune.models import RankModel

from graphs import named_graph


def _cells(family: str, count: int, seed: int) -> list[dict]:
    """Cells shaped as gsparse.tune.collect writes them, with made-up times: a schedule's
    time grows with its rows per block, so a model can learn the order."""
    g = named_graph("random")
    structure = describe_structure(g).as_dict()
    rng = np.random.default_rng(seed)
    docs = []
    for index in range(count):
        feature_len = int(rng.choice([4, 16, 32, 64]))
        task = spmm.task_for(g, "copy_lhs", "sum", torch.randn(g.num_src, feature_len), None, (feature_len,))
        default = spmm.default_schedule(task, g.stats, H100)
        space = [default, *spmm.schedule_space(task, g.stats, H100).candidates()[:12]]
        times = {s: 0.01 * (1 + getattr(s, "rows_per_block", 1) + getattr(s, "feature_lanes", 1) / 64)
                 for s in space}
        docs.append({
            "graph": {"index": index, "family": family, "parameters": {}, "structure": structure},
            "target": H100.to_json(), "case": "spmm:copy_lhs:sum", "feature_len": feature_len,
            "dtype": "float32", "task": _task_dict(task), "reference": "torch",
            # A separate measurement of the hand rule, unlike the sweep's: the sweep's counts.
            "default": {"schedule": default.to_json(), "ms": 99.0, "spread": 0.0},
            "schedules": [{"schedule": s.to_json(), "ms": t, "spread": 0.01} for s, t in times.items()],
        })
    docs.append({**docs[0], "schedules": [{"schedule": default.to_json(), "error": "launch failed"}]})
    return docs


def _write(path, docs, zipped: bool):
    text = "".join(json.dumps(d) + "\n" for d in docs)
    if zipped:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_cells_load_plain_or_gzipped_and_the_sweep_times_the_hand_rule(tmp_path):
    docs = _cells("lognormal", 3, seed=0)
    plain = train.load_cells([_write(tmp_path / "cells.jsonl", docs, zipped=False)])
    zipped = train.load_cells([_write(tmp_path / "cells.jsonl.gz", docs, zipped=True)])
    assert len(plain) == len(zipped) == 3  # the cell with one failed schedule is left out
    for cell in plain:
        assert cell.family == "lognormal" and cell.operator == "spmm"
        [swept] = [t for s, t in zip(cell.schedules, cell.times_ms) if s == cell.default_schedule]
        assert cell.default_ms == swept != 99.0  # the sweep's time of the hand rule's pick
        assert len(cell.schedules) == len(cell.times_ms) >= 2
    assert [c.times_ms.tolist() for c in plain] == [c.times_ms.tolist() for c in zipped]


@pytest.mark.parametrize("kind", ["rank", "blend"])
def test_training_holds_out_whole_families_and_writes_the_rank_model(tmp_path, capsys, kind):
    pytest.importorskip("lightgbm")
    docs = _cells("lognormal", 12, seed=1) + _cells("rmat", 4, seed=2)
    path = _write(tmp_path / "cells.jsonl", docs, zipped=False)
    assert train.main([str(path), "--held-out", "rmat", "--model", kind, "--out", str(tmp_path / "m")]) == 0
    report = capsys.readouterr().out
    assert "trained on 12 cells of ['lognormal'], judged on 4 held-out cells of ['rmat']" in report
    model = RankModel().load(tmp_path / "m" / "spmm-rank.json")  # a blend is saved as a rank model
    assert model.params.get("pointwise_trees", 0) == (100 if kind == "blend" else 0)
    [cell] = train.load_cells([path])[-1:]
    quality = train.judge(model, [cell])
    assert quality["spearman_within_cell"] > 0.8  # it learnt the order of the made-up times
    # a blend's predicted time (its least-squares part) is judged too; LambdaMART alone has none
    assert (quality["pearson_time_part_within_cell"] > 0.8) == (kind == "blend")


def test_the_hand_rules_pick_outside_the_sweep_joins_the_cell_with_its_own_time(tmp_path):
    docs = _cells("lognormal", 2, seed=3)[:2]
    default = docs[0]["default"]["schedule"]
    docs[0] = {**docs[0], "schedules": [s for s in docs[0]["schedules"] if s["schedule"] != default]}
    first, second = train.load_cells([_write(tmp_path / "cells.jsonl", docs, zipped=False)])
    assert first.schedules[-1] == first.default_schedule and first.times_ms[-1] == first.default_ms == 99.0
    assert len(first.schedules) == len(docs[0]["schedules"]) + 1
    assert len(second.schedules) == len(docs[1]["schedules"])  # swept: not added twice


def test_training_with_no_held_out_cells_ships_models_trained_on_every_family(tmp_path, capsys):
    pytest.importorskip("lightgbm")
    path = _write(tmp_path / "cells.jsonl", _cells("lognormal", 8, seed=1) + _cells("rmat", 4, seed=2), zipped=False)
    assert train.main([str(path), "--held-out", "banded", "--model", "rank", "--out", str(tmp_path / "m")]) == 0
    assert "no cells of ['banded']; trained on all 12 cells" in capsys.readouterr().out
    assert RankModel().load(tmp_path / "m" / "spmm-rank.json").ensemble is not None


def test_both_writes_the_shipped_kinds_the_dnn_and_the_blend(tmp_path):
    pytest.importorskip("lightgbm")
    path = _write(tmp_path / "cells.jsonl", _cells("lognormal", 8, seed=1) + _cells("rmat", 4, seed=2), zipped=False)
    assert train.main([str(path), "--held-out", "rmat", "--out", str(tmp_path / "m")]) == 0  # --model both
    assert (tmp_path / "m" / "spmm-dnn.json").is_file()
    # The rank file holds the blend, as shipped, not LambdaMART alone.
    assert RankModel().load(tmp_path / "m" / "spmm-rank.json").params.get("pointwise_trees", 0) == 100


def test_a_files_weight_weighs_its_training_cells(tmp_path, capsys):
    pytest.importorskip("lightgbm")
    main = _write(tmp_path / "main.jsonl", _cells("lognormal", 8, seed=1) + _cells("rmat", 4, seed=2), zipped=False)
    extra = _write(tmp_path / "extra.jsonl", _cells("hubs", 6, seed=4), zipped=False)
    assert [c.weight for c in train.load_cells([main, extra], train.parse_weights([f"{extra}=0.5"], [main, extra]))] \
        == [1.0] * 12 + [0.5] * 6

    def model(*args):
        out = tmp_path / f"m{len(list(tmp_path.iterdir()))}"
        assert train.main([*map(str, args), "--held-out", "rmat", "--model", "blend", "--out", str(out)]) == 0
        return (out / "spmm-rank.json").read_text()

    alone = model(main)
    assert model(main, extra, "--weight", f"{extra}=0") == alone  # weight 0: left out of training
    assert "trained on 8 cells of ['lognormal']" in capsys.readouterr().out
    whole, half = model(main, extra), model(main, extra, "--weight", f"{extra}=0.5")
    assert len({alone, whole, half}) == 3
    assert model(main, extra, "--weight", f"{extra}=1") == whole  # weight 1: as unweighted
    for bad, message in ((f"{tmp_path / 'other.jsonl'}=0.5", "not one of the cell files"),
                         (f"{extra}=-1", "a number >= 0"), (f"{extra}", "FILE=W")):
        with pytest.raises(SystemExit):
            train.main([str(main), str(extra), "--weight", bad, "--model", "blend"])
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit):  # the DNN takes no weights
        train.main([str(main), str(extra), "--weight", f"{extra}=0.5"])
    assert "--weight is for the rank models" in capsys.readouterr().err
