"""Protocol 2.0 servo emulator on a pseudo-terminal (independent of dynamixel-sdk)."""

from snake_hardware.emulator.bus import ServoBusEmulator

__all__ = ["ServoBusEmulator"]
