"""``LocalCloud``: the moto server, the deployed template and its runners, as one handle.

Used by ``sqsjobs local up``, the pytest plugin and the demo, so all three run
exactly the same emulation. ``stop()`` (or leaving the ``with`` block) ends
every thread and child process and frees the ports.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqsjobs._settings import ENV_LOG_LEVEL
from sqsjobs.local.alarms import AlarmTransition
from sqsjobs.local.aws import Clients, local_environment
from sqsjobs.local.control import Action, ControlServer, remove_state, write_state
from sqsjobs.local.deploy import deploy
from sqsjobs.local.errors import LocalCloudError, ServerDiedError, TemplateError
from sqsjobs.local.inventory import Inventory, inventory
from sqsjobs.local.invoker import FunctionPool, InvocationResult
from sqsjobs.local.metric_store import parse_emf
from sqsjobs.local.model import Deployment, Schedule
from sqsjobs.local.one_time import Fired, OneTimeScheduleRunner
from sqsjobs.local.output import Output
from sqsjobs.local.schedules import Scheduler, scheduled_event
from sqsjobs.local.server import MotoServer
from sqsjobs.local.snapshot import Header, check_resumable
from sqsjobs.local.sqs_poller import SqsPoller
from sqsjobs.local.stack import StackQueues
from sqsjobs.local.stream_poller import StreamPoller
from sqsjobs.local.telemetry import Telemetry
from sqsjobs.local.template import Template

if TYPE_CHECKING:
    from sqsjobs.local.reload import ReloadLoop

_TICK_S = 1.0


class LocalCloud(StackQueues):
    """A running local cloud. Start it with :meth:`start`; stop it with :meth:`stop`."""

    def __init__(self, *, server: MotoServer, template: Template, deployment: Deployment, output: Output) -> None:
        self.server = server
        self.template = template
        self.deployment = deployment
        self.output = output
        self.clients = Clients(server.endpoint)
        self.telemetry = Telemetry(deployment, self.clients, report=self._event)
        self.metrics = self.telemetry.metrics
        self.events: list[tuple[str, str]] = []
        self.failure: LocalCloudError | None = None
        self.pools: dict[str, FunctionPool] = {}
        self.sqs_pollers: list[SqsPoller] = []
        self.stream_pollers: list[StreamPoller] = []
        self.alarms = self.telemetry.alarms
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._monitor = threading.Thread(target=self._watch, name="local-cloud-monitor", daemon=True)
        self._scheduler: Scheduler | None = None
        self.one_time: OneTimeScheduleRunner | None = None
        self._control: ControlServer | None = None
        self._state_path: Path | None = None
        self._stopped = False
        self._reloader: ReloadLoop | None = None
        #: how many times the function workers were restarted for new code
        self.reloads = 0
        #: set when another process asked this cloud to stop (``sqsjobs local down``)
        self.stop_requested = threading.Event()
        #: the snapshot this cloud resumed (None: it started empty)
        self.resumed: Header | None = None
        #: after ``stop`` with a snapshot: what the snapshot holds (None: nothing was kept, ``save_failure`` says why)
        self.kept: Inventory | None = None
        self._streams_path: Path | None = None
        self._positions_written: dict[str, dict[str, str]] = {}

    # -- lifecycle -------------------------------------------------------------

    @classmethod
    def start(
        cls,
        template: str | Path = "template.yaml",
        *,
        port: int | None = None,
        parameters: dict[str, str] | None = None,
        stack_name: str = "sqsjobs-local",
        output: Output | None = None,
        state_path: Path | None = None,
        extra_paths: tuple[Path, ...] = (),
        log_level: str | None = None,
        reload: bool = False,
        snapshot: Path | None = None,
        streams_path: Path | None = None,
    ) -> LocalCloud:
        """Start a server, deploy ``template`` on it and run its functions' event sources.

        ``state_path`` (used by ``local up``) records the cloud for
        ``sqsjobs enqueue`` and ``sqsjobs local fire`` in other processes. With ``snapshot`` (also
        ``local up``'s) the cloud resumes the state saved there at its last stop and saves it there
        when it stops (``sqsjobs.local.snapshot``); ``streams_path`` keeps where each stream mapping
        had got to, so a resumed mapping goes on after the records it handled.
        ``log_level`` sets the functions' Powertools log level (``"DEBUG"`` makes the
        worker log each job's outcome); ``reload`` restarts the function workers
        whenever a file under a ``CodeUri`` changes.
        """
        parsed = Template.load(template)
        _check_parameters(parsed, dict(parameters or {}))
        resumed = check_resumable(snapshot) if snapshot is not None else None  # before anything starts
        positions = _read_positions(streams_path) if resumed is not None else {}
        server = MotoServer.start(port, snapshot=snapshot)
        try:
            clients = Clients(server.endpoint)
            deployment = deploy(parsed, clients, stack_name=stack_name, parameters=dict(parameters or {}))
            cloud = cls(server=server, template=parsed, deployment=deployment, output=output or Output())
        except BaseException:
            server.stop()
            raise
        cloud.resumed = resumed
        cloud._streams_path = streams_path
        try:
            cloud._run(extra_paths=extra_paths, state_path=state_path, log_level=log_level, reload=reload,
                       positions=positions)
        except BaseException:
            cloud.stop()
            raise
        return cloud

    def _run(self, *, extra_paths: tuple[Path, ...], state_path: Path | None, log_level: str | None,
             reload: bool, positions: dict[str, dict[str, str]]) -> None:
        d = self.deployment
        for warning in d.warnings:
            self._event("warn", warning)
        if d.without_local_effect:
            self._event("info", "no local effect: " + ", ".join(sorted(d.without_local_effect)))
        base_env = {**os.environ, **local_environment(self.server.endpoint, self.clients.region)}
        if log_level is not None:
            base_env[ENV_LOG_LEVEL] = log_level  # a function's own Environment still wins
        for logical_id, spec in d.functions.items():
            self.pools[logical_id] = FunctionPool(
                spec, base_env=base_env, log=self._log, extra_paths=extra_paths, observe=self.telemetry.invoked
            )
        # Import every handler now: a broken import shows before any message is taken.
        self._warm_all()
        for mapping in d.sqs_mappings:
            if mapping.enabled:
                poller = SqsPoller(
                    mapping, self.pools[mapping.function], self.clients.get("sqs"),
                    region=self.clients.region, report=self._event, healthy=self.healthy,
                    max_receive_count=getattr(d.queue_by_url(mapping.queue_url), "max_receive_count", 0),
                )
                self.sqs_pollers.append(poller)
        for stream_mapping in d.stream_mappings:
            if stream_mapping.enabled:
                function_name = d.functions[stream_mapping.function].name
                self.stream_pollers.append(
                    StreamPoller(stream_mapping, self.pools[stream_mapping.function],
                                 self.clients.get("dynamodbstreams"), report=self._event, healthy=self.healthy,
                                 sqs=self.clients.get("sqs"), resume=positions.get(stream_mapping.logical_id),
                                 iterator_age=functools.partial(self.telemetry.lambda_metric, function_name,
                                                                "IteratorAge", unit="Milliseconds"))
                )
        self._scheduler = Scheduler(d.schedules, self._fire_scheduled, report=self._event)
        # Delayed jobs: the one-time schedules apps create in the template's groups fire at their time.
        self.one_time = OneTimeScheduleRunner(self.clients, groups=list(d.schedule_groups.values()),
                                              report=self._event)
        for poller in self.sqs_pollers:
            poller.start()
        for stream_poller in self.stream_pollers:
            stream_poller.start()
        self._scheduler.start()
        self.one_time.start()
        self._monitor.start()
        if reload:
            from sqsjobs.local.reload import CodeWatcher, ReloadLoop

            self._reloader = ReloadLoop(CodeWatcher(self.code_dirs()), self._reload_after)
            self._reloader.start()
        if state_path is not None:
            self._control = ControlServer(cloud_actions(self))
            self._control.start()
            self._state_path = state_path
            write_state(state_path, self.state())

    def _warm_all(self) -> list[str]:
        """Start one worker per function (importing its handler); report and return those that fail to import."""
        failures = self._each_pool(lambda pool: pool.warm())
        self._report_imports(failures, "its event sources are paused and their messages stay unprocessed until "
                                       "it imports")
        return [logical_id for logical_id, failure in failures.items() if failure is not None]

    def _each_pool(self, action: Callable[[FunctionPool], InvocationResult | None],
                   ) -> dict[str, InvocationResult | None]:
        with ThreadPoolExecutor(max_workers=max(1, len(self.pools))) as executor:
            return dict(zip(self.pools, executor.map(action, self.pools.values()), strict=True))

    def _report_imports(self, failures: dict[str, InvocationResult | None], consequence: str) -> None:
        """One line per distinct import failure, naming the functions it stops (they share their code)."""
        by_line: dict[str, list[str]] = {}
        for logical_id, failure in failures.items():
            if failure is None:
                self.pools[logical_id].imported()
            elif self.pools[logical_id].report_once(failure):
                by_line.setdefault(failure.one_line(), []).append(logical_id)
        for line, functions in by_line.items():
            self._event("error", f"{line}; {', '.join(functions)}: {consequence}")

    def code_dirs(self) -> list[Path]:
        """Every function's ``CodeUri`` directory (what ``--reload`` watches)."""
        return sorted({spec.code_dir for spec in self.deployment.functions.values()})

    def reload(self, changed: list[Path] | None = None) -> list[str]:
        """Load every function's code again; queues, tables and the DLQ stay. Returns the functions whose code
        no longer imports.

        Invocations running now finish on the code they started with. Code that no longer imports
        is said once, in one line (``file:line: Type: message``), and the previous code keeps
        serving (``FunctionPool.reload``) until a change imports again.
        """
        failures = self._each_pool(lambda pool: pool.reload())
        broken = [logical_id for logical_id, failure in failures.items() if failure is not None]
        stale = {logical_id for logical_id in broken if self.pools[logical_id].stale is not None}
        self.reloads += 1
        shown = ", ".join(str(p.name) for p in (changed or [])[:3]) + (" ..." if changed and len(changed) > 3 else "")
        if len(broken) < len(self.pools):
            self._event("info", f"reloaded {len(self.pools) - len(broken)} of {len(self.pools)} function(s)"
                                + (f" after a change to {shown}" if shown else ""))
        self._report_imports({k: v for k, v in failures.items() if v is None or k in stale},
                             "still serving the previous code until a change imports")
        self._report_imports({k: v for k, v in failures.items() if v is not None and k not in stale},
                             "its event sources are paused until it imports")
        return broken

    def _reload_after(self, changed: list[Path]) -> None:
        if not self._stopped:
            self.reload(changed)

    def stop(self) -> None:
        """Stop runners, kill workers, stop the server, free ports, remove the state file."""
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        if self._reloader is not None:
            self._reloader.stop()
        if self._control is not None:
            self._control.stop()
        if self._state_path is not None:
            remove_state(self._state_path, os.getpid())
        for poller in self.sqs_pollers:
            poller.halt()
        for stream_poller in self.stream_pollers:
            stream_poller.halt()
        if self._scheduler is not None:
            self._scheduler.stop()
        if self.one_time is not None:
            self.one_time.stop()
        for pool in self.pools.values():
            pool.close()  # busy invocations end now, so pollers stop promptly
        for poller in self.sqs_pollers:
            poller.stop()
        for stream_poller in self.stream_pollers:
            stream_poller.stop()
        if self._monitor.is_alive():
            self._monitor.join(timeout=5)
        if self.server.snapshot is not None and self.failure is None:
            self._write_positions()
            try:
                self.kept = inventory(self.clients, self.deployment)
            except Exception as exc:  # the server is in trouble: its own save says what happened
                self._event("warn", f"could not count what the saved state holds: {exc}")
        self.server.stop()
        if self.server.save_failure:
            self.kept = None

    def _write_positions(self) -> None:
        """Record where each stream mapping has got to (only when it changed)."""
        if self._streams_path is None:
            return
        positions = {p.mapping.logical_id: dict(p.positions) for p in self.stream_pollers}
        if positions != self._positions_written:
            write_state(self._streams_path, positions)
            self._positions_written = positions

    @property
    def save_failure(self) -> str:
        """Why the state could not be saved at ``stop`` ("" when it was, or when the cloud keeps none)."""
        return self.server.save_failure

    def __enter__(self) -> LocalCloud:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- health, metrics, alarms -----------------------------------------------

    def healthy(self) -> bool:
        """False once the moto server has died (runners pause, ``check()`` raises)."""
        return self.failure is None

    def check(self) -> None:
        """Raise the failure that stopped the local cloud, if any."""
        if self.failure is not None:
            raise self.failure

    def _watch(self) -> None:
        while not self._stop.wait(_TICK_S):
            try:
                self.server.check()
            except ServerDiedError as exc:
                if self.failure is None:
                    self.failure = exc
                    self._event("error", str(exc))
                continue
            if self.failure is not None:
                continue
            try:
                self.telemetry.tick(oldest_sent=self._oldest_sent())
            except Exception as exc:  # a failed tick must not end alarm evaluation
                if self.server.alive():
                    self._event("warn", f"alarm evaluation tick failed: {exc}")
            self._write_positions()  # a `local up` killed outright still resumes its streams where they were

    def _oldest_sent(self) -> dict[str, float | None]:
        return {p.mapping.queue_url: p.oldest_sent() for p in self.sqs_pollers}

    def alarm_state(self, name: str) -> str:
        """The local state of the alarm with logical id or name ``name``."""
        for alarm in self.deployment.alarms:
            if name in (alarm.name, alarm.logical_id):
                return self.alarms.states[alarm.name]
        raise KeyError(f"no alarm {name!r}; alarms: {', '.join(a.logical_id for a in self.deployment.alarms)}")

    def set_alarm_state(self, name: str, state: str, reason: str = "set by hand") -> None:
        """CloudWatch's ``SetAlarmState``: the state until the next evaluation, which notifies if it changes."""
        for alarm in self.deployment.alarms:
            if name in (alarm.name, alarm.logical_id):
                self.clients.get("cloudwatch").set_alarm_state(AlarmName=alarm.name, StateValue=state,
                                                               StateReason=reason)
                self.alarms.set_state(alarm.name, state)
                return
        raise KeyError(f"no alarm {name!r}; alarms: {', '.join(a.logical_id for a in self.deployment.alarms)}")

    def evaluate_alarms(self) -> list[AlarmTransition]:
        """Sample and evaluate now instead of waiting for the next tick (for tests)."""
        self.telemetry.sample_queues(self._oldest_sent())
        return self.alarms.evaluate_all()

    # -- logs and events -------------------------------------------------------

    def _event(self, level: str, text: str) -> None:
        with self._lock:
            self.events.append((level, text))
        self.output.event(level, text)

    def _log(self, function: str, line: str) -> None:
        points = parse_emf(line)
        if points:
            self.telemetry.record(points)
            if not self.output.show_emf:
                return
        self.output.log(function, line)

    # -- the stack's queues and messages: StackQueues (local/stack.py) -------------

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No function is invoked from a queue inside the block (Lambda's mapping disabled, then enabled again).

        A test sets up what must be queued at once (two requests of a deduplicated key) without a poller
        running the first in between: deterministic on a loaded machine, where it otherwise may.
        """
        for poller in self.sqs_pollers:
            poller.pause()
        try:
            yield
        finally:
            for poller in self.sqs_pollers:
                poller.resume()

    def drain(self, timeout: float = 120.0, *, settle_checks: int = 3) -> None:
        """Block until every mapped queue and stream is empty and no invocation runs.

        Raises :class:`TimeoutError` (with what is still pending) after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        quiet = 0
        rounds_at_quiet: list[int] = []
        while True:
            self.check()
            pending = self.pending()
            quiet = 0 if pending else quiet + 1
            if quiet == 1:
                rounds_at_quiet = [s.rounds for s in self.stream_pollers]
            # A stream record written just before drain() is seen only by a
            # read that started after it: wait for two fresh rounds per stream.
            if quiet >= max(1, settle_checks) and all(
                s.rounds >= r + 2 for s, r in zip(self.stream_pollers, rounds_at_quiet, strict=True)
            ):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the local cloud did not drain within {timeout:.0f} s; pending: {pending}")
            time.sleep(0.2)

    def pending(self) -> list[str]:
        """What is still going on right now (empty: idle): invocations, queued messages, stream records."""
        pending = []
        for poller in self.sqs_pollers:
            if not poller.idle:
                pending.append(f"{poller.mapping.logical_id}: invocation running")
            queue = self.deployment.queue_by_url(poller.mapping.queue_url)
            depth = self.queue_depth(queue.logical_id) if queue else 0
            if depth:
                pending.append(f"{poller.mapping.logical_id}: {depth} message(s) on the queue")
        pending += [f"{s.mapping.logical_id}: stream records" for s in self.stream_pollers if not s.idle]
        return pending

    def fire(self, name: str, *, at: datetime | None = None) -> InvocationResult:
        """Run schedule ``name`` now, as its tick at ``at`` (default: this minute), and return the result.

        ``name`` is the schedule's Name or logical id, its function's logical id or
        name, or the ``job`` its Input names (sqsjobs' scheduled jobs). A fixed
        ``at`` names one period whatever the clock says (for tests).
        """
        schedule = self.find_schedule(name)
        return self.pools[schedule.function].invoke(scheduled_event(schedule, self.clients.region, at))

    def fire_delayed(self, key: str) -> list[Fired]:
        """Fire the one-time schedules of job key ``key`` now (a delayed job, early); [] when it has none."""
        return self.one_time.fire_key(key) if self.one_time is not None else []

    def _fire_scheduled(self, schedule: Schedule, at: datetime) -> None:
        self._event("info", f"schedule {schedule.name} fired ({schedule.expression})")
        result = self.pools[schedule.function].invoke(scheduled_event(schedule, self.clients.region, at))
        if result.failed:
            self._event("warn", f"schedule {schedule.name}: {result.error_type}: {result.error_message}")

    def crash_next_invocations(self, function: str, count: int = 1) -> None:
        """The next ``count`` invocations of ``function`` die before the handler runs (a lost environment)."""
        self.pools[function].crash_next(count)

    def kill_invocations(self, function: str) -> int:
        """Kill every running invocation of ``function`` (a crash, for fault tests); return how many."""
        return self.pools[function].kill_busy()

    def state(self) -> dict[str, Any]:
        """What ``local up`` records for other processes (see :mod:`sqsjobs.local.control`)."""
        return {
            "pid": os.getpid(),
            "endpoint": self.endpoint,
            "control": self._control.url if self._control else None,
            "region": self.clients.region,
            "template": str(self.template.path),
            "queues": {k: q.url for k, q in self.deployment.queues.items()},
            "tables": dict(self.deployment.tables),
            "schedules": [s.name for s in self.deployment.schedules],
            "schedule_groups": dict(self.deployment.schedule_groups),
            "app_env": self.app_environment(),
        }


def _check_parameters(template: Template, parameters: dict[str, str]) -> None:
    """The parameter check ``sqsjobs check`` and ``local up`` share: one line per problem, no traceback."""
    from sqsjobs.validation.parameters import check_parameters

    problems = [p for p in check_parameters(template.parameters, parameters, require_values=True) if p.is_error]
    if problems:
        raise TemplateError("; ".join(p.line(template.path.name) for p in problems))


def _read_positions(path: Path | None) -> dict[str, dict[str, str]]:
    """The stream positions saved beside a snapshot (none when there is no such file)."""
    if path is None:
        return {}
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): {str(s): str(n) for s, n in v.items()} for k, v in raw.items() if isinstance(v, dict)}


