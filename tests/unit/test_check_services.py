"""`sqsjobs check` finds a client of a service the trimmed bundle leaves out (issue 30: a trimmed botocore).

A project's functions run botocore from SqsjobsLayer, trimmed to the services in layer/botocore-services.txt;
this repository's functions from infra/bundle, trimmed to infra/bundle/botocore-services.txt. A job's client of
another service would fail in Lambda (sqsjobs/_botocore_data.py says so there, tests/infra/test_botocore_data.py);
the check says it first, with the line to add (sqsjobs/validation/services.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sqsjobs.cli import build_app
from sqsjobs.scaffold import ProjectOptions, write
from sqsjobs.scaffold.bundle import RUNTIME_SERVICES
from sqsjobs.validation import load_document, validate
from sqsjobs.validation.services import check_services

ROOT = Path(__file__).resolve().parents[2]
JOBS = '''

import boto3
import sqsjobs
from botocore.session import Session


@app.job("archive", key="archive:{order_id}")
def archive(order_id: int) -> None:
    sqsjobs.client("s3").put_object(Bucket="orders", Key=str(order_id), Body=b"")
    boto3.client(service_name="textract")
    Session().create_client("s3")  # the same service again: one problem
    import redis  # never imported: the check reads the code

    redis.client("not-a-service")  # not an AWS client
    sqsjobs.client("sqs")  # the runtime's own: always kept
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "shop"
    write(directory, ProjectOptions(name="shop"))
    with (directory / "handlers" / "app.py").open("a") as app:
        app.write(JOBS)
    return directory


def problems_of(project: Path) -> list[str]:
    template = project / "template.yaml"
    return [p.line("template.yaml") for p in check_services(load_document(template), project)]


def test_a_client_the_layer_leaves_out_is_an_error_naming_the_line_to_add(project: Path) -> None:
    kept = ", ".join(RUNTIME_SERVICES)

    def expected(service: str, call: str) -> str:
        return (f"template.yaml: WorkerFunction: handlers/app.py:{_line(project, call)} makes a client of {service}, "
                f"which layer/botocore-services.txt leaves out of the bundle's botocore (it keeps {kept}): in Lambda "
                f"that client fails; fix: add {service} to layer/botocore-services.txt (one service a line), then "
                "sam build")

    assert problems_of(project) == [expected("s3", 'sqsjobs.client("s3")'),
                                    expected("textract", 'boto3.client(service_name="textract")')]
    with (project / "layer" / "botocore-services.txt").open("a") as listing:
        listing.write("s3\ntextract   # the scans\n")
    assert problems_of(project) == []


def test_a_name_botocore_does_not_have_in_the_list_is_an_error(project: Path) -> None:
    with (project / "layer" / "botocore-services.txt").open("a") as listing:
        listing.write("s3\ntextract\ndynamo-db\n")
    assert problems_of(project) == [
        "template.yaml: layer/botocore-services.txt: 'dynamo-db' is no service of this botocore (did you mean "
        "dynamodb or dynamodbstreams?); fix: write the name client() takes, or remove dynamo-db from "
        "layer/botocore-services.txt"]


def test_sqsjobs_check_reports_it_and_fails(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    problems = [p for p in validate(project / "template.yaml", {}, app_checks=False) if "botocore" in p.message]
    assert [p.is_error for p in problems] == [True, True]
    monkeypatch.chdir(project)
    monkeypatch.setattr("sqsjobs.cli.check.run_check", lambda *args, **kwargs: 0)  # cfn-lint: its own tests
    result = CliRunner().invoke(build_app(), ["check", "template.yaml"])
    assert result.exit_code != 0, result.output
    assert "error: template.yaml: WorkerFunction: handlers/app.py:" in result.output
    assert "makes a client of s3" in result.output and "makes a client of textract" in result.output


def test_a_function_whose_botocore_is_not_trimmed_is_not_checked(project: Path) -> None:
    (project / "layer" / "botocore-services.txt").unlink()  # a layer built without a list keeps every model
    assert problems_of(project) == []


def test_the_repository_s_own_functions_keep_what_their_code_calls() -> None:
    assert check_services(load_document(ROOT / "template.yaml"), ROOT) == []


def _line(project: Path, text: str) -> int:
    lines = (project / "handlers" / "app.py").read_text().splitlines()
    return next(number for number, line in enumerate(lines, start=1) if text in line)
