"""A sweep's driver ends within 10 s of its Ray head (tuner/sweep/_headwatch.py), instead
of retrying the dead GCS for a minute at full CPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from tuner.launcher import EmbeddedHead
from tuner.settings import Settings
from tuner.sweep._headwatch import HEAD_GONE_EXIT, head_reachable

pytestmark = pytest.mark.integration

DRIVER = """
import sys, time, ray
ray.init(address=sys.argv[1], log_to_driver=False)
from tuner.sweep._headwatch import watch_connected_head
assert watch_connected_head() is not None
print("watching", flush=True)
time.sleep(120)
"""


def test_a_driver_exits_within_10_s_of_its_head(tmp_path):
    settings = Settings(data_dir=tmp_path / "data")
    settings.data_path.mkdir(parents=True)
    head = EmbeddedHead(settings)
    driver = None
    try:
        head.start(num_cpus=1, deadline=time.monotonic() + 120)
        gcs = json.loads(head.head_file.read_text())["gcs"]
        assert head_reachable(gcs)
        driver = subprocess.Popen(
            [sys.executable, "-c", DRIVER, gcs],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.getcwd()},
        )
        assert driver.stdout.readline().strip() == "watching"
        head.stop()
        gone = time.monotonic()
        code = driver.wait(timeout=30)
        took = time.monotonic() - gone
        assert code == HEAD_GONE_EXIT, driver.stderr.read()[-2000:]
        assert took < 10, took
        assert not head_reachable(gcs)
    finally:
        if driver is not None and driver.poll() is None:
            driver.kill()
        head.stop()
        shutil.rmtree(head.temp_dir, ignore_errors=True)


def test_a_driver_whose_head_is_gone_before_it_connects_exits(tmp_path):
    """The service's driver, started by Ray's job supervisor with RAY_ADDRESS = the head's
    GCS, when that head is gone before ray.init: without the early watch it would hang in
    ray.init, retrying the dead GCS for minutes."""
    from tests.e2e.conftest import free_port, tiny
    from tuner.spec import parse_spec
    from tuner.store import Store

    settings = Settings(data_dir=tmp_path / "data")
    settings.data_path.mkdir(parents=True)
    store = Store(settings.store_url)
    spec = parse_spec(tiny("orphan")).model_dump(mode="json")
    rec = store.create_experiment(name="orphan", spec=spec, warnings=[])
    store.transition(rec.id, "RUNNING", allowed_from={"QUEUED"})
    store.close()
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    env = {
        **os.environ,
        "PYTHONPATH": os.getcwd(),
        "TUNER_DATA_DIR": str(settings.data_path),
        "RAY_ADDRESS": dead,
    }
    started = time.monotonic()
    driver = subprocess.run(
        [sys.executable, "-m", "tuner.sweep", rec.id],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
    )
    took = time.monotonic() - started
    assert driver.returncode == HEAD_GONE_EXIT, driver.stderr[-2000:]
    assert f"the Ray head at {dead} is gone" in driver.stderr
    assert took < 45, took  # imports (RLlib: several seconds) plus 5 missed polls
