"""TUNER_RAY_ADDRESS as a GCS address, against a real head: Ray's job client finds the
dashboard through the GCS, and the launcher's jobs and nodes go there."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from tuner.launcher import EmbeddedHead, Launcher, RayJobs, _address
from tuner.settings import Settings

pytestmark = pytest.mark.integration


def test_a_gcs_address_reaches_the_clusters_job_server(tmp_path):
    settings = Settings(data_dir=tmp_path / "data")
    settings.data_path.mkdir(parents=True)
    head = EmbeddedHead(settings)
    _address.forget()
    try:
        dashboard = head.start(num_cpus=1, deadline=time.monotonic() + 120)
        gcs = json.loads(head.head_file.read_text())["gcs"]
        service = Settings(data_dir=tmp_path / "data", ray_address=gcs)
        assert service.ray_address == gcs  # accepted as it is
        launcher = Launcher(service)
        assert launcher.start(wait_s=60) == gcs
        assert launcher.jobs.url == dashboard  # resolved through the GCS
        assert isinstance(RayJobs(gcs, 30).list(), list)
    finally:
        _address.forget()
        head.stop()
        shutil.rmtree(head.temp_dir, ignore_errors=True)
