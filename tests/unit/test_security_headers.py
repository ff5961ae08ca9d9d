"""Browser-facing hardening: security headers on every response, Host names checked, and a
page that keeps working under the Content-Security-Policy."""

import re
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.testclient import TestClient
from starlette.middleware.trustedhost import TrustedHostMiddleware

from tuner.api._security import (
    CONTENT_SECURITY_POLICY,
    SECURITY_HEADERS,
    SecurityHeaders,
    allowed_hosts,
)

STATIC = Path(__file__).resolve().parents[2] / "tuner" / "api" / "static"


def make_app(bind="127.0.0.1", extra=None):
    app = FastAPI()

    @app.get("/ok")
    def ok() -> dict:
        return {"ok": True}

    @app.get("/own-csp")
    def own_csp() -> PlainTextResponse:
        return PlainTextResponse("x", headers={"Content-Security-Policy": "sandbox"})

    @app.get("/boom")
    def boom() -> JSONResponse:
        return JSONResponse({"detail": "nope"}, status_code=422)

    app.add_middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts(bind, extra))
    app.add_middleware(SecurityHeaders)  # last added = outermost
    return app


def client(app, host="localhost"):
    return TestClient(app, base_url=f"http://{host}")


def assert_secured(response):
    for name, value in SECURITY_HEADERS.items():
        assert response.headers[name] == value, name


def test_every_response_carries_the_security_headers():
    c = client(make_app())
    for path, status in (("/ok", 200), ("/boom", 422), ("/missing", 404)):
        response = c.get(path)
        assert response.status_code == status
        assert_secured(response)
    assert c.get("/ok").headers["x-frame-options"] == "DENY"
    assert c.get("/ok").headers["x-content-type-options"] == "nosniff"
    assert c.get("/ok").headers["referrer-policy"] == "no-referrer"


def test_a_response_that_sets_its_own_csp_keeps_it():
    response = client(make_app()).get("/own-csp")
    assert response.headers["content-security-policy"] == "sandbox"
    assert response.headers.get_list("content-security-policy") == ["sandbox"]
    assert response.headers["x-frame-options"] == "DENY"


def test_csp_directives():
    directives = dict(d.split(" ", 1) for d in CONTENT_SECURITY_POLICY.split("; "))
    assert directives["default-src"] == "'self'"
    assert directives["script-src"].split() == ["'self'", "'unsafe-eval'"]  # no inline script
    assert directives["style-src"] == "'self' 'unsafe-inline'"
    assert directives["img-src"] == "'self' data:"
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["base-uri"] == "'none'"
    assert directives["form-action"] == "'self'"


def test_foreign_host_gets_400_with_headers():
    app = make_app()
    response = client(app, "evil.example").get("/ok")
    assert response.status_code == 400
    assert_secured(response)
    response = client(app).get("/ok", headers={"Host": "evil.example:8000"})
    assert response.status_code == 400


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]", "localhost:8000", "[::1]:80"])
def test_loopback_hosts_pass(host):
    assert client(make_app()).get("/ok", headers={"Host": host}).status_code == 200


def test_extra_hosts_and_bind_host_pass():
    app = make_app("10.0.0.5", "tuner.example.com, *.corp.example")
    c = client(app)
    for host in ("10.0.0.5:8000", "tuner.example.com", "api.corp.example"):
        assert c.get("/ok", headers={"Host": host}).status_code == 200, host
    assert c.get("/ok", headers={"Host": "corp.example.evil"}).status_code == 400


def test_allowed_hosts_defaults():
    assert allowed_hosts("127.0.0.1", None) == ["localhost", "127.0.0.1", "[::1]"]
    assert allowed_hosts("::1", "") == ["localhost", "127.0.0.1", "[::1]"]
    assert allowed_hosts("192.168.1.7", None)[-1] == "192.168.1.7"
    assert allowed_hosts("fe80::2", None)[-1] == "[fe80::2]"
    assert allowed_hosts("Tuner.Local", "a.example:8000,,[fe80::1]:80") == [
        "localhost",
        "127.0.0.1",
        "[::1]",
        "tuner.local",
        "a.example",
        "[fe80::1]",
    ]


def test_wildcard_bind_never_allows_any_host_by_itself(monkeypatch):
    monkeypatch.setattr("socket.gethostname", lambda: "box")
    for bind in ("0.0.0.0", "::", ""):
        hosts = allowed_hosts(bind, None)
        assert "*" not in hosts
        assert "0.0.0.0" not in hosts
        assert "[::]" not in hosts
        assert hosts == ["localhost", "127.0.0.1", "[::1]", "box"]
    assert allowed_hosts("0.0.0.0", "tuner.example.com")[-1] == "tuner.example.com"
    assert allowed_hosts("0.0.0.0", "*") == ["*"]  # explicit opt-out only
    c = client(make_app("0.0.0.0"))
    assert c.get("/ok", headers={"Host": "box:8000"}).status_code == 200
    assert c.get("/ok", headers={"Host": "evil.example"}).status_code == 400


def test_malformed_wildcard_is_refused():
    with pytest.raises(ValueError, match="wildcard"):
        allowed_hosts("127.0.0.1", "tuner*.example.com")


# ---------------------------------------------------------------- the page under the CSP


def test_page_has_no_inline_script_style_or_handlers():
    html = (STATIC / "index.html").read_text()
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert "src=" in tag, tag
    assert re.search(r"<script\b[^>]*>\s*[^<\s]", html) is None  # no inline script body
    assert "<style" not in html
    assert re.search(r"\sstyle\s*=", html) is None
    assert re.search(r"\son[a-z]+\s*=", html, re.I) is None
    assert "javascript:" not in html


def test_app_js_builds_no_inline_styles_or_handlers():
    js = (STATIC / "app.js").read_text()
    assert re.search(r"style\s*=\s*[\\\"']", js) is None  # markup with style="..."
    assert re.search(r"\son[a-z]+\s*=\s*[\\\"']", js) is None  # onclick="..."
    assert re.search(r"setAttribute\(\s*['\"](style|on[a-z]+)['\"]", js) is None
    assert re.search(r"\beval\(|new Function\b|setTimeout\(\s*['\"`]", js) is None
