"""Trace context from the creating request to every delivery, over real HTTP on both backends:
a `traceparent` (and `tracestate`) given to POST /v1/jobs or to QStash's publish is stored
with the job and sent on each attempt; a malformed one is a 400 naming the header. With
tracing on (the OpenTelemetry SDK's in-memory exporter), creation is a span child of the
producer's and each attempt a span: the first a child of the creation span, a retry linked
to it."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from recoup.api.app import create_app
from recoup.jobs.model import HttpTarget, JobState
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.trace_context import TraceContext
from recoup.jobs.tracing import ATTEMPT_SPAN, CREATE_SPAN, SCHEDULE_SPAN, Tracing
from recoup.storage import Store, open_api_tables
from recoup.tenancy import issue_token, new_tenant
from recoup.timekeeping.clock import VirtualClock
from tests.api.conftest import api_settings
from tests.api.qstash_support import START
from tests.support import ServerThread

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PRODUCER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PRODUCER_SPAN}-01"
TRACESTATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"


@dataclass
class Flaky:
    """A loopback endpoint answering 500 to the first request, 200 after, recording headers."""

    headers: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        flaky = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                flaky.headers.append({k.lower(): v for k, v in self.headers.items()})
                self.send_response(500 if len(flaky.headers) == 1 else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"


@dataclass
class Traced:
    url: str
    token: str
    clock: VirtualClock
    scheduler: Scheduler
    tracing: Tracing
    spans: InMemorySpanExporter
    flaky: Flaky

    def post(self, path: str, **kwargs: object) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token}", **kwargs.pop("headers", {})}  # type: ignore[dict-item]
        return httpx.post(f"{self.url}{path}", headers=headers, **kwargs)  # type: ignore[arg-type]

    def run_both_attempts(self) -> None:
        """The first attempt (answered 500), then the retry once its backoff has passed."""
        worker = self.scheduler.worker(rng=random.Random(0), on_attempt=self.tracing.attempt)
        assert worker.drain() == 1
        self.clock.advance(timedelta(hours=1))
        assert worker.drain() == 1


@pytest.fixture
def traced(store: Store) -> Iterator[Traced]:
    clock = VirtualClock(START)
    scheduler = Scheduler(store, clock=clock, ssrf=SsrfGuard(allow_private=True))
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracing = Tracing(provider)
    app = create_app(
        store, clock=clock, settings=api_settings(), scheduler=scheduler, tracing=tracing
    )
    store.ensure_tenant(new_tenant("acme", now=START))
    token = issue_token(open_api_tables(store), "acme", now=START).secret
    flaky = Flaky()
    with ServerThread(app) as server:
        yield Traced(server.url, token, clock, scheduler, tracing, spans, flaky)
    flaky.server.shutdown()
    flaky.server.server_close()


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def check_spans_and_deliveries(traced: Traced, job_id: str) -> None:
    spans = traced.spans.get_finished_spans()
    [created] = by_name(spans, CREATE_SPAN)
    first, retry = sorted(
        by_name(spans, ATTEMPT_SPAN), key=lambda s: s.attributes["recoup.attempt"]
    )  # type: ignore[index]
    assert created.kind is SpanKind.PRODUCER
    assert created.parent is not None
    assert (format(created.parent.trace_id, "032x"), format(created.parent.span_id, "016x")) == (
        TRACE_ID,
        PRODUCER_SPAN,
    )
    assert created.attributes is not None and created.attributes["recoup.job.id"] == job_id
    # The first attempt is the creation span's child, in the producer's trace.
    assert first.kind is SpanKind.CONSUMER
    assert first.parent is not None and first.parent.span_id == created.context.span_id
    assert first.context.trace_id == int(TRACE_ID, 16)
    assert first.attributes is not None and first.attributes["recoup.outcome"] == "retry"
    # The retry starts a trace of its own, linked to the creation span.
    assert retry.parent is None and retry.context.trace_id != int(TRACE_ID, 16)
    assert [link.context.span_id for link in retry.links] == [created.context.span_id]
    assert retry.attributes is not None and retry.attributes["recoup.outcome"] == "succeeded"

    # What the job stored, and every delivery carried: the creation span's context.
    stored = traced.scheduler.get(job_id, tenant="acme")
    assert stored.state is JobState.SUCCEEDED
    sent = f"00-{TRACE_ID}-{format(created.context.span_id, '016x')}-01"
    assert stored.trace == TraceContext(sent, TRACESTATE)
    assert [(h["traceparent"], h["tracestate"]) for h in traced.flaky.headers] == [
        (sent, TRACESTATE),
        (sent, TRACESTATE),
    ]


def test_a_v1_job_carries_its_trace_context_to_every_attempt(traced: Traced) -> None:
    answer = traced.post(
        "/v1/jobs",
        json={
            "target": {"url": traced.flaky.url},
            "delay_seconds": 0,
            "retry": {"max_attempts": 2},
        },
        headers={"traceparent": TRACEPARENT, "tracestate": TRACESTATE},
    )
    assert answer.status_code == 201, answer.text
    traced.run_both_attempts()
    check_spans_and_deliveries(traced, answer.json()["id"])


def test_a_qstash_message_carries_its_trace_context_to_every_attempt(traced: Traced) -> None:
    answer = traced.post(
        f"/qstash/v2/publish/{traced.flaky.url}",
        content="x",
        headers={"traceparent": TRACEPARENT, "tracestate": TRACESTATE, "Upstash-Retries": "1"},
    )
    assert answer.status_code == 201, answer.text
    traced.run_both_attempts()
    check_spans_and_deliveries(traced, answer.json()["messageId"])


def test_a_malformed_trace_context_is_refused_naming_the_header(traced: Traced) -> None:
    bad = TRACEPARENT.replace("-01", "")
    answer = traced.post(
        "/v1/jobs",
        json={"target": {"url": traced.flaky.url}, "delay_seconds": 0},
        headers={"traceparent": bad},
    )
    assert answer.status_code in (400, 422)
    assert [e["field"] for e in answer.json()["errors"]] == ["traceparent"]
    answer = traced.post(
        f"/qstash/v2/publish/{traced.flaky.url}",
        content="x",
        headers={"traceparent": TRACEPARENT, "tracestate": "a=1,a=2"},
    )
    assert answer.status_code == 400
    assert [e["field"] for e in answer.json()["errors"]] == ["tracestate"]
    assert traced.spans.get_finished_spans() == ()


def test_without_tracing_the_producers_context_is_stored_and_sent(traced: Traced) -> None:
    job = traced.scheduler.enqueue(
        HttpTarget(url=traced.flaky.url), tenant="acme", trace=TraceContext(TRACEPARENT, None)
    )
    assert traced.scheduler.get(job.id, tenant="acme").trace == TraceContext(TRACEPARENT, None)
    traced.scheduler.worker(rng=random.Random(0)).drain()
    assert traced.flaky.headers[0]["traceparent"] == TRACEPARENT
    assert "tracestate" not in traced.flaky.headers[0]


def get(traced: Traced, path: str) -> httpx.Response:
    return httpx.get(f"{traced.url}{path}", headers={"Authorization": f"Bearer {traced.token}"})


def test_a_jobs_answers_show_the_trace_context_it_carries(traced: Traced) -> None:
    answer = traced.post(
        "/v1/jobs",
        json={"target": {"url": traced.flaky.url}, "delay_seconds": 60},
        headers={"traceparent": TRACEPARENT, "tracestate": TRACESTATE},
    )
    assert answer.status_code == 201, answer.text
    [created] = by_name(traced.spans.get_finished_spans(), CREATE_SPAN)
    stored = f"00-{TRACE_ID}-{format(created.context.span_id, '016x')}-01"
    shown = get(traced, f"/v1/jobs/{answer.json()['id']}").json()
    assert (answer.json()["traceparent"], answer.json()["tracestate"]) == (stored, TRACESTATE)
    assert (shown["traceparent"], shown["tracestate"]) == (stored, TRACESTATE)
    untraced = traced.post(
        "/v1/jobs", json={"target": {"url": traced.flaky.url}, "delay_seconds": 60}
    ).json()
    # Without a traceparent, the creation span is the root of a trace of its own.
    assert untraced["traceparent"] is not None
    assert untraced["traceparent"].split("-")[1] != TRACE_ID
    assert untraced["tracestate"] is None


def check_occurrences(traced: Traced, schedule_id: str) -> None:
    """Two occurrences of a schedule made with the producer's trace context: each job carries
    the schedule's creation span context, every delivery sends it, and each attempt is a root
    span linked to the schedule's creation."""
    spans = traced.spans.get_finished_spans()
    [created] = by_name(spans, SCHEDULE_SPAN)
    assert created.kind is SpanKind.PRODUCER
    assert created.parent is not None and created.parent.span_id == int(PRODUCER_SPAN, 16)
    assert created.context.trace_id == int(TRACE_ID, 16)
    assert created.attributes is not None
    assert created.attributes["recoup.schedule.id"] == schedule_id
    sent = f"00-{TRACE_ID}-{format(created.context.span_id, '016x')}-01"
    assert traced.scheduler.get_schedule(schedule_id, tenant="acme").trace == TraceContext(
        sent, TRACESTATE
    )
    worker = traced.scheduler.worker(rng=random.Random(0), on_attempt=traced.tracing.attempt)
    for _ in range(2):
        traced.clock.advance(timedelta(minutes=1))
        worker.drain()
    jobs = traced.scheduler.list_jobs(tenant="acme", schedule_id=schedule_id).jobs
    assert len(jobs) >= 2
    assert {j.trace for j in jobs} == {TraceContext(sent, TRACESTATE)}
    assert len(traced.flaky.headers) >= 2
    assert {(h["traceparent"], h["tracestate"]) for h in traced.flaky.headers} == {
        (sent, TRACESTATE)
    }
    attempts = by_name(traced.spans.get_finished_spans(), ATTEMPT_SPAN)
    assert len(attempts) == len(traced.flaky.headers)
    assert {a.context.trace_id for a in attempts}.isdisjoint({int(TRACE_ID, 16)})
    assert len({a.context.trace_id for a in attempts}) == len(attempts)
    for attempt in attempts:
        assert attempt.parent is None
        assert [link.context.span_id for link in attempt.links] == [created.context.span_id]
        assert attempt.links[0].attributes == {"recoup.link": "schedule"}
    for job in jobs:
        shown = get(traced, f"/v1/jobs/{job.id}").json()
        assert (shown["traceparent"], shown["tracestate"]) == (sent, TRACESTATE)


