"""One real local SparkSession for the whole pipeline suite (starting one costs 5-10 s)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pipeline.session import spark_session

    session = spark_session(app_name="chronolog-tests")
    yield session
    session.stop()
