"""DistGraph construction: halo, plans, local numbering, reports, and the exchange's adjoint."""

from __future__ import annotations

import pytest
import torch
from cases import (
    dist_adjoint,
    dist_bad_partition,
    dist_density,
    dist_from_local_edges,
    dist_receive_adjoint,
    dist_structure,
    make_graph,
    make_partition,
)
from torch.testing import assert_close

from gsparse import distributed as gd


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("graph_kind,part_kind", [("square", "range"), ("bipartite", "range"),
                                                  ("int64", "scattered"), ("clustered", "even"),
                                                  ("blocks", "even"), ("square", "empty")])
def test_shares_hold_their_halo_and_plans(pool, world_size, graph_kind, part_kind):
    ranks = pool.run(dist_structure, world_size, graph_kind, part_kind)
    graph = make_graph(graph_kind)
    for rank, s in enumerate(ranks):
        assert s["same_sources"], f"rank {rank}: local sources differ from the global graph's"
        assert s["halo_sorted"] and s["mine_not_in_halo"]
        assert s["recv_counts"] == s["halo_owner_counts"] and sum(s["recv_counts"]) == s["halo"]
        assert s["index_dtype"] == str(graph.index_dtype)
        for peer in range(world_size):  # what I send a peer is what it receives from me
            assert s["send_counts"][peer] == ranks[peer]["recv_counts"][rank]
    assert len({s["active"] for s in ranks}) == 1
    # The report built from the shares equals the one streamed over the global graph.
    src_part = None if graph.num_src == graph.num_dst else \
        gd.Partition.from_bounds([graph.num_src * r // world_size for r in range(world_size + 1)])
    want = gd.partition_report(graph, None, make_partition(graph, part_kind, world_size), src_part).to_dict()
    assert ranks[0]["report"] == {**want, "method": ranks[0]["report"]["method"]}
    halos = [s["halo"] for s in ranks]
    if graph_kind == "clustered":
        assert halos[0] == 0 and all(h > 0 for h in halos[1:]), halos
    if graph_kind == "blocks":
        assert halos == [0] * world_size and not ranks[0]["active"]
    if part_kind == "empty":
        assert ranks[-1]["rows"] == 0


def test_shares_from_local_edges_match_shares_of_the_global_graph(pool):
    for dtype, out, want in pool.run(dist_from_local_edges, 4):
        assert dtype == "torch.int64"
        assert_close(torch.from_numpy(out), torch.from_numpy(want))


def test_the_scatter_is_the_adjoint_of_the_gather(pool):
    forward, backward = pool.run(dist_adjoint, 4)[0]
    assert forward == pytest.approx(backward, rel=1e-12) and forward != 0


def test_what_the_boundary_reads_has_its_adjoint_as_backward(pool):
    for (forward, backward), how in zip(pool.run(dist_receive_adjoint, 4)[0], ("all-gather", "halo")):
        assert forward == pytest.approx(backward, rel=1e-12) and forward != 0, how


@pytest.mark.parametrize("world_size", [2, 4])
def test_the_overlap_all_gathers_where_every_halo_is_nearly_every_remote_row(pool, world_size):
    for complete, ring in pool.run(dist_density, world_size):
        # Between 2 ranks the all-to-all is already a single send and receive.
        assert complete == (world_size > 2) and not ring


def test_partitions_that_do_not_fit_the_group_are_refused(pool):
    too_many, not_mine = pool.run(dist_bad_partition, 2)[0]
    assert too_many == "partition has 3 parts but the group has 2 ranks"
    assert not_mine == "dst holds node 47, which rank 0 does not own"
