"""Dynamixel Protocol 2.0 backend (dynamixel-sdk) for X-series servos.

Modules: ``backend``, ``control_table``, ``conversion``, ``hardware_errors``.
"""
