"""Every failure leaves the API as ``{"error": "<what is wrong>"}`` with a fitting status."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from ._jsonio import JSON, error_response

__all__ = [
    "COMMON_ERRORS",
    "ApiError",
    "ErrorBody",
    "error_responses",
    "install_error_handlers",
    "refusals_as_sent",
]


class ErrorBody(BaseModel):
    """The body of every refusal, declared in the schema so that clients can rely on it."""

    error: str


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for ``statuses``, each with the one error body."""
    return {s: {"model": ErrorBody, "description": HTTPStatus(s).phrase} for s in statuses}


#: What any route may answer besides its success: bad input, no or an unknown token, a role
#: without the permission, an unknown run, series, alert...
COMMON_ERRORS = error_responses(400, 401, 403, 404)


def refusals_as_sent(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without FastAPI's 422 validation answer, which this API sends as a 400."""
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            operation.get("responses", {}).pop("422", None)
    for name in ("HTTPValidationError", "ValidationError"):
        schema.get("components", {}).get("schemas", {}).pop(name, None)
    return schema


class ApiError(Exception):
    """A request we refuse, with the status and the sentence the client will read, and a
    short name of the cause (``reason``) that the collector's metrics count refusals by."""

    def __init__(
        self,
        status: int,
        message: str,
        headers: dict[str, str] | None = None,
        *,
        reason: str = "",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers
        self.reason = reason or HTTPStatus(status).name.lower()


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
