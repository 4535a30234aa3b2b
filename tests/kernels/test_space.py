"""Space: the candidates of a task in a fixed order, without duplicates, and their knobs."""

from __future__ import annotations

from gsparse.kernels.space import Space
from gsparse.kernels.sddmm import Edge, Row


def test_a_space_keeps_the_first_of_each_candidate_in_order() -> None:
    a, b, c = Edge(lanes=8), Row(lanes=4), Edge(lanes=2)
    space = Space([a, b, a, c, b])
    assert list(space) == [a, b, c] and len(space) == 3 and space.candidates() == (a, b, c)
    assert a in space and Row(lanes=8) not in space
    assert space == Space([a, b, c]) and hash(space) == hash(Space([a, b, c]))


def test_a_space_names_its_skeletons_and_each_knobs_domain() -> None:
    space = Space([Edge(lanes=8), Row(lanes=4), Edge(lanes=2, vector_width=4), Row(lanes=4, vector_width=2)])
    assert space.skeletons() == [Edge, Row]
    assert space.domain(Edge, "lanes") == (2, 8)
    assert space.domain(Row, "vector_width") == (1, 2)
    assert space.domain(Row, "lanes") == (4,)
    assert Space([]).skeletons() == [] and len(Space([])) == 0
