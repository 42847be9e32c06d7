"""Cron expressions and IANA timezones as users write them (watcher schedules, maintenance
windows): checked once at load, with messages that say how to fix them."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def check_cron(value: str) -> str:
    """``value`` when it is a cron expression of 5 fields (or 6, seconds first); ValueError otherwise."""
    fields = value.split()
    if len(fields) not in (5, 6):
        raise ValueError(
            f"cron schedule {value!r} has {len(fields)} fields; write 5 "
            "(minute hour day month weekday) or 6 (seconds first)"
        )
    # croniter costs ~10 ms to import and runs `file` on the interpreter (platform.architecture):
    # only projects with a cron schedule pay for it
    from croniter import croniter

    if not croniter.is_valid(value, second_at_beginning=len(fields) == 6):
        raise ValueError(f"cron schedule {value!r} is not valid (e.g. '*/5 * * * *')")
    return value


def check_timezone(value: str) -> str:
    """``value`` when it names an IANA timezone; ValueError otherwise."""
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown timezone {value!r} (use an IANA name such as 'Europe/Paris')") from exc
    return value
