"""Hints for upstream ``deliveryTargets``: which Sentinel target to configure for a chat.

Upstream names a chat inline (``{channel: telegram, to: "5613673222", accountId}``) and
OpenClaw's gateway delivers; Sentinel delivers through targets named in sentinel.yaml
(SPEC.md §2.1, §16), which a watcher lists by name. So a delivery target cannot be carried
over as data: the hint shows the target to add.
"""

from __future__ import annotations

import re
from typing import Any, Final

_APPRISE: Final = {
    "telegram": "tgram://${{env:TELEGRAM_BOT_TOKEN}}/{to}",
    "discord": "discord://${{env:DISCORD_WEBHOOK_ID}}/${{env:DISCORD_WEBHOOK_TOKEN}}",
    "msteams": "msteams://${{env:TEAMS_WEBHOOK}}",
    "teams": "msteams://${{env:TEAMS_WEBHOOK}}",
    "email": "mailto://${{env:SMTP_USER}}:${{env:SMTP_PASSWORD}}@example.com?to={to}",
    "signal": "signal://${{env:SIGNAL_API_HOST}}/${{env:SIGNAL_FROM}}/{to}",
    "whatsapp": "whatsapp://${{env:WHATSAPP_TOKEN}}@${{env:WHATSAPP_FROM_ID}}/{to}",
    "matrix": "matrixs://${{env:MATRIX_USER}}:${{env:MATRIX_PASSWORD}}@matrix.org/{to}",
    "mattermost": "mmosts://mattermost.example.com/${{env:MATTERMOST_TOKEN}}",
    "ntfy": "ntfys://ntfy.sh/{to}",
}


def target_name(channel: str, to: str) -> str:
    """A target name for sentinel.yaml made of the channel and the recipient."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", f"{channel}-{to}").strip("-")[:64] or "target"


def target_hint(target: Any) -> str:
    """Why an upstream delivery target is not carried, and the sentinel.yaml target to add."""
    if not isinstance(target, dict) or not isinstance(target.get("channel"), str):
        return "not a {channel, to} object; Sentinel delivers to targets named in sentinel.yaml"
    channel = target["channel"].strip().lower()
    to = str(target.get("to", ""))
    name = target_name(channel, to)
    lead = (
        f"{channel} → {to}: Sentinel delivers to targets named in sentinel.yaml; add one under "
        f"`targets:` and list its name in this watcher's deliveryTargets, e.g. "
    )
    if channel == "slack":
        example = f'{name}: {{type: slack, token: "${{env:SLACK_BOT_TOKEN}}", channel: "{to}"}}'
    elif channel in _APPRISE:
        example = f'{name}: {{type: apprise, urls: ["{_APPRISE[channel].format(to=to)}"]}}'
    else:
        example = f'{name}: {{type: webhook, url: "https://…"}} (or an apprise URL for {channel})'
    account = f" (accountId {target['accountId']!r} has no counterpart)" if target.get("accountId") else ""
    return lead + example + account
