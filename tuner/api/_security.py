"""Browser-facing hardening: security headers on every response, and the Host names the
API answers to (a DNS-rebinding page on another site gets 400, not the API).

    app.add_middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts(host, extra))
    app.add_middleware(SecurityHeaders)   # added last = outermost: 400s and 413s get them too

The Content-Security-Policy allows no inline script.
What the page (static/index.html, app.js) and plotly's bundle need, checked in plotly.js
4.1.1 as shipped in the plotly wheel (package_data/plotly.min.js):
  - script-src 'unsafe-eval': the parcoords chart is WebGL through regl, which compiles
    each draw command with `Function.apply(null, ...)` (regl's codegen); without it the
    "Hyperparameters vs. best metric" chart fails with an EvalError. No inline script is
    allowed; eval needs a script of this origin to call it.
  - style-src 'unsafe-inline': plotly and d3 set style attributes and fill a <style>
    element of their own; blocking those spams the console with violations and breaks
    chart details. Styles cannot run code; scripts stay strictly 'self' (no inline
    script, no inline event handlers).
  - img-src data:: the page's favicon is `data:,`; plotly's image export uses data: URLs.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self' 'unsafe-eval'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "object-src 'none'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'self'",
    ]
)

SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

LOOPBACK_HOSTS: tuple[str, ...] = ("localhost", "127.0.0.1", "[::1]")
_WILDCARD_BINDS = {"", "0.0.0.0", "::", "[::]", "*"}

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]


class SecurityHeaders:
    """ASGI middleware adding SECURITY_HEADERS (or `headers`) to every HTTP response that
    does not set them itself."""

    def __init__(self, app: Any, headers: dict[str, str] | None = None) -> None:
        self.app = app
        self.headers = [
            (k.lower().encode("latin-1"), v.encode("latin-1"))
            for k, v in (SECURITY_HEADERS if headers is None else headers).items()
        ]

    async def __call__(
        self,
        scope: Scope,
        receive: Callable[[], Awaitable[Message]],
        send: Callable[[Message], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                raw = list(message.get("headers", []))
                present = {name.lower() for name, _ in raw}
                raw.extend(h for h in self.headers if h[0] not in present)
                message["headers"] = raw
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _host_pattern(host: str) -> str:
    """A host as Starlette compares it: lower case, no port, IPv6 literals in brackets."""
    host = host.strip().lower()
    if "*" in host[1:] or (host.startswith("*") and host != "*" and not host.startswith("*.")):
        raise ValueError(f"allowed host {host!r}: a wildcard must look like '*.example.com'")
    if host.startswith("[") and "]" in host:
        host = host[1 : host.index("]")]
    elif host.count(":") == 1:
        host = host.partition(":")[0]  # name:port
    try:
        if ipaddress.ip_address(host).version == 6:
            return f"[{host}]"
    except ValueError:
        pass
    return host


def allowed_hosts(bind_host: str, extra: str | None = None) -> list[str]:
    """Host names for Starlette's TrustedHostMiddleware.

    Always localhost, 127.0.0.1 and [::1]; plus the bind address when it is a specific
    one; plus `extra` (TUNER_ALLOWED_HOSTS: comma-separated names or IPs, "*.example.com"
    patterns allowed). A wildcard bind (0.0.0.0, ::) adds this machine's hostname but no
    "*": names and addresses clients use from elsewhere (a DNS name, the LAN IP, a compose
    service name) must be listed in TUNER_ALLOWED_HOSTS, or requests with them get 400.
    "*" in `extra` switches the check off (["*"]): only behind a proxy that checks Host.
    Raises ValueError for a malformed wildcard."""
    listed = [h for h in (x.strip() for x in (extra or "").split(",")) if h]
    if "*" in listed:
        return ["*"]
    hosts = list(LOOPBACK_HOSTS)
    bind = bind_host.strip()
    if bind.lower() in _WILDCARD_BINDS:
        name = socket.gethostname()
        if name:
            hosts.append(name)
    else:
        hosts.append(bind)
    hosts.extend(listed)
    out: list[str] = []
    for host in hosts:
        pattern = _host_pattern(host)
        if pattern and pattern not in out:
            out.append(pattern)
    return out


__all__ = [
    "CONTENT_SECURITY_POLICY",
    "SECURITY_HEADERS",
    "SecurityHeaders",
    "allowed_hosts",
]