@contextmanager
def running(template: str | Path, **options: Any) -> Iterator[LocalCloud]:
    """``with running("template.yaml") as cloud:`` — start, yield, always stop."""
    cloud = LocalCloud.start(template, **options)
    try:
        yield cloud
    finally:
        cloud.stop()


def cloud_actions(cloud: LocalCloud) -> dict[str, Action]:
    """What the control endpoint of ``local up`` does for other processes: fire, drain, reload, stop ``cloud``."""

    def fire(payload: dict[str, Any]) -> dict[str, Any]:
        name = str(payload["name"])
        try:
            result = cloud.fire(name)
        except KeyError as exc:
            # Not a schedule of the template: the key of a delayed job, fired early?
            fired = cloud.fire_delayed(name)
            if not fired:
                return {"error": f"{exc.args[0]}; and no delayed job with key {name!r} is pending"}
            return {"ok": all(f.ok for f in fired), "delayed": [f.to_dict() for f in fired]}
        return {"ok": result.ok, "request_id": result.request_id, "payload": result.payload,
                "error_type": result.error_type, "error_message": result.error_message,
                "duration_ms": result.duration_ms}

    def drain(payload: dict[str, Any]) -> dict[str, Any]:
        cloud.drain(float(payload.get("timeout", 120)))
        return {"drained": True}

    def reload(payload: dict[str, Any]) -> dict[str, Any]:
        broken = cloud.reload()
        return {"functions": len(cloud.pools), "broken": broken}

    def stop(payload: dict[str, Any]) -> dict[str, Any]:
        # The process that runs the cloud stops it (its main thread waits on this event).
        cloud.stop_requested.set()
        return {"stopping": True, "pid": os.getpid()}

    return {"fire": fire, "drain": drain, "stop": stop, "reload": reload}
