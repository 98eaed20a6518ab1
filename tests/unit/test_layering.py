"""The layers of lib/sqsjobs, checked: every import points down or across, and no imports go round in a circle.

An edge is any ``import`` of one module of lib/sqsjobs by another, wherever it
stands: at module level, inside a function, or under ``if TYPE_CHECKING:``
(tests/import_support.py with ``type_checking=True``, read with ``ast``: nothing
is imported). A lazy import hides a dependency from a cold start, not from a
reader, and a type-only import is a dependency of the design all the same.

``LAYERS`` is the map docs/architecture.md draws, lowest first. A module may
import modules of its own layer or of a layer below; the modules of one layer
import each other without a cycle. A module belongs to the layer whose entry
names the longest prefix of it (``schedules._periodic`` before ``schedules``).
"""

from __future__ import annotations

from pathlib import Path

from import_support import a_cycle, cycles, import_graph, write_tree

#: lowest first; each entry: (layer, the modules and packages in it, relative to ``sqsjobs``; "" is ``sqsjobs``)
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # the error tree, and what every layer reads: settings and their names, clients, backoff, metrics' format
    ("errors", ("_errors", "_env_names", "_environment", "_extras", "_metrics", "_tracing", "_broken_code",
                "_backoff", "_settings", "_clients", "_job_clients", "_with_block", "_calls", "_usage",
                "_botocore_data", "_frozen")),
    # the lease primitive and its stores
    ("store", ("store",)),
    # a job and its request: the job, its options, what it uses of the runtime (a protocol), the message,
    # its envelope, sizes, routing, delays (a long one is a one-time schedule), the producer, debounce, dedupe
    ("enqueue", ("enqueue", "_otel", "_job", "_job_options", "_batch_job",
                 "schedules._cron", "schedules._receipt", "schedules._one_time")),
    # the batch flow: the consumer, the delivery states, the decision, the stage protocol, record writes
    ("worker", ("worker",)),
    # features that plug into the worker as stages: limiters, groups, chains, chunked runs, the outbox,
    # periodic schedules, debounce's stage
    ("features", ("flow", "workflows", "schedules", "enqueue._debounce_stage")),
    # every collaborator built once from the settings, the features' stages built from it on demand, and what
    # acts on keys through it
    ("runtime", ("_runtime", "_feature_stages", "_lifecycle")),
    # the app, the package's public names, loading an app, the SnapStart hooks that name the app
    ("app", ("", "_app", "_loading", "_harness", "worker._snapstart")),
    # the tools and the operator's side: they use the app, the app never imports them
    ("tools", ("cli", "console", "local", "ops", "testing", "scaffold", "validation")),
)


def layer_of(module: str) -> int:
    """The index in ``LAYERS`` of ``module`` (dotted, from ``sqsjobs``): the entry with the longest matching prefix.

    Example:
        >>> [LAYERS[layer_of(m)][0] for m in ("sqsjobs.schedules._periodic", "sqsjobs.schedules._cron", "sqsjobs")]
        ['features', 'enqueue', 'app']
    """
    relative = module.removeprefix("sqsjobs").removeprefix(".")
    best: tuple[int, int] | None = None
    for index, (_, members) in enumerate(LAYERS):
        for member in members:
            matches = relative == member or (member and relative.startswith(member + "."))
            if matches and (best is None or len(member) > best[1]):
                best = (index, len(member))
    if best is None:
        raise LookupError(f"{module} is in no layer: add it to LAYERS (and to docs/architecture.md's map)")
    return best[0]


def upward_edges(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module of a higher layer, as ``importer (layer) -> imported (layer)``."""
    return sorted(f"{module} ({LAYERS[layer_of(module)][0]}) -> {target} ({LAYERS[layer_of(target)][0]})"
                  for module, targets in graph.items() for target in targets if layer_of(target) > layer_of(module))


def test_the_checker_counts_imports_in_functions_and_for_the_type_checker(tmp_path: Path) -> None:
    write_tree(tmp_path, {
        "sqsjobs/store/_lease.py": "def f():\n    from sqsjobs import _runtime\n",
        "sqsjobs/_errors.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                               "    from sqsjobs.store import _lease\n"),
        "sqsjobs/_runtime.py": "from sqsjobs.store._lease import f\n",
    })
    graph = import_graph(tmp_path, type_checking=True)
    assert upward_edges(graph) == ["sqsjobs._errors (errors) -> sqsjobs.store._lease (store)",
                                   "sqsjobs.store._lease (store) -> sqsjobs._runtime (runtime)"]
    assert cycles(graph) == [["sqsjobs._runtime", "sqsjobs.store._lease"]]


def test_every_module_is_in_a_layer() -> None:
    graph = import_graph(type_checking=True)
    assert len(graph) > 100, "the checker found too few modules: is import_support.ROOT right?"
    for module in graph:
        layer_of(module)


def test_no_import_points_up_a_layer() -> None:
    found = upward_edges(import_graph(type_checking=True))
    assert found == [], f"{len(found)} import(s) point up a layer (docs/architecture.md):\n" + "\n".join(found)


def test_no_imports_go_round_in_a_circle() -> None:
    graph = import_graph(type_checking=True)
    found = cycles(graph)
    assert found == [], (f"{len(found)} import cycle(s), {sum(map(len, found))} modules:\n"
                         + "\n".join(" -> ".join(a_cycle(graph, c)) for c in found))
