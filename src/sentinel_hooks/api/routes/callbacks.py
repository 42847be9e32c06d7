"""Callbacks: ``POST /hooks/sentinel`` (envelopes from other systems) and the contract views."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, get_args

from aiohttp import web
from pydantic import ValidationError

from sentinel_hooks.api.access import who_of
from sentinel_hooks.api.app import service_of
from sentinel_hooks.api.body import read_json
from sentinel_hooks.api.charts import report_charts
from sentinel_hooks.api.errors import ApiError
from sentinel_hooks.api.query import int_param, limit_param
from sentinel_hooks.api.routing import Routes
from sentinel_hooks.config.hints import did_you_mean
from sentinel_hooks.config.issues import format_loc
from sentinel_hooks.core.envelope import Envelope, EnvelopeSource
from sentinel_hooks.endpoints import callbacks as endpoints
from sentinel_hooks.endpoints import report as report_endpoints
from sentinel_hooks.endpoints.callbacks import DEFAULT_LIMIT, MAX_ENVELOPE_BYTES, MAX_LIMIT, MAX_TRANSCRIPT
from sentinel_hooks.endpoints.common import INT64_MAX
from sentinel_hooks.report import parse_since
from sentinel_hooks.store.feedback import MAX_NOTE_CHARS, Feedback, FeedbackCounts
from sentinel_hooks.store.records import ContractState

if TYPE_CHECKING:
    from sentinel_hooks.service import Service

routes = Routes()

STATES = get_args(ContractState)
FEEDBACK_BODY_BYTES = 8 * 1024


def _invalid(exc: ValidationError) -> ApiError:
    """400 ``invalid_envelope`` naming every key that is wrong (the first five in the message)."""
    details = [
        {"key": format_loc(e["loc"]), "message": e["msg"].removeprefix("Value error, ")} for e in exc.errors()
    ]
    text = "; ".join(f"{d['key']}: {d['message']}" for d in details[:5])
    return ApiError(400, "invalid_envelope", f"invalid envelope: {text}", details)


@routes.serve(endpoints.POST_ENVELOPE)
async def external_callback(request: web.Request) -> web.Response:
    """An envelope from another system follows the same path as a fire: contract, session, relay."""
    service = service_of(request)
    data = await read_json(request, max_bytes=MAX_ENVELOPE_BYTES)
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_envelope", "the body must be a callback envelope (a JSON object)")
    try:
        envelope = Envelope.model_validate(data)  # strict: nothing converted, nothing unknown (§7)
    except ValidationError as exc:
        raise _invalid(exc) from None
    sent = data.get("source")  # valid if present: only its service is kept, the route is this one
    service_name = sent.get("service") if isinstance(sent, dict) else None
    source = EnvelopeSource(service=service_name or "external", route="/hooks/sentinel")
    envelope = envelope.model_copy(update={"source": source})
    known = service.target_names()
    unknown = [t for t in envelope.delivery.targets if t not in known]
    if unknown:
        raise ApiError(
            400,
            "unknown_target",
            f"delivery.targets names unknown target {unknown[0]!r}{did_you_mean(unknown[0], known)}; "
            f"configured: {', '.join(sorted(known))}",
        )
    contract = await service.accept_callback(envelope)
    return web.json_response({"callbackId": contract.callback_id, "state": contract.state}, status=202)


async def callback_page(service: Service, query: Mapping[str, str]) -> dict[str, Any]:
    """``{"items", "nextCursor"}`` for the ``watcherId``, ``state``, ``limit`` and ``cursor`` of ``query``."""
    state = query.get("state") or None
    if state is not None and state not in STATES:
        raise ApiError(400, "invalid_state", f"state {state!r} is not one of {', '.join(STATES)}")
    page = await service.callbacks(
        query.get("watcherId") or None,
        state,  # type: ignore[arg-type]  # checked against STATES above
        limit=limit_param(query, maximum=MAX_LIMIT, default=DEFAULT_LIMIT),
        cursor=query.get("cursor") or None,
    )
    items = [c.model_dump(mode="json", by_alias=True) for c in page.items]
    return {"items": items, "nextCursor": page.next_cursor}


async def callback_json(service: Service, callback_id: str) -> dict[str, Any]:
    """``{"callback", "envelope", "conditions", "transcript", "deliveries", "usage"}``; 404 for an
    unknown id. ``conditions`` are a match's leaves with their actual values at the fire (else
    null); ``usage`` what its model calls used (SPEC §20)."""
    found = await service.callback(callback_id)
    if found is None:
        raise ApiError(404, "not_found", f"callback {callback_id!r} not found")
    return {
        "callback": found.contract.model_dump(mode="json", by_alias=True),
        "envelope": None if found.envelope is None else found.envelope.to_json(),
        "conditions": found.conditions,
        "transcript": [e.model_dump(mode="json", by_alias=True) for e in found.transcript],
        "deliveries": [d.model_dump(mode="json", by_alias=True) for d in found.deliveries],
        "usage": found.usage.to_json(),
        "feedback": feedback_json(found.feedback),
    }


def feedback_json(feedback: Sequence[Feedback]) -> dict[str, Any]:
    """``{"counts": {useful, notUseful}, "items": [...]}`` (the latest per person)."""
    return {
        "counts": FeedbackCounts.of(feedback).to_json(),
        "items": [f.model_dump(mode="json", by_alias=True) for f in feedback],
    }


def feedback_of(data: Any) -> tuple[bool, str | None]:
    """``useful`` and ``note`` of a ``{useful: bool, note?}`` body; 400 naming what is wrong."""
    if not isinstance(data, dict) or set(data) - {"useful", "note"}:
        raise ApiError(400, "invalid_feedback", 'the body must be {"useful": true|false, "note"?: "…"}')
    useful = data.get("useful")
    if not isinstance(useful, bool):
        raise ApiError(400, "invalid_feedback", f"useful must be true or false, got {json.dumps(useful)}")
    note = data.get("note")
    if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE_CHARS):
        raise ApiError(400, "invalid_note", f"note must be a string of at most {MAX_NOTE_CHARS} characters")
    return useful, (note.strip() or None) if note is not None else None


@routes.serve(endpoints.LIST)
async def list_callbacks(request: web.Request) -> web.Response:
    return web.json_response(await callback_page(service_of(request), request.query))


@routes.serve(endpoints.SHOW)
async def show_callback(request: web.Request) -> web.Response:
    return web.json_response(await callback_json(service_of(request), request.match_info["id"]))


@routes.serve(endpoints.FEEDBACK)
async def give_feedback(request: web.Request) -> web.Response:
    """A person's 👍/👎 on a callback (the actor header names the person)."""
    who = who_of(request)
    useful, note = feedback_of(await read_json(request, max_bytes=FEEDBACK_BODY_BYTES))
    callback_id = request.match_info["id"]
    found = await service_of(request).give_feedback(callback_id, who, useful, note)
    if found is None:
        raise ApiError(404, "not_found", f"callback {callback_id!r} not found")
    return web.json_response(feedback_json(found))


