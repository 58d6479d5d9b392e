"""Rosbag workflows of the stack: record, inspect, analyse, replay, recover, calibrate.

Bag I/O is rosbags (MCAP and sqlite3, rosbag2 metadata versions up to 9); the analysis
math lives in :mod:`snake_core.analysis.session`.
"""
