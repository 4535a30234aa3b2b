"""The user guide says what the code does: its code blocks run, its tables match the tables
the code reads, and the differences from PyG and DGL it lists are real.

Pages: ``docs/getting-started.md`` (its Python blocks run in order, as a script),
``docs/semantics.md`` (its blocks are doctests; its tables of operators, reducers, targets,
dtypes and broadcast shapes are checked against :mod:`gsparse.algebra` and the operators),
``docs/migration.md`` (its blocks run; each difference a test can check is checked).
"""

from __future__ import annotations

import doctest
import functools
import inspect
import re
from pathlib import Path

import pytest
import torch

import gsparse
from gsparse import algebra
from gsparse import nn as gnn
from gsparse import sddmm as gsddmm_module
from gsparse import spmm as gspmm_module

DOCS = Path(__file__).resolve().parents[1] / "docs"
FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
BACKTICKED = re.compile(r"`([^`]+)`")


def _page(name: str) -> str:
    return (DOCS / name).read_text()


def _python_blocks(name: str) -> list[str]:
    return FENCE.findall(_page(name))


def _section(text: str, heading: str) -> str:
    """The text under ``heading`` (a whole line such as ``## g-SpMM``) up to the next heading
    of the same or a higher level."""
    level = heading.split(" ", 1)[0]
    start = text.index(f"\n{heading}\n") + len(heading) + 2
    following = re.compile(rf"^#{{1,{len(level)}}} ", re.MULTILINE).search(text, start)
    return text[start:following.start() if following else len(text)]


def _tables(section: str) -> list[list[list[str]]]:
    """The Markdown tables of ``section``: rows of cells, header and rule dropped."""
    tables, rows = [], None
    for line in section.splitlines() + [""]:
        if line.startswith("|"):
            rows = [] if rows is None else rows
            rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
        elif rows is not None:
            tables.append(rows[2:])
            rows = None
    return tables


def _first_code(cell: str) -> str:
    return BACKTICKED.search(cell).group(1)


def _codes(cell: str) -> list[str]:
    return BACKTICKED.findall(cell)


# ---------------------------------------------------------------------- getting started


def test_getting_started_runs_as_written(monkeypatch):
    """Every block, in order, in one namespace. Two changes keep it short on a CI machine: 20
    epochs instead of 200, and ``torch.compile`` with the ``aot_eager`` backend (it traces
    the same graph, with ``fullgraph=True``; the Inductor build of the same model is run by
    the slow test of ``examples/cora.py``)."""
    blocks = _python_blocks("getting-started.md")
    assert len(blocks) == 5, "the test expects: first GCN, operators, GPU, torch.compile, captured steps"
    assert blocks[0].count("\nepochs = 200\n") == 1
    blocks[0] = blocks[0].replace("\nepochs = 200\n", "\nepochs = 20\n")
    assert "torch.compile(model, fullgraph=True)" in blocks[3]
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    torch._dynamo.reset()
    namespace: dict = {"__name__": "getting_started"}
    for i, block in enumerate(blocks):
        code = compile(block, f"docs/getting-started.md, python block {i + 1}", "exec")
        exec(code, namespace)  # noqa: S102 (the page's own code, which is what is tested)

    ns = namespace
    assert ns["accuracy"] > 0.5, "20 epochs of GCN on Cora learn well past chance (1/7)"
    n, e = 2708, 10858  # as the page says
    assert (ns["g"].num_dst, ns["g"].num_edges, ns["data"].num_features) == (n, e, 1433)
    assert ns["agg"].shape == (n, 16) and ns["score"].shape == (e, 1) and ns["attn"].shape == (e, 1)
    assert ns["out"].shape == (n, 7)
    torch.testing.assert_close(ns["out"], ns["model"](ns["x"], ns["g"]))
    assert torch.isfinite(ns["loss"]) and ns["blocks"].version >= 1  # five sampled steps trained
    assert ns["train"].captures == (ns["blocks"].version if ns["device"].type == "cuda" else 0)


