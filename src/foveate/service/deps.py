"""FastAPI dependencies shared by the routes: the bearer-token check (when the server has ``FOVEATE_API_KEY``).

The :class:`~foveate.service.guard.Guard` already refused a request without the key, from its headers, before any
body was read; this dependency states the scheme in the OpenAPI document and checks once more."""

from __future__ import annotations

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from .guard import authorized

bearer = HTTPBearer(auto_error=False, description="The server's FOVEATE_API_KEY, when it has one.")


async def require_key(request: Request, cred: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
    key = request.app.state.settings.api_key
    if key is None:
        return
    if not authorized({b"authorization": request.headers.get("authorization", "").encode("latin-1")}, key):
        raise HTTPException(
            401,
            "missing or wrong API key: send 'Authorization: Bearer <key>' with the server's FOVEATE_API_KEY",
            headers={"WWW-Authenticate": "Bearer"},
        )
