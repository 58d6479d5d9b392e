"""``snake servo-model``: a servo model fitted to logs of one servo on a pendulum bench."""
