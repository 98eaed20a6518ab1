"""The console's routes: five pages, two POSTs, static files, all behind :class:`~sqsjobs.console.security.Guard`.

Pages are rendered whole on the server (Jinja2, autoescaped); ``static/console.js``
re-fetches a page every few seconds and swaps the regions marked
``data-refresh``, keeping the scroll position. AWS is called in a worker
thread (boto3 blocks); a failed call shows as a one-line error on the page,
with endpoints and environment values redacted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from sqsjobs._env_names import did_you_mean
from sqsjobs._errors import SqsJobsError
from sqsjobs._settings import ENV_TABLE
from sqsjobs.console import dead_letters, job_record, overview, redrive_actions, runs
from sqsjobs.console.config import WINDOWS_HOURS, ConsoleConfig, is_loopback
from sqsjobs.console.costs import CostCache
from sqsjobs.console.security import COOKIE, CSRF_FIELD, HEADERS, Guard, Redactor
from sqsjobs.ops import _metrics_reader as job_metrics

if TYPE_CHECKING:
    from jinja2 import Environment

    from sqsjobs.console.sources import Sources

HERE: Final = Path(__file__).parent
DEFAULT_HOURS: Final = 3
#: longest filter or key the pages accept (DynamoDB keys are at most 2048 bytes)
MAX_PARAM_CHARS: Final = job_record.MAX_KEY_BYTES
NAV: Final = (("/", "Overview", "overview"), ("/dlq", "Dead letters", "dlq"), ("/jobs", "Jobs", "jobs"),
              ("/lookup", "Job lookup", "lookup"), ("/runs", "Runs & leases", "runs"))
T = TypeVar("T")


@dataclass
class Console:
    """What every route needs: options, clients, access rules, templates, the redrive journal."""

    config: ConsoleConfig
    sources: Sources
    guard: Guard
    templates: Jinja2Templates
    redactor: Redactor
    journal: redrive_actions.RedriveJournal = field(default_factory=redrive_actions.RedriveJournal)
    #: the overview's cost figures, read at most every few minutes (console/costs.py)
    costs: CostCache = field(default_factory=CostCache)

    async def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T | None, str | None]:
        """Run a blocking read in a worker thread; AWS and sqsjobs errors become one redacted line."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return await run_in_threadpool(fn, *args, **kwargs), None
        except (ClientError, BotoCoreError, SqsJobsError) as exc:
            # A store error wraps AWS's own: the operator wants AWS's code, not our wrapper's name.
            cause = exc.__cause__ if isinstance(exc.__cause__, ClientError) else exc
            if isinstance(cause, ClientError):
                error = cause.response.get("Error", {})
                return None, self.redactor.clean(f"{error.get('Code', 'ClientError')}: {error.get('Message', '')}")
            return None, self.redactor.clean(f"{type(exc).__name__}: {exc}")

    def page(self, request: Request, template: str, *, active: str, status_code: int = 200,
             **context: Any) -> Response:
        """Render ``template`` with the layout's context."""
        notes = [self.redactor.clean(note) for note in context.pop("notes", ())]
        context.setdefault("refresh_url", _self_url(request))
        return self.templates.TemplateResponse(request, template, {
            "active": active, "nav": NAV, "read_only": self.config.read_only,
            "refresh_seconds": self.config.refresh_seconds, "csrf_field": CSRF_FIELD,
            "csrf_token": self.guard.csrf_token, "generated_at": self.sources.clock(), "notes": notes, **context,
        }, status_code=status_code)


