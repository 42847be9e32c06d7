"""Delivery: the outbox that takes messages to people.

``dispatch.py`` sends pending deliveries, retries with backoff and dead-letters the rest;
``outcomes.py`` records attempt outcomes in batches; ``targets/`` holds what a message is sent
through.
"""
