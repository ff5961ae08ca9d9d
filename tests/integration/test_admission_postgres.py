"""TUNER_MAX_ACTIVE_SWEEPS on a real PostgreSQL server: at READ COMMITTED two
transactions that each insert and then count see only their own new row, so the store
takes an advisory lock first (tuner/store/_store.py `_lock_admissions`)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import event

from tests.integration.test_store_postgres import pg_server, pg_url  # noqa: F401 - fixtures
from tuner import service
from tuner.store import Store

pytestmark = pytest.mark.integration

SPEC = {"name": "admit", "algorithm": "PPO", "env": "CartPole-v1"}


def test_concurrent_submits_from_many_engines_never_exceed_the_limit(pg_url):  # noqa: F811
    racers = 12
    stores = [Store(pg_url) for _ in range(racers)]
    for store in stores:  # a wide window between each statement
        event.listen(store.engine, "before_cursor_execute", lambda *args: time.sleep(0.005))
    service.submit(stores[0], SPEC, [])
    start = threading.Barrier(racers)

    def submit(store: Store) -> bool:
        start.wait()
        try:
            service.submit(store, SPEC, [], max_active=4)
        except service.TooMany as err:
            assert "at most 4 (TUNER_MAX_ACTIVE_SWEEPS)" in str(err)
            return False
        return True

    try:
        with ThreadPoolExecutor(racers) as pool:
            admitted = list(pool.map(submit, stores))
        assert admitted.count(True) == 3
        assert stores[0].count_by_status({"QUEUED"}) == 4
    finally:
        for store in stores:
            store.close()
