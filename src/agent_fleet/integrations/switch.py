"""Whether OpenTelemetry export is on, decided from the environment without importing it.

Off by default. On when ``FLEET_TELEMETRY`` is ``1``/``true``/``on``/``otlp``, or when the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` names a collector; never when
``FLEET_TELEMETRY`` is ``0``/``false``/``off`` or the standard ``OTEL_SDK_DISABLED`` is ``true``.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["telemetry_wanted"]

_ON = frozenset({"1", "true", "on", "yes", "otlp"})
_OFF = frozenset({"0", "false", "off", "no", "none"})


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
