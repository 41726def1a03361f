"""Every failure leaves the API as ``{"error": "<what is wrong>"}`` with a fitting status."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException

from ._jsonio import JSON, error_response

__all__ = ["ApiError", "install_error_handlers"]


class ApiError(Exception):
    """A request we refuse, with the status and the sentence the client will read."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


def _describe(exc: RequestValidationError) -> str:
    """One readable line per bad field instead of pydantic's nested structure."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def install_error_handlers(app: FastAPI) -> None:
    """Map our errors, FastAPI's validation errors and Starlette's HTTP errors to one shape."""

    async def api_error(_: Request, exc: Exception) -> JSON:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.message, exc.headers)

    async def validation_error(_: Request, exc: Exception) -> JSON:
        assert isinstance(exc, RequestValidationError)
        return error_response(400, _describe(exc))

    async def http_error(_: Request, exc: Exception) -> JSON:
        assert isinstance(exc, HTTPException)
        return error_response(exc.status_code, str(exc.detail), dict(exc.headers or {}) or None)

    async def internal_error(_: Request, exc: Exception) -> JSON:
        return error_response(500, f"internal error ({type(exc).__name__}); see the collector log")

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(Exception, internal_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
