"""``GET /metrics``: the Prometheus text format, from a registry private to one app."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from contracts._status import DeliveryStatus
from execution_system.web._tally import STEP_BUCKETS, JournalTally

if TYPE_CHECKING:
    from execution_system.web._state import WebState


class _StoreCollector(Collector):
    """Figures read from the Host's public API at scrape time."""

    def __init__(self, state: WebState) -> None:
        self._state = state
        self._tally = JournalTally(state.host)

    def describe(self) -> Iterator[Metric]:
        """Nothing up front: registering must not read every journal (``collect`` does)."""
        return iter(())

    def collect(self) -> Iterator[Metric]:
        host = self._state.host
        by_status = GaugeMetricFamily(
            "execsys_deliveries", "Deliveries in the store by status", labels=["status"]
        )
        for status in DeliveryStatus:
            counted = host.delivery_page(limit=1, status=status.value).total
            by_status.add_metric([status.value], counted)
        yield by_status
        yield from self._journals()
        yield from self._leases()
        runners = self._state.runner_rows()
        yield GaugeMetricFamily(
            "execsys_runners_alive",
            "Runner processes serving the store",
            value=sum(1 for r in runners if r.get("alive")),
        )
        yield GaugeMetricFamily(
            "execsys_event_subscribers",
            "Open /events streams",
            value=self._state.feed.subscribers,
        )

    def _journals(self) -> Iterator[Metric]:
        tally = self._tally.refresh()
        steps = CounterMetricFamily(
            "execsys_steps_committed",
            "Committed steps of node work by result (completed, failed, blocked), from journals",
            labels=["result"],
        )
        for result in ("completed", "failed", "blocked"):
            steps.add_metric([result], tally.steps.get(result, 0))
        yield steps
        cumulative, buckets = 0, []
        for bound, count in zip([*map(str, STEP_BUCKETS), "+Inf"], tally.buckets, strict=True):
            cumulative += count
            buckets.append((bound, cumulative))
        latency = HistogramMetricFamily(
            "execsys_step_seconds",
            "Journal time from a step's start (or resumption) to its commit",
        )
        latency.add_metric([], buckets, tally.latency_sum)
        yield latency
        failures = CounterMetricFamily(
            "execsys_executor_failures",
            "Failed or error-blocked steps of action nodes, by error code, from journals",
            labels=["code"],
        )
        for code, count in sorted(tally.failures.items()):
            failures.add_metric([code], count)
        yield failures

    def _leases(self) -> Iterator[Metric]:
        counts = self._state.host.lease_counts()
        for name, key, text in (
            ("execsys_lease_grants", "granted", "Delivery leases this server's Host took"),
            ("execsys_lease_renewals", "renewed", "Lease expiries this server's Host pushed ahead"),
            (
                "execsys_lease_renewals_lost",
                "lost",
                "Renewals that found the lease taken over by another holder",
            ),
            (
                "execsys_lease_fencing_refusals",
                "fenced",
                "Writes of this server's Host refused because another holder's token is newer",
            ),
        ):
            yield CounterMetricFamily(name, text, value=counts.get(key, 0))


class WebMetrics:
    """The app's metrics: request counts and latencies, plus the store's gauges."""

    def __init__(self, state: WebState) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "execsys_http_requests",
            "HTTP requests by route and status",
            ["route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "execsys_http_request_seconds",
            "HTTP request latency by route",
            ["route"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
        )
        self.refusals = Counter(
            "execsys_http_refusals",
            "Requests refused by authentication or authorization, by code",
            ["code"],
            registry=self.registry,
        )
        self.registry.register(_StoreCollector(state))

    def observe(self, route: str, status: int, seconds: float) -> None:
        """Count one request."""
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
