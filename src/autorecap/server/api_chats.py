"""Routes of the REST API (see docs/API.md); mounted under `/api` by `autorecap.server.api`."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
