"""Routes about single source messages: where one is ("where is my message?"), and a
topology's dead letters: listed, shown, sent back into it (each at most once)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query
from pydantic import BaseModel, Field, model_validator

from services.api import responses
from services.api.context import WRITE, Ctx, TopologyId
from services.api.errors import READ_ERRORS
from squall import dead_letters
from squall.message_trace import trace

router = APIRouter(responses=READ_ERRORS, tags=["messages"])
Offset = Annotated[int, Path(ge=0, le=1 << 62)]


class ReplayRequest(BaseModel):
    offsets: list[Annotated[int, Field(ge=0, le=1 << 62)]] = Field(
        default_factory=list, max_length=10_000,
        description="the letters to send back: their offsets in the dead-letter topic "
                    f"(within {dead_letters.SCAN_LETTERS} offsets of each other)")
    reason: str | None = Field(None, min_length=1, max_length=1000, description=(
        "or every letter whose reason contains this text, among the newest "
        f"{dead_letters.SCAN_LETTERS} (with offsets: both)"))
    all: bool = Field(False, description=(
        f"or every letter among the newest {dead_letters.SCAN_LETTERS}: a bulk replay names "
        "a reason or says all"))
    dry_run: bool = Field(False, description="send nothing: say what would be sent")

    @model_validator(mode="after")
    def _one_choice(self) -> ReplayRequest:
        if self.all and self.reason is not None:
            raise ValueError("all and reason: choose one (all is every letter)")
        if self.all and self.offsets:
            raise ValueError("all and offsets: choose one (all is every letter)")
        return self


@router.get("/topologies/{topology_id}/messages/{topic}/{partition}/{offset}",
            response_model=responses.MessageTrace,
            summary="Where is my message: a source message's state in the topology")
async def message(ctx: Ctx, topology_id: TopologyId,
                  topic: Annotated[str, Path(min_length=1, max_length=249)],
                  partition: Annotated[int, Path(ge=0, le=1_000_000)],
                  offset: Offset) -> dict[str, Any]:
    rec = await ctx.record(topology_id)
    ends = [(w.host, e) for w in await ctx.workers() for e in w.endpoints
            if e.get("topology") == rec.id and e.get("url")]
    base = {k: [(str(e["url"]).removesuffix("/metrics"), host) for host, e in ends
                if e.get("kind") == k] for k in ("spout", "acker")}
    return await asyncio.to_thread(trace, ctx.settings.clients, rec.spec, rec.id, topic,
                                   partition, offset, base["spout"], base["acker"],
                                   ctx.cluster.fetch)


@router.get("/topologies/{topology_id}/dead-letters", response_model=responses.DeadLetters,
            summary="A topology's dead letters, newest first, and how many by reason")
async def list_letters(ctx: Ctx, topology_id: TopologyId,
                       reason: Annotated[str, Query(max_length=1000, description=(
                           "only those whose reason contains this text"))] = "",
                       since_ms: Annotated[int, Query(ge=0)] = 0,
                       limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
                       before: Annotated[int | None, Query(ge=0, le=1 << 62, description=(
                           f"read the {dead_letters.SCAN_LETTERS} letters before this "
                           "offset (default: the newest)"))] = None) -> dict[str, Any]:
    rec = await ctx.record(topology_id)
    return await asyncio.to_thread(dead_letters.listing, ctx.settings.clients, rec.id,
                                   reason, since_ms, limit, before=before)


@router.get("/topologies/{topology_id}/dead-letters/{dlq_offset}",
            response_model=responses.DeadLetter,
            summary="One dead letter: its payload, headers, reason and attempts")
async def show_letter(ctx: Ctx, topology_id: TopologyId, dlq_offset: Offset) -> dict[str, Any]:
    rec = await ctx.record(topology_id)
    return await asyncio.to_thread(dead_letters.show, ctx.settings.clients, rec.id,
                                   dlq_offset)


@router.post("/topologies/{topology_id}/dead-letters/replay", **WRITE,
             response_model=responses.Replayed,
             summary="Send dead letters back into the topology as fresh source messages, "
                     "each at most once")
async def replay_letters(ctx: Ctx, topology_id: TopologyId,
                         body: Annotated[ReplayRequest, Body()]) -> dict[str, Any]:
    rec = await ctx.record(topology_id)
    kafka = ctx.settings.clients
    chosen = list(body.offsets)
    if body.reason is not None or body.all:
        found = await asyncio.to_thread(dead_letters.listing, kafka, rec.id,
                                        body.reason or "", 0, dead_letters.SCAN_LETTERS)
        chosen += [r["dlq_offset"] for r in found["letters"]]
    async with ctx.replaying.setdefault(rec.id, asyncio.Lock()):
        return await asyncio.to_thread(dead_letters.replay, kafka, rec.spec, rec.id, chosen,
                                       ctx.now(), dry_run=body.dry_run)

