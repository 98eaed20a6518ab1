"""samconfig.toml parameter overrides for `sqsjobs local up`."""

from __future__ import annotations

from pathlib import Path

from sqsjobs.local.samconfig import parameter_overrides


def test_guided_deploy_answers_are_read(tmp_path: Path) -> None:
    (tmp_path / "samconfig.toml").write_text(
        'version = 0.1\n[default.deploy.parameters]\n'
        'parameter_overrides = "SenderEmail=\\"billing@example.com\\" MaxAttempts=3"\n'
    )

    assert parameter_overrides(tmp_path / "template.yaml") == {"SenderEmail": "billing@example.com",
                                                               "MaxAttempts": "3"}


def test_no_overrides_no_file(tmp_path: Path) -> None:
    (tmp_path / "samconfig.toml").write_text('version = 0.1\n[default.deploy.parameters]\nresolve_s3 = true\n')

    assert parameter_overrides(tmp_path / "template.yaml") == {}
    assert parameter_overrides(tmp_path / "elsewhere" / "template.yaml") == {}
