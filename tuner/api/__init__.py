"""The REST API and the web page. Routes never import Ray; sweeps run as Ray Jobs."""

from tuner.api._app import create_app

__all__ = ["create_app"]
