"""The embedded Ray head when a port it picked is taken before Ray binds it.

`ray start` is given ports that were free a moment before; another process on the host
(another Ray's outgoing connections use the same ephemeral range) can take one in
between, and Ray then exits. The service starts the head again on fresh ports.
"""

from __future__ import annotations

import itertools
import logging
import shutil
import socket
import time

import httpx
import pytest

from tuner.launcher import EmbeddedHead, _head
from tuner.launcher._head import dashboard_up
from tuner.launcher._jobs import auth_headers
from tuner.settings import Settings

pytestmark = pytest.mark.integration


def test_a_taken_dashboard_port_is_retried_on_fresh_ports(tmp_path, monkeypatch, caplog):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    taken_port = taken.getsockname()[1]
    real_free_port = _head._free_port
    picks = iter([real_free_port(), taken_port])  # the first head's GCS, then its dashboard
    monkeypatch.setattr(_head, "_free_port", lambda: next(picks, None) or real_free_port())

    settings = Settings(data_dir=tmp_path / "data")
    settings.data_path.mkdir(parents=True)
    head = EmbeddedHead(settings)
    try:
        with caplog.at_level(logging.WARNING, logger="tuner.launcher"):
            url = head.start(num_cpus=1, deadline=time.monotonic() + 120)
        assert not url.endswith(f":{taken_port}")
        assert dashboard_up(url)
        assert "exited with code" in caplog.text
        assert "attempt 1 of 3" in caplog.text
        assert "already occupied" in caplog.text  # Ray's own words, from its log
    finally:
        head.stop()
        taken.close()
        shutil.rmtree(head.temp_dir, ignore_errors=True)


def test_one_port_handed_out_twice_never_reaches_ray(tmp_path, monkeypatch):
    """A port picked free and released can come back from the OS at the next pick: a full
    suite run gave the GCS and the dashboard one port and `ray start` exited ("used by
    other components"). The head's ports are distinct whatever the picks return."""
    real_free_port = _head._free_port
    twice = real_free_port()
    picks = iter([twice, twice, twice])
    monkeypatch.setattr(_head, "_free_port", lambda: next(picks, None) or real_free_port())

    settings = Settings(data_dir=tmp_path / "data")
    settings.data_path.mkdir(parents=True)
    head = EmbeddedHead(settings)
    try:
        url = head.start(num_cpus=1, deadline=time.monotonic() + 120, attempts=1)
        assert dashboard_up(url)
        assert not url.endswith(f":{twice}")  # the GCS has it, the dashboard another
    finally:
        head.stop()
        shutil.rmtree(head.temp_dir, ignore_errors=True)


def test_a_head_that_keeps_exiting_is_an_error_with_its_log(tmp_path, monkeypatch):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    calls = itertools.count()
    real_free_port = _head._free_port
    taken_port = taken.getsockname()[1]
    # every attempt's dashboard port (its second pick: GCS, dashboard, agent) is taken
    monkeypatch.setattr(
        _head, "_free_port", lambda: taken_port if next(calls) % 3 == 1 else real_free_port()
    )

    settings = Settings(data_dir=tmp_path / "data")
    settings.data_path.mkdir(parents=True)
    head = EmbeddedHead(settings)
    try:
        with pytest.raises(RuntimeError, match=r"exited with code \d+ \(2 attempts\)") as err:
            head.start(num_cpus=1, deadline=time.monotonic() + 120, attempts=2)
        assert "ray-head.log" in str(err.value)
        assert not head.started
        assert not head.head_file.exists()
    finally:
        head.stop()
        taken.close()
        shutil.rmtree(head.temp_dir, ignore_errors=True)


def test_a_fresh_machine_without_a_ray_token_gets_one(tmp_path, monkeypatch):
    """`ray start` refuses to start with token auth on and no token (a fresh machine:
    `make run` there failed); the head makes one, keeps it out of its log, and the Jobs
    API answers with it and refuses without it."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    settings = Settings(data_dir=tmp_path / "data")
    settings.data_path.mkdir(parents=True)
    head = EmbeddedHead(settings)
    try:
        url = head.start(num_cpus=1, deadline=time.monotonic() + 120)
        token_file = home / ".ray" / "auth_token"
        token = token_file.read_text().strip()
        assert len(token) >= 16
        assert token_file.stat().st_mode & 0o077 == 0  # its owner's only
        assert token not in (settings.data_path / "ray-head.log").read_text(errors="replace")
        assert httpx.get(f"{url}/api/jobs/", headers=auth_headers(), timeout=10).status_code == 200
        assert httpx.get(f"{url}/api/jobs/", timeout=10).status_code in (401, 403)
    finally:
        head.stop()
        shutil.rmtree(head.temp_dir, ignore_errors=True)
