"""One list of the environment variables sqsjobs reads (sqsjobs._env_names), and "did you mean" from it wherever a
missing variable is an error (issue 30, item 7: SQSJOBS_QUEUE and SQSJOBS_TABLE_NAME got none)."""

from __future__ import annotations

import pytest

from sqsjobs import ConfigurationError, JobApp, StatusError, _env_names, _settings
from sqsjobs.ops._status import collect_status
from sqsjobs.validation.environment import known_variables

QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"


def test_every_variable_the_settings_name_is_on_the_one_list() -> None:
    named = {value for name, value in vars(_settings).items()
             if name.startswith("ENV_") and isinstance(value, str) and not value.startswith("AWS_")
             and value != _settings.ENV_QUEUE_URL_PREFIX}
    assert {"SQSJOBS_QUEUE_URL", "SQSJOBS_TABLE", "POWERTOOLS_SERVICE_NAME"} <= named
    assert named == set(_env_names.VARIABLES)
    assert _env_names.NAMED_QUEUE_PREFIX == _settings.ENV_QUEUE_URL_PREFIX
    assert known_variables() == {name for name in named if name.startswith("SQSJOBS_")}  # sqsjobs check's list


def test_a_misspelt_table_variable_is_named_when_the_table_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQSJOBS_TABLE_NAME", "idempotency")
    app = JobApp(queue_url=QUEUE)

    with pytest.raises(ConfigurationError) as raised:
        app.status("invoice-email:42")

    assert str(raised.value) == ("table_name is not set: pass table_name= to JobApp or set SQSJOBS_TABLE; "
                                 "SQSJOBS_TABLE_NAME is set, which sqsjobs does not read: did you mean SQSJOBS_TABLE?")


def test_a_misspelt_queue_variable_is_named_by_status(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQSJOBS_QUEUE", QUEUE)

    with pytest.raises(StatusError, match=r"SQSJOBS_QUEUE is set, which sqsjobs does not read: did you mean "
                                          r"SQSJOBS_QUEUE_URL[?]$"):
        collect_status(sqs_client=None)  # type: ignore[arg-type]  # it refuses before any call


def test_a_misspelt_queue_variable_is_named_by_the_producer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQSJOBS_QUEUE", QUEUE)
    app = JobApp()

    @app.job("greet", key="greet:{user_id}")
    def greet(user_id: int) -> None: ...

    with pytest.raises(ConfigurationError, match=r"did you mean SQSJOBS_QUEUE_URL[?]"):
        greet.enqueue(user_id=1)


def test_no_hint_when_the_variable_is_set_or_nothing_is_close(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQSJOBS_QUEUE_URL_CRITICAL", QUEUE)  # a named queue's variable is read, whatever its name
    monkeypatch.setenv("SQSJOBS_ORDERS_TABLE", "orders")  # an app's own variable, not close to one of ours
    assert _env_names.did_you_mean("SQSJOBS_QUEUE_URL", "SQSJOBS_TABLE", "SQSJOBS_OUTBOX_TABLE") == ""
    monkeypatch.setenv("SQSJOBS_TABEL", "idempotency")
    monkeypatch.setenv("SQSJOBS_TABLE", "idempotency")
    assert _env_names.did_you_mean("SQSJOBS_TABLE") == ""
