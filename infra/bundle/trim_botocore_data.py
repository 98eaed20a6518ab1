"""Delete the botocore service models a Lambda bundle never loads; keep the shared data botocore always reads.

Usage: ``python trim_botocore_data.py SITE/botocore/data [SERVICES_FILE]`` (infra/bundle/Makefile runs it
on the bundle's site-packages). The kept services are listed in botocore-services.txt beside this file;
tests/infra/test_botocore_data.py checks that every commercial region's endpoint of each resolves from
the trimmed data exactly as from botocore's own.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SERVICES_FILE = HERE / "botocore-services.txt"
#: the files at the top of botocore/data that botocore reads whatever the service
SHARED_FILES = ("endpoints.json", "partitions.json", "sdk-default-configuration.json", "_retry.json")


def kept_services(listing: Path = SERVICES_FILE) -> list[str]:
    """The service names in ``listing`` (one a line; ``#`` starts a comment)."""
    names = [line.split("#", 1)[0].strip() for line in listing.read_text().splitlines()]
    return [name for name in names if name]


def trim(data: Path, services: list[str]) -> list[str]:
    """Delete every service directory under ``data`` not in ``services``; returns the names deleted.

    Refuses (SystemExit) when a kept service or a shared file is missing: a bundle without them
    would fail on its first client, not here.
    """
    missing = [name for name in services if not (data / name).is_dir()]
    missing += [name for name in SHARED_FILES if not (data / name).is_file()]
    if missing:
        raise SystemExit(f"trim_botocore_data: {data} has no {', '.join(missing)}")
    deleted = []
    for entry in sorted(data.iterdir()):
        if entry.is_dir() and entry.name not in services:
            shutil.rmtree(entry)
            deleted.append(entry.name)
    return deleted


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    services = kept_services(Path(argv[2])) if len(argv) == 3 else kept_services()
    deleted = trim(Path(argv[1]), services)
    print(f"botocore data: kept {', '.join(services)}; deleted {len(deleted)} other services")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
