"""X-series Hardware Error Status bits (address 70; e-Manual, Hardware Error Status)."""

from __future__ import annotations

HW_INPUT_VOLTAGE = 0x01
"""Input voltage outside the Min/Max Voltage Limit."""
HW_OVERHEATING = 0x04
"""Internal temperature above the Temperature Limit."""
HW_MOTOR_ENCODER = 0x08
"""Motor encoder malfunction."""
HW_ELECTRICAL_SHOCK = 0x10
"""Electrical shock or insufficient power."""
HW_OVERLOAD = 0x20
"""Persistent load above the maximum output."""

HW_ERROR_NAMES: dict[int, str] = {
    HW_INPUT_VOLTAGE: "input voltage",
    HW_OVERHEATING: "overheating",
    HW_MOTOR_ENCODER: "motor encoder",
    HW_ELECTRICAL_SHOCK: "electrical shock",
    HW_OVERLOAD: "overload",
}


def describe_hw_error(bits: int) -> str:
    """Human-readable list of the hardware error bits set in ``bits`` ('' if none)."""
    return ", ".join(name for bit, name in HW_ERROR_NAMES.items() if bits & bit)