def create_app(config: ConsoleConfig, sources: Sources, *, guard: Guard | None = None) -> Starlette:
    """The console as an ASGI app (serve it with uvicorn, or test it with Starlette's TestClient)."""
    console = Console(
        config=config,
        sources=sources,
        guard=guard or Guard(token=config.token, read_only=config.read_only, loopback=is_loopback(config.host)),
        templates=Jinja2Templates(env=_environment()),
        redactor=Redactor.of([config.endpoint_url, config.token, sources.queue_url, sources.dlq_url]),
    )

    def route(handler: Callable[[Console, Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await handler(console, request)

        return endpoint

    app = Starlette(routes=[
        Route("/", route(overview_page)),
        Route("/dlq", route(dlq_page)),
        Route("/dlq/preview", route(redrive_preview), methods=["POST"]),
        Route("/dlq/redrive", route(redrive_confirm), methods=["POST"]),
        Route("/jobs", route(jobs_page)),
        Route("/lookup", route(lookup_page)),
        Route("/runs", route(runs_page)),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ])
    app.add_middleware(GuardMiddleware, guard=console.guard)
    app.state.console = console
    return app


class GuardMiddleware(BaseHTTPMiddleware):
    """Refuses what :class:`Guard` refuses, turns ``?token=`` into a cookie, adds the security headers."""

    def __init__(self, app: Any, guard: Guard) -> None:
        super().__init__(app)
        self.guard = guard

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        from_query = request.query_params.get("token")
        given = _bearer(request) or request.cookies.get(COOKIE) or from_query
        refused = self.guard.refusal(request.method, host=request.headers.get("host", ""), token_given=given)
        if refused is not None:
            response: Response = PlainTextResponse(refused[1], status_code=refused[0])
        elif from_query is not None and self.guard.token is not None:
            # Keep the token out of the address bar, the history and any link: a cookie from now on.
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            response = RedirectResponse(request.url.path + (f"?{urlencode(rest)}" if rest else ""), status_code=303)
            response.set_cookie(COOKIE, from_query, httponly=True, samesite="strict", path="/")
        else:
            response = await call_next(request)
        for name, value in HEADERS.items():
            response.headers[name] = value
        return response


async def form_or_refusal(console: Console, request: Request) -> dict[str, str] | Response:
    """The POSTed form, or a 403 response without the right CSRF token (every POST route starts here)."""
    checked = console.guard.form_refusal(await request.body(), origin=request.headers.get("origin"),
                                         host=request.headers.get("host", ""))
    if isinstance(checked, tuple):
        return PlainTextResponse(checked[1], status_code=checked[0])
    return checked


async def redrive_form(console: Console, request: Request) -> redrive_actions.RedriveRequest | Response:
    """The redrive form of a POST, or the response that refuses it (403 without CSRF, 400 when bad)."""
    form = await form_or_refusal(console, request)
    if isinstance(form, Response):
        return form
    try:
        wanted = redrive_actions.RedriveRequest.from_form(form)
    except SqsJobsError as exc:
        return await dlq_page(console, request, form_error=str(exc), status_code=400)
    if console.sources.dlq_url is None:
        return await dlq_page(console, request, status_code=400)
    return wanted


# -- pages ----------------------------------------------------------------------------------------------


async def overview_page(console: Console, request: Request) -> Response:
    """Queues against their alarm limits, alarms, throughput and failure rate."""
    hours = _hours(request)
    data, error = await console.read(overview.read_overview, console.sources, console.config, hours=hours,
                                     costs=console.costs)
    return console.page(request, "overview.html", active="overview", title="Overview", data=data, error=error,
                        hours=hours, window_choices=WINDOWS_HOURS, notes=data.notes if data else ())


async def dlq_page(console: Console, request: Request, *, preview: Any = None, form_error: str | None = None,
                   job: str | None = None, error_filter: str | None = None, status_code: int = 200) -> Response:
    """Dead letters by job and reason, with samples; the redrive preview and result when there is one."""
    job = job if job is not None else _param(request, "job")
    error_filter = error_filter if error_filter is not None else _param(request, "error")
    data = error = None
    if console.sources.dlq_url is None:
        error = "no DLQ: the queue has no redrive policy; pass --dlq"
    else:
        data, error = await console.read(dead_letters.read_dead_letters, console.sources, console.sources.dlq_url,
                                         sample=console.config.sample, job=job, error=error_filter)
    refresh_url = "/dlq" + (f"?{urlencode(_filters(job, error_filter))}" if job or error_filter else "")
    return console.page(
        request, "dlq.html", active="dlq", title="Dead letters", data=data, error=error or form_error,
        notes=(data.note,) if data is not None and data.note else (),
        job=job, error_filter=error_filter, preview=preview, refresh_url=refresh_url,
        result=console.journal.get(request.query_params.get("redrive")), status_code=status_code,
        filter_url=lambda **changes: _filter_url({"job": job, "error": error_filter, **changes}),
    )


async def redrive_preview(console: Console, request: Request) -> Response:
    """POST: the dry run of a redrive with the page's filters."""
    wanted = await redrive_form(console, request)
    if isinstance(wanted, Response):
        return wanted
    summary, error = await console.read(redrive_actions.preview, console.sources, str(console.sources.dlq_url),
                                        wanted)
    return await dlq_page(console, request, preview=summary, form_error=error, job=wanted.job,
                          error_filter=wanted.error)


async def redrive_confirm(console: Console, request: Request) -> Response:
    """POST: the redrive itself, then a redirect to its result (a reload never redrives twice)."""
    wanted = await redrive_form(console, request)
    if isinstance(wanted, Response):
        return wanted
    summary, error = await console.read(redrive_actions.redrive_now, console.sources, str(console.sources.dlq_url),
                                        wanted)
    if summary is None:
        return await dlq_page(console, request, form_error=error, job=wanted.job, error_filter=wanted.error,
                              status_code=502)
    ticket = console.journal.add(summary)
    query = urlencode({**_filters(wanted.job, wanted.error), "redrive": ticket})
    return RedirectResponse(f"/dlq?{query}", status_code=303)


async def jobs_page(console: Console, request: Request) -> Response:
    """Per job: succeeded, failed, retried, dead-lettered, duplicates, cancelled, expired, duration p50/p95."""
    hours = _hours(request)
    notes: list[str] = []

    def read() -> list[job_metrics.JobFigures]:
        cloudwatch, config = console.sources.cloudwatch, console.config
        service = job_metrics.pick_service(cloudwatch, config.namespace, config.service, notes)
        if service is None:
            return []
        window = job_metrics.Window.last(hours=hours, now=console.sources.clock())
        return job_metrics.job_figures(cloudwatch, config.namespace, service,
                                       job_metrics.job_names(cloudwatch, config.namespace, service), window)

    rows, error = await console.read(read)
    return console.page(request, "jobs.html", active="jobs", title="Jobs", rows=rows, error=error, hours=hours,
                        window_choices=WINDOWS_HOURS, notes=notes)


async def lookup_page(console: Console, request: Request) -> Response:
    """One job by its idempotency key: state, attempts, last error, result, times; or when a delayed one is due."""
    key = _param(request, "key")
    found: job_record.JobStatusView | job_record.ScheduledJobView | None = None
    error: str | None = None
    if key is not None:
        if console.sources.table is None:
            error = (f"job lookup needs the idempotency table: pass --table or set {ENV_TABLE}"
                     f"{did_you_mean(ENV_TABLE)}")
        elif len(key.encode()) > job_record.MAX_KEY_BYTES:
            error = f"a key is at most {job_record.MAX_KEY_BYTES} bytes"
        else:
            found, error = await console.read(job_record.job_status, console.sources.dynamodb,
                                              console.sources.table, key, console.sources.clock())
            if found is None and error is None and console.sources.scheduler and console.sources.schedule_group:
                scheduled, error = await console.read(job_record.scheduled_job, console.sources.scheduler,
                                                      console.sources.schedule_group, key)
                found = scheduled
    return console.page(request, "lookup.html", active="lookup", title="Job lookup", key=key, found=found,
                        error=error)


async def runs_page(console: Console, request: Request) -> Response:
    """Chunked runs and scheduled leases (a bounded scan), one run by ``JOB:RUN_ID``, one job group by its id."""
    table = console.sources.table
    run_ref = _param(request, "run")
    group_id = _param(request, "group")
    data = found = group = error = None
    if table is None:
        error = (f"runs and leases live in the idempotency table: pass --table or set {ENV_TABLE}"
                 f"{did_you_mean(ENV_TABLE)}")
    else:
        data, error = await console.read(runs.read_runs_and_leases, console.sources.dynamodb, table)
        if run_ref is not None:
            parsed = runs.parse_run_ref(run_ref)
            if parsed is None:
                error = f"a run is JOB:RUN_ID, got {run_ref!r}"
            else:
                found, error = await console.read(runs.read_run, console.sources.dynamodb, table, *parsed)
        if group_id is not None and error is None:
            group, error = await console.read(runs.read_group, console.sources.dynamodb, table, group_id)
    return console.page(request, "runs.html", active="runs", title="Runs & leases", data=data, found=found,
                        run_ref=run_ref, group=group, group_id=group_id, error=error)


# -- helpers ------------------------------------------------------------------------------------------------


def _environment() -> Environment:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    from sqsjobs.cli.render import format_age
    from sqsjobs.ops._cost import format_jobs, format_usd

    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=StrictUndefined)
    env.filters["age"] = format_age
    env.filters["when"] = _when
    env.filters["ms"] = lambda value: "-" if value is None else f"{value:,.0f} ms"
    env.filters["usd"] = lambda value: "-" if value is None else format_usd(value)
    env.filters["jobs"] = format_jobs
    return env


def _when(epoch: float | None) -> str:
    return "-" if epoch is None else datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _param(request: Request, name: str) -> str | None:
    value = request.query_params.get(name, "").strip()
    return value[:MAX_PARAM_CHARS] or None


def _hours(request: Request) -> int:
    raw = request.query_params.get("hours", "")
    return int(raw) if raw.isdigit() and int(raw) in WINDOWS_HOURS else DEFAULT_HOURS


def _filters(job: str | None, error: str | None) -> dict[str, str]:
    return {k: v for k, v in (("job", job), ("error", error)) if v}


def _filter_url(filters: dict[str, str | None]) -> str:
    query = urlencode({k: v for k, v in filters.items() if v})
    return "/dlq" + (f"?{query}" if query else "")


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    return header[7:] if header.lower().startswith("bearer ") else None


def _self_url(request: Request) -> str:
    query = urlencode([(k, v) for k, v in request.query_params.multi_items() if k not in ("token", "redrive")])
    return request.url.path + (f"?{query}" if query else "")