def test_getting_started_install_commands_are_the_readme_s():
    readme = " ".join((DOCS.parent / "README.md").read_text().split())  # joined lines
    page = _page("getting-started.md")
    for command in ('python3 -m pip install torch==2.13.0 -e ".[cuda,bench]"',
                    "python3 -m gsparse info", "python3 -m gsparse example"):
        assert command in page and command in readme, command


# ---------------------------------------------------------------------- semantics


def test_semantics_examples_are_doctests_that_pass():
    parser, blocks = doctest.DocTestParser(), _python_blocks("semantics.md")
    assert blocks and all(">>> " in block for block in blocks)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    namespace: dict = {}
    for i, block in enumerate(blocks):
        test = parser.get_doctest(block, namespace, f"semantics.md block {i + 1}", "docs/semantics.md", 0)
        runner.run(test, clear_globs=False)
        namespace = test.globs
    result = runner.summarize(verbose=False)
    assert result.failed == 0 and result.attempted > 10


SEMANTICS = _page("semantics.md")


def test_semantics_lists_the_spmm_operators_and_reducers_of_the_algebra():
    ops, reducers = _tables(_section(SEMANTICS, "## g-SpMM"))
    assert tuple(_first_code(row[0]) for row in ops) == algebra.SPMM_OPS
    for row in ops:
        binop, reads = algebra.BINARY_OPS[_first_code(row[0])], row[2].split("(")[0]
        assert ("`lhs`" in reads, "`rhs`" in reads) == (binop.uses_lhs, binop.uses_rhs), row
    assert tuple(_first_code(row[0]) for row in reducers) == tuple(algebra.REDUCERS)
    assert all(row[2] == "0" for row in reducers)


def test_semantics_lists_the_sddmm_operators_and_targets_of_the_algebra():
    targets, ops = _tables(_section(SEMANTICS, "## g-SDDMM"))
    assert tuple(_first_code(row[0]) for row in targets) == algebra.TARGETS
    assert tuple(_first_code(row[0]) for row in ops) == algebra.SDDMM_OPS


def test_semantics_counts_the_shorthands():
    assert f"{len(gspmm_module.SHORTHANDS)} functions" in _section(SEMANTICS, "## g-SpMM")
    assert f"{len(gsddmm_module.SHORTHANDS)} functions" in _section(SEMANTICS, "## g-SDDMM")
    spmm_names = {f"u_{op}_e_{r}" for op in ("add", "sub", "mul", "div") for r in algebra.REDUCERS} | \
        {f"copy_{w}_{r}" for w in "ue" for r in algebra.REDUCERS}
    sddmm_names = {f"{a}_{op}_{b}" for a in "uve" for b in "uve" if a != b
                   for op in ("add", "sub", "mul", "div", "dot")} | {"copy_u", "copy_v"}
    assert set(gspmm_module.SHORTHANDS) == spmm_names and set(gsddmm_module.SHORTHANDS) == sddmm_names


SHORTHAND_NAME = re.compile(r"^(?:[uve]_(?:add|sub|mul|div|dot)_[uve](?:_(?:sum|mean|max|min))?"
                            r"|copy_[uve](?:_(?:sum|mean|max|min))?)$")


@pytest.mark.parametrize("page", ["semantics.md", "migration.md", "getting-started.md"])
def test_every_shorthand_the_docs_name_exists(page):
    named = {code for code in BACKTICKED.findall(_page(page)) if SHORTHAND_NAME.match(code)}
    missing = sorted(name for name in named - {"copy_e"} if not callable(getattr(gsparse, name, None)))
    assert not missing, f"{page} names shorthands gsparse does not have: {missing}"


def test_semantics_dtype_table_is_the_algebra_s():
    rows = _tables(_section(SEMANTICS, "## Dtypes"))[0]
    assert {_first_code(row[0]) for row in rows} == {str(d) for d in algebra.FLOAT_DTYPES}


def _shape(text: str, sizes: dict[str, int]) -> tuple[int, ...]:
    return tuple(sizes[d] if d in sizes else int(d) for d in text.strip("[]").split(", "))


