"""Whether the fleet exports OpenTelemetry spans, decided from the environment without importing it.

Off by default. On when ``FLEET_TELEMETRY`` is ``1``/``true``/``on``/``otlp``, or when the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` names a collector; never when
``FLEET_TELEMETRY`` is ``0``/``false``/``off`` or the standard ``OTEL_SDK_DISABLED`` is ``true``. Only
when it is on is :mod:`agent_fleet.observe.otel` (and with it ``opentelemetry``, the ``otel`` extra)
imported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from agent_fleet.domain.events import Event
from agent_fleet.errors import ConfigError

__all__ = ["Telemetry", "open_telemetry", "telemetry_wanted"]

_ON = frozenset({"1", "true", "on", "yes", "otlp"})
_OFF = frozenset({"0", "false", "off", "no", "none"})


class Telemetry(Protocol):
    def heard(self, events: Sequence[Event]) -> None: ...  # every batch of durable events

    def close(self) -> None: ...


def telemetry_wanted(env: Mapping[str, str]) -> bool:
    """True when the fleet should export spans (see the module docstring)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    switch = env.get("FLEET_TELEMETRY", "").strip().lower()
    if switch in _OFF:
        return False
    if switch in _ON:
        return True
    return bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def open_telemetry(env: Mapping[str, str], *, system: str) -> Telemetry | None:
    """The span recorder when telemetry is on (``system``: the provider's name), else None."""
    if not telemetry_wanted(env):
        return None
    try:
        from agent_fleet.observe.otel import FleetTelemetry
    except ImportError:
        raise ConfigError(
            "telemetry is switched on but OpenTelemetry is not installed: pip install 'agent-fleet-manager[otel]'"
        ) from None
    return FleetTelemetry.from_environment(system=system)
