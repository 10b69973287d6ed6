"""Following a chunk through the job graph: who produced it, who consumed it, what follows."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..dataids import CLOCKS, natural_key
from ..store import Store


@dataclass
class Downstream:
    """Jobs fed (directly or not) by a job's outputs at one dataid."""

    steps: list[tuple[int, str, list[tuple[str, str]]]] = field(default_factory=list)
    # (depth, jobid, [(datasetid, status)] of its OUT rows at the dataid; empty: not produced)
    cycles: list[list[str]] = field(default_factory=list)  # job paths that loop back


def outputs_of(store: Store, jobid: str) -> list[str]:
    return [i.datasetid for i in store.job_items(jobid) if i.itemtype == "OUT" and i.datasetid]


def downstream(store: Store, jobid: str, dataid: str) -> Downstream:
    """Breadth-first over consumers of the job's outputs; a cycle is reported, not followed."""
    result = Downstream()
    frontier: list[tuple[str, list[str]]] = [(jobid, [jobid])]
    seen = {jobid}
    depth = 0
    while frontier:
        depth += 1
        following = []
        for job, path in frontier:
            for dataset in outputs_of(store, job):
                for consumer in store.jobs_using(dataset, "IN"):
                    if consumer in path:
                        result.cycles.append([*path, consumer])
                        continue
                    if consumer in seen:
                        continue
                    seen.add(consumer)
                    result.steps.append((depth, consumer, store.out_status(consumer, dataid)))
                    following.append((consumer, [*path, consumer]))
        frontier = following
    return result


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A cycle in a job graph (job -> jobs consuming its outputs), if there is one."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(job: str, path: list[str]) -> list[str] | None:
        state[job] = 1
        for nxt in sorted(edges.get(job, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt, [*path, nxt])):
                return found
        state[job] = 2
        return None

    for job in sorted(edges):
        if job not in state and (found := visit(job, [job])):
            return found
    return None


def job_graph(rows: list[dict]) -> dict[str, set[str]]:
    """Edges producer -> consumer from rows of table job."""
    producers: dict[str, set[str]] = {}
    for row in rows:
        if row["itemtype"] == "OUT":
            producers.setdefault(row["datasetid"], set()).add(row["jobid"])
    edges: dict[str, set[str]] = {}
    for row in rows:
        if row["itemtype"] == "IN" and row["datasetid"] not in CLOCKS:
            for producer in producers.get(row["datasetid"], ()):
                edges.setdefault(producer, set()).add(row["jobid"])
    return edges


def pipeline_order(rows: list[dict]) -> list[str]:
    """Every job of the ``job`` table rows, each after the jobs that produce its inputs
    (lineage order); among jobs free to go next, and to break a cycle, by name."""
    edges = job_graph(rows)
    jobs = sorted({row["jobid"] for row in rows}, key=natural_key)
    waiting = dict.fromkeys(jobs, 0)  # how many of a job's producers are not placed yet
    for consumers in edges.values():
        for consumer in consumers:
            waiting[consumer] += 1
    order: list[str] = []
    placed: set[str] = set()
    while len(order) < len(jobs):
        free = [job for job in jobs if job not in placed and waiting[job] <= 0]
        job = free[0] if free else next(job for job in jobs if job not in placed)  # a cycle
        order.append(job)
        placed.add(job)
        for consumer in edges.get(job, ()):
            waiting[consumer] -= 1
    return order
