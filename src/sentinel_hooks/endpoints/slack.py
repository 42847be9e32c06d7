"""Slack's interactivity endpoint (SPEC.md §21): ``POST /hooks/slack/interactions``, where Slack
posts button clicks. The one route that takes a form body (``payload=`` JSON, as Slack sends it),
and no token: the request is signed with the Slack app's signing secret instead."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sentinel_hooks.endpoints.base import Answer, ApiModel, Body, Endpoint

FORM = "application/x-www-form-urlencoded"
MAX_BODY = 64 * 1024  # a click's payload carries the message's blocks (Slack caps a message at 50)


class InteractionForm(ApiModel):
    """Slack's form: one field, ``payload``, a ``block_actions`` JSON object."""

    payload: str = Field(description="the interaction as JSON (Slack's block_actions payload)")


class InteractionReply(ApiModel):
    """What the clicking person is told (only them: ``ephemeral``)."""

    response_type: Literal["ephemeral"] = Field(alias="response_type")
    text: str = Field(description="`not allowed: …`, or what the click did")
    replace_original: Literal[False] = Field(alias="replace_original")


SLACK_INTERACTIONS = Endpoint(
    "slackInteractions",
    "POST",
    "/hooks/slack/interactions",
    "a Slack button click (signed by Slack: X-Slack-Signature and X-Slack-Request-Timestamp)",
    "hooks",
    (Answer(200, "the click was handled (or refused for the person)", InteractionReply),),
    body=Body(InteractionForm, MAX_BODY, about="form-encoded `payload=` as Slack posts it", media=(FORM,)),
    auth="slack",
)

ENDPOINTS = (SLACK_INTERACTIONS,)