def test_a_v1_schedule_gives_its_trace_context_to_every_occurrence(traced: Traced) -> None:
    answer = traced.post(
        "/v1/schedules",
        json={
            "name": "nightly",
            "cron": "* * * * *",
            "timezone": "UTC",
            "target": {"url": traced.flaky.url},
        },
        headers={"traceparent": TRACEPARENT, "tracestate": TRACESTATE},
    )
    assert answer.status_code == 201, answer.text
    assert answer.json()["traceparent"].startswith(f"00-{TRACE_ID}-")
    assert answer.json()["tracestate"] == TRACESTATE
    check_occurrences(traced, answer.json()["id"])


def test_a_qstash_schedule_gives_its_trace_context_to_every_occurrence(traced: Traced) -> None:
    answer = traced.post(
        f"/qstash/v2/schedules/{traced.flaky.url}",
        content="x",
        headers={
            "Upstash-Cron": "* * * * *",
            "traceparent": TRACEPARENT,
            "tracestate": TRACESTATE,
        },
    )
    assert answer.status_code == 201, answer.text
    check_occurrences(traced, answer.json()["scheduleId"])


def test_a_schedules_malformed_trace_context_is_refused_naming_the_header(
    traced: Traced,
) -> None:
    answer = traced.post(
        "/v1/schedules",
        json={"cron": "* * * * *", "timezone": "UTC", "target": {"url": traced.flaky.url}},
        headers={"traceparent": "00-zz"},
    )
    assert answer.status_code in (400, 422)
    assert [e["field"] for e in answer.json()["errors"]] == ["traceparent"]
    answer = traced.post(
        f"/qstash/v2/schedules/{traced.flaky.url}",
        content="x",
        headers={"Upstash-Cron": "* * * * *", "tracestate": TRACESTATE},
    )
    assert answer.status_code == 400
    assert [e["field"] for e in answer.json()["errors"]] == ["tracestate"]
    assert traced.scheduler.list_schedules(tenant="acme").schedules == []
