"""Eval Studio and the HTTP API (``simeval serve``): one FastAPI app over the service layer."""

from simeval.web.app import create_app

__all__ = ["create_app"]
