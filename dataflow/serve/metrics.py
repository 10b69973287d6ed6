"""``GET /metrics``: the store's chunks and run history in Prometheus' text format.

Every value is read from the store when Prometheus scrapes (one read-only open of the
store, a few grouped queries), so any number of servers on one store tell the same
numbers, and a run on any host counts. The chunks by status come from the store's
summary (``status_counts``); of the run history, a server counts each ended run once and
keeps the sums (:mod:`.runhistory`: a scrape reads only the runs from the oldest live one
on). Each scrape builds its own ``CollectorRegistry`` with the collectors below, and the
process-wide default registry of ``prometheus_client`` (this process's CPU and memory) is
never exposed.

- ``dataflow_chunks{job,status}`` (gauge): chunks (dataids) of a registered job with an
  OUT row in that status; each of RUNNING, READY, FAILED, RESUBMIT and HOLD is told for
  every job, 0 included, so that an alert on one finds it.
- ``dataflow_late_chunks{job}`` (gauge): the chunks ``utility check`` calls late now.
- ``dataflow_runs_started_total{job}``, ``dataflow_runs_failed_total{job}``,
  ``dataflow_runs_abandoned_total{job}`` (counters): the runs of the history, those that
  ended FAILED, and those of them whose run died without ending (recovered as
  abandoned). ``utility purge`` deletes history, which lowers them: Prometheus takes a
  lower counter for a reset. A run that had ended when a server counted it is not
  counted again if changed by hand, until that server restarts (:mod:`.runhistory`).
- ``dataflow_run_duration_seconds{job}`` (histogram): the durations of finished runs.
- ``dataflow_claim_latency_seconds{job}`` (histogram): for each chunk's first run, the
  seconds from the moment its inputs were all READY to the start of the run (see
  :meth:`dataflow.store.queries.metrics.MetricQueries.claim_latencies`).
- ``dataflow_items_landed_total{dataset}`` (counter): items this server landed from
  ``POST /stream/<dataset>`` since it started (a retried request that lands nothing is
  not counted again); ``utility drop`` runs without a server and is not counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from ..ops import freshness
from ..run.claim.lifecycle import ABANDONED, FAILED, HOLD, READY, RESUBMIT, RUNNING
from ..store import Row, Store, locate, open_store
from . import intake, runhistory

MEDIA = "text/plain; version=0.0.4; charset=utf-8"  # the text format every Prometheus reads
STATUSES = (RUNNING, READY, FAILED, RESUBMIT, HOLD)
# seconds: batch runs take from seconds to hours
DURATION_BOUNDS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
# seconds: a chunk waits for the next RunJob of cron, or for a free slot of max_parallel
LATENCY_BOUNDS = (1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 21600, 86400)


class StoreCollector(Collector):
    """The store's metrics, read at each scrape."""

    def __init__(self, db: str | None):
        self.db = db

    def collect(self) -> Iterator[Metric]:
        address = locate(self.db)
        with open_store(address, readonly=True) as store:
            families = read(store, history(str(address)))  # all read before it closes
        yield from families


def history(address: str) -> runhistory.RunHistory:
    """This server's count of the run history of the store at ``address``."""
    return runhistory.of(
        address, abandoned=ABANDONED, durations=DURATION_BOUNDS, latencies=LATENCY_BOUNDS
    )


def warm(db: str | None) -> None:
    """Count the store's ended runs (a server's start): the first scrape then reads little."""
    address = locate(db)
    with open_store(address, readonly=True) as store:
        history(str(address)).read(store)


