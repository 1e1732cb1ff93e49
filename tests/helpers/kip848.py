"""Broker settings for KIP-848 consumer groups that settle in seconds, not Kafka's minutes."""

from __future__ import annotations

# Seconds, lowered from Kafka's 45 s / 5 s through the min settings.
SESSION_MS = 3000
HEARTBEAT_MS = 250

FAST_GROUPS = {
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
    "group.consumer.min.heartbeat.interval.ms": "100",
}
