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

from tuner.launcher._head import EmbeddedHead
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
