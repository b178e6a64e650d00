"""``GET /metrics``: the Prometheus text format, from a registry private to one app."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from contracts._status import DeliveryStatus

if TYPE_CHECKING:
    from execution_system.web._state import WebState


class _StoreCollector(Collector):
    """Gauges read from the Host's public API at scrape time."""

    def __init__(self, state: WebState) -> None:
        self._state = state

    def collect(self) -> Iterator[GaugeMetricFamily]:
        host = self._state.host
        by_status = GaugeMetricFamily(
            "execsys_deliveries", "Deliveries in the store by status", labels=["status"]
        )
        for status in DeliveryStatus:
            counted = host.delivery_page(limit=1, status=status.value)["total"]
            by_status.add_metric([status.value], counted)
        yield by_status
        yield GaugeMetricFamily(
            "execsys_runners_alive", "Runner processes serving the store", value=1
        )
        yield GaugeMetricFamily(
            "execsys_event_subscribers",
            "Open /events streams",
            value=self._state.feed.subscribers,
        )


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
