"""FastAPI dependencies shared by the routes: the bearer-token check (when the server has ``FOVEATE_API_KEY``)."""

from __future__ import annotations

import secrets

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

bearer = HTTPBearer(auto_error=False, description="The server's FOVEATE_API_KEY, when it has one.")


async def require_key(request: Request, cred: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
    key = request.app.state.settings.api_key
    if key is None:
        return
    if cred is None or not secrets.compare_digest(cred.credentials.encode(), key.encode()):
        raise HTTPException(401, "missing or wrong API key: send 'Authorization: Bearer <key>' with the server's "
                                 "FOVEATE_API_KEY", headers={"WWW-Authenticate": "Bearer"})
