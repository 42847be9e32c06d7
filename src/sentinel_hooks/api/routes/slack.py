"""``POST /hooks/slack/interactions``: Slack's button clicks (SPEC.md §21).

In order: the body must be a form (415), within its limit (413), signed by Slack with
``slack.signingSecret`` less than 5 minutes ago (401; ``api.slack_signature``), and hold one of
Sentinel's buttons (400). The clicking Slack user must be in ``people`` with a role that may act
(operator or admin); anyone else is told ``not allowed`` (an ephemeral reply only they see) and
nothing changes. An allowed click acts as that person through the service's operations (actor
the person's name, via ``slack``, audited), then the clicked message is updated in place with
the target's bot token. Slack waits 3 seconds for the answer and shows a timeout after that, so
the answer waits for the update at most ``SLACK_WAIT_S`` and the update goes on after it when
Slack's API is slow; a failure to update is logged, not answered: the change is made either way.
Nothing here logs a header or the body (the signature, the secret's work, the message).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

from aiohttp import web

from sentinel_hooks.api.app import service_of
from sentinel_hooks.api.body import parse_json, read_raw
from sentinel_hooks.api.errors import ApiError
from sentinel_hooks.api.routing import Routes, body_limit
from sentinel_hooks.api.slack_signature import slack_request_is_valid
from sentinel_hooks.config.people import person_for_slack
from sentinel_hooks.core.roles import Role, Who, allows
from sentinel_hooks.delivery.targets.base import DeliveryError
from sentinel_hooks.delivery.targets.slack import SlackTarget
from sentinel_hooks.delivery.targets.slack_buttons import Click, NotAClick, parse_click, payload_json
from sentinel_hooks.endpoints.slack import FORM, SLACK_INTERACTIONS
from sentinel_hooks.errors import NotFound

routes = Routes()
log = logging.getLogger(__name__)

NOT_SIGNED = (
    "the request does not carry a valid Slack signature made in the last 5 minutes "
    "(X-Slack-Signature, X-Slack-Request-Timestamp)"
)
ACTING_ROLE: Role = "operator"  # every button changes something: operator or admin
SLACK_WAIT_S = 2.0  # of Slack's 3 s for an answer, what the message's update may take before it
_LATE: set[asyncio.Task[None]] = set()  # updates that outlived their answer (kept until done)
NOT_ALLOWED = "not allowed: your Slack user is not in Sentinel's `people` with the role operator or admin"


def _reply(text: str) -> web.Response:
    """An answer only the clicking person sees."""
    return web.json_response({"response_type": "ephemeral", "text": text, "replace_original": False})


async def interactions(request: web.Request) -> web.Response:
    service = service_of(request)
    secret = service.settings.slack.signing_secret
    if secret is None:
        raise ApiError(401, "unauthorized", "Slack buttons are off: set slack.signingSecret to take clicks")
    media = request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
    if media != FORM:
        raise ApiError(415, "unsupported_media_type", f"Slack's interactions come as a form ({FORM})")
    raw = await read_raw(request, max_bytes=body_limit(SLACK_INTERACTIONS, service))
    now = service.clock.now().timestamp
    if not slack_request_is_valid(secret.get_secret_value(), request.headers, raw, now):
        log.warning("a Slack interaction was refused: no valid signature within 5 minutes")
        raise ApiError(401, "unauthorized", NOT_SIGNED)
    try:
        click = parse_click(parse_json(payload_json(raw).encode()))
    except NotAClick as exc:
        raise ApiError(400, "invalid_interaction", str(exc)) from exc
    posted_by = service.targets.get(click.target)
    target = posted_by if isinstance(posted_by, SlackTarget) else None
    found = person_for_slack(service.settings.people, click.user)
    if found is None or not allows(found[1].role, ACTING_ROLE):
        who = "not in people" if found is None else f"{found[0]} ({found[1].role})"
        log.info("Slack click %s refused: Slack user %s is %s", click.action, click.user, who)
        return await _tell(target, click, NOT_ALLOWED)
    name, _ = found
    try:
        clicked = await service.slack_click(click.action, click.value, Who(name, None, "slack", named=True))
    except NotFound as exc:
        return await _tell(target, click, str(exc))
    if clicked.line is None:  # nothing changed: say why to the person alone
        return await _tell(target, click, clicked.reply)
    if target is None:
        log.warning("Slack click on %r (not a slack target): message not updated", click.target)
    else:
        shown = target.show_click(click.value, click, clicked.line, closed=clicked.closed)
        await _within_slack_wait(shown, f"Slack click {click.action} made; updating its message")
    return _reply(clicked.reply)


async def _within_slack_wait(call: Awaitable[None], what: str) -> None:
    """Wait for a Slack API ``call`` at most ``SLACK_WAIT_S``, then let it finish after the answer;
    its failure is logged as ``what`` failed."""

    async def logged() -> None:
        try:
            await call
        except DeliveryError as exc:
            log.warning("%s failed: %s", what, exc)
        except Exception as exc:  # nobody awaits this task: a line in the log, not a traceback at exit
            log.error("%s failed (%s: %s)", what, type(exc).__name__, exc)

    task = asyncio.get_running_loop().create_task(logged())
    done, _ = await asyncio.wait({task}, timeout=SLACK_WAIT_S)
    if not done:
        _LATE.add(task)
        task.add_done_callback(_LATE.discard)


async def _tell(target: SlackTarget | None, click: Click, text: str) -> web.Response:
    """Tell the person who clicked, and only them (``chat.postEphemeral``: Slack shows nothing of
    a button's HTTP answer), and answer with the same ephemeral text."""
    if target is not None:
        told = target.tell(click, text)
        await _within_slack_wait(told, f"telling Slack user {click.user} about their click")
    return _reply(text)


routes.serve(SLACK_INTERACTIONS)(interactions)