def read(store: Store, counted: runhistory.RunHistory) -> list[Metric]:
    """Every metric of the store (see the module's docstring); the run history's through
    what this server has ``counted`` of it."""
    registered = store.job_ids()
    counts, run_durations, claim_latencies = counted.read(store)
    jobs = sorted({*registered, *(str(row["jobid"]) for row in counts)})
    durations = histogram(
        "dataflow_run_duration_seconds", "Seconds finished runs took, by job.",
        jobs, DURATION_BOUNDS, run_durations,
    )  # fmt: skip
    latencies = histogram(
        "dataflow_claim_latency_seconds",
        "Seconds from a chunk's inputs all READY to the start of its first run, by job.",
        jobs, LATENCY_BOUNDS, claim_latencies,
    )  # fmt: skip
    return [
        chunks(registered, store.status_counts()),
        late(registered, freshness.late(store)),
        *runs(jobs, counts),
        durations,
        latencies,
    ]


def chunks(jobs: Sequence[str], counts: list[Row]) -> GaugeMetricFamily:
    found = {(str(row["jobid"]), str(row["status"] or "")): row["chunks"] for row in counts}
    every = {(job, status): 0 for job in jobs for status in STATUSES}
    family = GaugeMetricFamily(
        "dataflow_chunks", "Chunks of each job by the status of their OUT rows.",
        labels=["job", "status"],
    )  # fmt: skip
    for (job, status), value in sorted({**every, **found}.items()):
        family.add_metric([job, status], float(value))  # type: ignore[arg-type]
    return family


def late(jobs: Sequence[str], chunks: list[freshness.Late]) -> GaugeMetricFamily:
    found = Counter(chunk.jobid for chunk in chunks)
    family = GaugeMetricFamily(
        "dataflow_late_chunks", "Chunks late on their job's ready_by (utility check).",
        labels=["job"],
    )  # fmt: skip
    for job in sorted({*jobs, *found}):
        family.add_metric([job], float(found[job]))
    return family


def runs(jobs: Sequence[str], counts: list[Row]) -> list[CounterMetricFamily]:
    found = {str(row["jobid"]): row for row in counts}
    families = []
    for name, what in (
        ("started", "Runs started, by job (the run history)."),
        ("failed", "Runs that ended FAILED, by job."),
        ("abandoned", "Runs that died without ending (recovered as abandoned), by job."),
    ):
        family = CounterMetricFamily(f"dataflow_runs_{name}", what, labels=["job"])
        for job in jobs:
            family.add_metric([job], float(found.get(job, {}).get(name) or 0))  # type: ignore[union-attr]
        families.append(family)
    return families


def histogram(
    name: str, what: str, jobs: Sequence[str], bounds: Sequence[float], rows: list[Row]
) -> HistogramMetricFamily:
    """A histogram by job from a store's rows (jobid, le, runs, seconds): the runs of one
    bucket each (le: its bound, None above every bound), made cumulative here."""
    within: dict[tuple[str, float | None], int] = {}
    seconds: Counter[str] = Counter()
    for row in rows:
        job, le = str(row["jobid"]), row["le"]
        within[(job, None if le is None else float(le))] = int(row["runs"])  # type: ignore[arg-type]
        seconds[job] += float(row["seconds"] or 0)  # type: ignore[arg-type]
    family = HistogramMetricFamily(name, what, labels=["job"])
    for job in sorted({*jobs, *seconds}):
        buckets, count = [], 0
        for bound in bounds:
            count += within.get((job, float(bound)), 0)
            buckets.append((floatToGoString(bound), count))
        count += within.get((job, None), 0)
        family.add_metric([job], [*buckets, ("+Inf", count)], seconds[job])
    return family


class LandedCollector(Collector):
    """The items this server landed, by dataset (counted in :data:`intake.LANDED`)."""

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "dataflow_items_landed",
            "Items this server landed from POST /stream/<dataset> since it started.",
            labels=["dataset"],
        )
        for dataset, items in sorted(intake.LANDED.counts().items()):
            family.add_metric([dataset], float(items))
        yield family


def scrape(db: str | None, query: Mapping[str, str]) -> bytes:
    """The answer to ``GET /metrics``: every metric, read now, in the text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(db))
    registry.register(LandedCollector())
    return generate_latest(registry)