def test_semantics_broadcast_table_gives_the_shapes_the_operators_return():
    g = gsparse.Graph.from_edge_index(torch.tensor([[0, 1, 2, 4], [1, 1, 0, 2]]), num_src=5, num_dst=3)
    sizes = {"num_src": g.num_src, "num_dst": g.num_dst, "E": g.num_edges}
    rows = _tables(_section(SEMANTICS, "## Broadcasting"))[0]
    assert len(rows) >= 5
    for lhs_cell, rhs_cell, spmm_cell, dot_cell in rows:
        lhs = torch.randn(_shape(_first_code(lhs_cell), sizes))
        rhs = torch.randn(_shape(_first_code(rhs_cell), sizes))
        assert gsparse.gspmm(g, "mul", "sum", lhs, rhs).shape == _shape(_first_code(spmm_cell), sizes)
        if "differ" in dot_cell:
            with pytest.raises(ValueError, match="dot needs equal last dimensions"):
                gsparse.gsddmm(g, "dot", lhs, rhs, "u", "e")
        else:
            assert gsparse.gsddmm(g, "dot", lhs, rhs, "u", "e").shape == _shape(_first_code(dot_cell), sizes)


@pytest.mark.parametrize("reduce", sorted(algebra.REDUCERS))
def test_semantics_empty_rows_give_zero_for_every_reducer(reduce):
    g = gsparse.Graph.from_edge_index(torch.tensor([[0, 1], [0, 0]]), num_nodes=3)
    out = gsparse.gspmm(g, "copy_lhs", reduce, torch.randn(3, 4))
    assert torch.equal(out[1:], torch.zeros(2, 4))


def test_semantics_integer_features_and_mixed_dtypes_are_refused():
    g = gsparse.Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]))
    with pytest.raises(TypeError, match="floating dtype"):
        gsparse.copy_u_sum(g, torch.ones(2, 3, dtype=torch.int64))
    with pytest.raises(TypeError, match="same dtype"):
        gsparse.u_mul_e_sum(g, torch.ones(2, 3), torch.ones(2, 1, dtype=torch.float64))


# ---------------------------------------------------------------------- migration

MIGRATION = _page("migration.md")
PYG_CONVS = ("GCNConv", "GATConv", "SAGEConv")
MESSAGE_PASSING_KWARGS = {"aggr": "mean", "aggr_kwargs": {}, "flow": "target_to_source", "node_dim": 0,
                          "decomposed_layers": 2}


@pytest.fixture(scope="module")
def pyg_nn():
    return pytest.importorskip("torch_geometric.nn")


def _small_graph(n: int = 12, seed: int = 0) -> torch.Tensor:
    """A ``[2, E]`` edge list with no self loops and no repeated edges."""
    ei = torch.randint(0, n, (2, 4 * n), generator=torch.Generator().manual_seed(seed))
    return torch.unique(ei[:, ei[0] != ei[1]], dim=1)


def test_migration_blocks_run(pyg_nn):
    for i, block in enumerate(_python_blocks("migration.md")):
        code = compile(block, f"docs/migration.md, python block {i + 1}", "exec")
        exec(code, {"__name__": "migration"})  # noqa: S102 (the page's own code)


@pytest.mark.parametrize("layer", PYG_CONVS)
def test_migration_arguments_listed_as_the_same_have_pyg_s_defaults(layer, pyg_nn):
    first_row = _tables(_section(MIGRATION, f"### {layer}"))[0][0]
    assert "The same" in first_row[1]
    ours = inspect.signature(getattr(gnn, layer)).parameters
    theirs = inspect.signature(getattr(pyg_nn, layer)).parameters
    for name in filter(str.isidentifier, _codes(first_row[0])):
        assert name in ours and name in theirs, name
        if theirs[name].default is not inspect.Parameter.empty:
            assert ours[name].default == theirs[name].default, name


def _layer(layer: str, **kwargs):
    return getattr(gnn, layer)(8, 4, **kwargs)


