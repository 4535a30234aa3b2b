"""Add the structure statistics a cell file predates, from graphs rebuilt on the CPU.

    python scripts/backfill_structure.py CELLS.jsonl.gz [...]

A cell records its graph's family and parameters, and ``FAMILIES[family].build`` makes
that graph again (with the collector's ``max_edges``). Graphs are a function of those
arguments and the device type, so a CPU rebuild of a graph collected on a GPU is the same
in distribution, not edge for edge: its statistics are those of a sibling graph (on the
files of 2026-11-25: run 5's lane paddings as the GPU recorded them within 0.7%; the edge
counts of 119 of 123 graphs within 0.5%, of four sampled-block graphs within 19%). Each
field of :class:`~gsparse.datasets.GraphStructure` a cell lacks is filled from
``describe_structure`` of the rebuild and named in the graph's ``"backfilled"`` list (a
missing ``lane_padding`` alone is read from the collector's ``row_lengths`` profile of the
measured graph where the cell has one, with no rebuild); every
recorded field and every measurement stays as it was. Files are rewritten in place
(gzipped without a timestamp, so that the same input gives the same bytes).
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import sys
from pathlib import Path

from gsparse import datasets
from gsparse.datasets.structure import GraphStructure, describe_structure

_MAX_EDGES = 30_000_000  # python -m gsparse.tune.collect's default --max-edges
_FIELDS = [f.name for f in dataclasses.fields(GraphStructure)]
_LANE_GROUPS = 6  # GraphStructure.lane_padding: groups of 1 to 32 lanes


def _rebuilt_structure(graph_doc: dict) -> dict:
    parameters = graph_doc["parameters"]
    g = datasets.FAMILIES[graph_doc["family"]].build(parameters, seed=parameters["seed"], max_edges=_MAX_EDGES)
    return describe_structure(g).as_dict()


def backfill(path: Path, rebuilt: dict[str, dict]) -> int:
    """Fill the missing fields of every cell of ``path``; the number of cells changed."""
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    changed = 0
    for i, line in enumerate(lines):
        doc = json.loads(line)
        graph = doc["graph"]
        missing = [name for name in _FIELDS if name not in graph["structure"]]
        if not missing:
            continue
        if missing == ["lane_padding"] and "row_lengths" in graph:
            # the collector's profile of the measured graph itself: exact, no rebuild
            graph["structure"]["lane_padding"] = graph["row_lengths"]["padding"][:_LANE_GROUPS]
            graph["backfilled"] = sorted(set(graph.get("backfilled", [])) | {"lane_padding"})
            lines[i] = json.dumps(doc)
            changed += 1
            continue
        key = graph["family"] + json.dumps(graph["parameters"], sort_keys=True)
        if key not in rebuilt:
            rebuilt[key] = _rebuilt_structure(graph)
            print(f"{path.name}: rebuilt {graph['family']} with {rebuilt[key]['num_edges']:,} edges "
                  f"(recorded {graph['structure']['num_edges']:,})", flush=True)
        graph["structure"].update({name: rebuilt[key][name] for name in missing})
        graph["backfilled"] = sorted(set(graph.get("backfilled", [])) | set(missing))
        lines[i] = json.dumps(doc)
        changed += 1
    if changed:
        path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+", type=Path)
    args = parser.parse_args(argv)
    rebuilt: dict[str, dict] = {}
    for path in args.cells:
        print(f"{path}: {backfill(path, rebuilt)} cells filled", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
