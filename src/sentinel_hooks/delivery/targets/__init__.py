"""Delivery targets, a plug-in point: each sends one message once, to one kind of receiver.

``base.py`` is the ``Target`` Protocol, the ``Message`` it carries, the delivery errors and the
registry (``create_target`` by ``type``); each other module is one ``targets:`` type (Slack with
its blocks and threads, webhook, console, file, PagerDuty, Apprise), and ``recording.py`` is the
fake that ships for tests. Retries belong to the dispatcher one folder up, never to a target.
"""
