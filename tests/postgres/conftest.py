"""Fixtures of the PostgreSQL journal's tests: one server of the harness's own per test
session (``harness.chaos.postgres``), a database per test.

Every test here is skipped, with the reason, where PostgreSQL is not installed
(failed instead when ``HARNESS_REQUIRE_POSTGRES`` is set, as CI sets it); a server
that is installed but will not start fails them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from harness.chaos.postgres import PostgresServer, PostgresUnavailable, find_binaries

REQUIRE_VARIABLE = "HARNESS_REQUIRE_POSTGRES"
"""Set (as CI does), a machine without PostgreSQL fails these tests instead of skipping."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/postgres/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A server of its own for the session, in a RAM folder, removed at the end."""
    try:
        find_binaries()
    except PostgresUnavailable as exc:
        if os.environ.get(REQUIRE_VARIABLE):  # CI: a skip there would hide the tests
            raise
        pytest.skip(str(exc))
    with PostgresServer.start() as server:
        yield server


@pytest.fixture
def database(postgres_server: PostgresServer) -> Iterator[str]:
    """The URL of a database of this test's own, dropped after it."""
    name = f"test_{uuid.uuid4().hex[:16]}"
    url = postgres_server.create_database(name)
    yield url
    postgres_server.drop_database(name)