@pytest.mark.parametrize("layer", PYG_CONVS)
@pytest.mark.parametrize("kwarg", sorted(MESSAGE_PASSING_KWARGS))
def test_migration_message_passing_arguments_raise(layer, kwarg):
    if layer == "SAGEConv" and kwarg == "aggr":
        return  # SAGEConv's own argument
    assert f"`{kwarg}`" in MIGRATION
    with pytest.raises(TypeError, match=kwarg):
        _layer(layer, **{kwarg: MESSAGE_PASSING_KWARGS[kwarg]})


@pytest.mark.parametrize("layer", PYG_CONVS)
def test_migration_forward_takes_graph_not_edge_index_or_size(layer):
    conv, x, ei = _layer(layer), torch.randn(12, 8), _small_graph()
    assert conv(x, graph=ei).shape == (12, 4)
    with pytest.raises(TypeError, match="edge_index"):
        conv(x, edge_index=ei)
    if layer != "GCNConv":
        with pytest.raises(TypeError, match="size"):
            conv(x, ei, size=(12, 12))
    with pytest.raises(ValueError, match=r"shape \[num_nodes, 8\]"):
        conv(torch.randn(2, 12, 8), ei)


def test_migration_gatconv_refuses_bipartite_inputs_clearly():
    with pytest.raises(TypeError, match="in_channels must be an int"):
        gnn.GATConv((8, 6), 4)
    x = torch.randn(12, 8)
    with pytest.raises(TypeError, match="bipartite"):
        gnn.GATConv(8, 4)((x, x), _small_graph())


def test_migration_sageconv_accepts_the_listed_aggregations_only(pyg_nn):
    for aggr in ("mean", "sum", "add", "max", "min"):
        gnn.SAGEConv(8, 4, aggr=aggr)
    for aggr in ("lstm", "std", ["mean", "max"], pyg_nn.aggr.MeanAggregation()):
        with pytest.raises(ValueError, match="aggr must be one of"):
            gnn.SAGEConv(8, 4, aggr=aggr)


def test_migration_gcnconv_refuses_self_loops_without_normalisation_as_pyg_does(pyg_nn):
    for lib in (gnn, pyg_nn):
        with pytest.raises(ValueError):
            lib.GCNConv(8, 4, add_self_loops=True, normalize=False)


def test_migration_same_seed_gives_pyg_s_parameters(pyg_nn):
    for make in (lambda lib: lib.GCNConv(8, 4), lambda lib: lib.SAGEConv(8, 4, project=True),
                 lambda lib: lib.GATConv(8, 4, heads=2, edge_dim=3, residual=True)):
        torch.manual_seed(1)
        theirs = make(pyg_nn).state_dict()
        torch.manual_seed(1)
        ours = make(gnn).state_dict()
        assert ours.keys() == theirs.keys()
        assert all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_migration_gcnconv_flow_target_to_source_is_the_reversed_graph(pyg_nn):
    ei, x = _small_graph(), torch.randn(12, 8)
    theirs = pyg_nn.GCNConv(8, 4, flow="target_to_source")
    ours = gnn.GCNConv(8, 4)
    ours.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(ours(x, gsparse.Graph.from_edge_index(ei.flip(0), num_nodes=12)), theirs(x, ei))


def test_migration_sparse_adjacency_values_weigh_gcn_edges_and_nothing_else(pyg_nn):
    ei, x = _small_graph(), torch.randn(12, 8)
    w = torch.rand(ei.shape[1]) + 0.5
    adj_t = torch.sparse_coo_tensor(ei.flip(0), w, (12, 12), check_invariants=True).coalesce()
    theirs, ours = pyg_nn.GCNConv(8, 4), gnn.GCNConv(8, 4)
    ours.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(ours(x, adj_t), theirs(x, adj_t))
    torch.testing.assert_close(ours(x, adj_t.to_sparse_csc()), theirs(x, adj_t))  # PyG refuses CSC
    for layer in ("GATConv", "SAGEConv"):
        conv = _layer(layer)
        torch.testing.assert_close(conv(x, adj_t), conv(x, ei))


