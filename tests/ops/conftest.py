"""Fixtures: the store contract suite's ``open_store``, one store factory per backend."""

from __future__ import annotations

from tests.contract.conftest import _drop_postgres_schemas, backend, open_store  # noqa: F401 (fixtures)