@routes.serve(report_endpoints.REPORT)
async def report(request: web.Request) -> web.Response:
    """The noise report of the window ``since`` (default 7d) up to now."""
    return web.json_response(await report_json(service_of(request), request.query.get("since") or "7d"))


@routes.serve(report_endpoints.CHARTS)
async def report_charts_route(request: web.Request) -> web.Response:
    """The same window's charts, as SVG documents in JSON (the page fetches them with its token)."""
    found = await report_json(service_of(request), request.query.get("since") or "7d")
    return web.json_response({"charts": report_charts(found)})


async def report_json(service: Service, since: str) -> dict[str, Any]:
    """The report (``report.build_report``) of the window ``since``; 400 for a window that is not
    one or reaches past retention (its older fires are gone)."""
    try:
        window = parse_since(since)
    except ValueError as exc:
        raise ApiError(400, "invalid_since", str(exc)) from None
    days = service.settings.retention.callbacks_days
    if days and window > timedelta(days=days):
        raise ApiError(
            400,
            "invalid_since",
            f"since: {since} reaches past retention.callbacksDays ({days} days): older fires are "
            "pruned; ask for a shorter window",
        )
    return await service.report(window)


@routes.serve(endpoints.SESSION)
async def show_session(request: web.Request) -> web.Response:
    """A hook session's transcript (every callback of the session, in order)."""
    service = service_of(request)
    key = request.match_info["key"]
    limit = limit_param(request.query, maximum=MAX_TRANSCRIPT, default=MAX_TRANSCRIPT)
    after = int_param(
        request.query, "afterSeq", default=0, minimum=0, maximum=INT64_MAX, code="invalid_after"
    )
    entries = await service.transcript(key, after_seq=after, limit=limit)
    if not entries and (after == 0 or not await service.transcript(key, limit=1)):
        raise ApiError(404, "not_found", f"session {key!r} has no transcript")
    return web.json_response(
        {"sessionKey": key, "transcript": [e.model_dump(mode="json", by_alias=True) for e in entries]}
    )