def test_migration_sparse_adjacency_self_loops_are_replaced_not_added(pyg_nn):
    ei = torch.cat([_small_graph(), torch.tensor([[3, 5], [3, 5]])], 1)
    x, w = torch.randn(12, 8), torch.rand(ei.shape[1]) + 0.5
    adj_t = torch.sparse_coo_tensor(ei.flip(0), w, (12, 12), check_invariants=True).coalesce()
    src, dst = adj_t.indices()[1], adj_t.indices()[0]
    theirs, ours = pyg_nn.GCNConv(8, 4), gnn.GCNConv(8, 4)
    ours.load_state_dict(theirs.state_dict())
    # As PyG treats an edge_index: add_remaining_self_loops.
    torch.testing.assert_close(ours(x, adj_t), theirs(x, torch.stack([src, dst]), adj_t.values()))
    # The page's recipe for PyG's sparse result: the loop weight added to the diagonal.
    on_diagonal = (src == dst).to(w.dtype)
    shifted = torch.sparse_coo_tensor(adj_t.indices(), adj_t.values() + on_diagonal, (12, 12))
    torch.testing.assert_close(ours(x, shifted.coalesce()), theirs(x, adj_t))


def test_migration_attention_weights_are_returned_as_pyg_returns_them(pyg_nn):
    ei, x = _small_graph(), torch.randn(12, 8)
    ours = gnn.GATConv(8, 4, heads=2)
    theirs = pyg_nn.GATConv(8, 4, heads=2)
    for flag in (None, False):  # PyG 2.8: out alone unless the flag is true
        assert isinstance(ours(x, ei, return_attention_weights=flag), torch.Tensor)
        assert isinstance(theirs(x, ei, return_attention_weights=flag), torch.Tensor)
    _, (edges, alpha) = ours(x, ei, return_attention_weights=True)
    assert edges.dtype == torch.int64 and edges.shape == (2, ei.shape[1] + 12)
    assert alpha.shape == (ei.shape[1] + 12, 2)
    assert bool((edges[1][1:] >= edges[1][:-1]).all()), "sorted by destination"
    assert int((edges[0] == edges[1]).sum()) == 12, "one self loop per node"


def test_migration_node_counts_must_match_the_features():
    g = gsparse.Graph.from_edge_index(_small_graph(), num_nodes=12)
    with pytest.raises(ValueError, match="rows"):
        gnn.GCNConv(8, 4)(torch.randn(13, 8), g)


def test_migration_compile_needs_a_graph():
    conv, x, ei = gnn.GCNConv(8, 4), torch.randn(12, 8), _small_graph()
    torch._dynamo.reset()
    compiled = torch.compile(conv, fullgraph=True, backend="aot_eager")
    with pytest.raises(gsparse.CompileError):
        compiled(x, ei)
    g = gsparse.Graph.from_edge_index(ei, num_nodes=12)
    torch.testing.assert_close(compiled(x, g), conv(x, g))


def test_migration_dgl_rows_hold():
    g = gsparse.Graph.from_edge_index(_small_graph(), num_nodes=12)
    assert g.index_dtype == torch.int32
    assert g.edges()[0].dtype == g.edge_index.dtype == torch.int64
    assert g.in_degrees().dtype == g.out_degrees().dtype == torch.int32
    assert g.with_index_dtype(torch.int64).edges()[0].dtype == torch.int64
    assert list(inspect.signature(gsparse.gspmm).parameters)[:5] == ["g", "op", "reduce", "lhs", "rhs"]
    assert list(inspect.signature(gsparse.gsddmm).parameters)[:6] == \
        ["g", "op", "lhs", "rhs", "lhs_target", "rhs_target"]
    assert list(inspect.signature(gsparse.edge_softmax).parameters) == ["g", "logits", "eids", "norm_by"]
    assert not hasattr(gsparse, "copy_e")
    with pytest.raises(TypeError, match="norm_by"):
        gsparse.edge_softmax(g, torch.randn(g.num_edges, 1), "src")
