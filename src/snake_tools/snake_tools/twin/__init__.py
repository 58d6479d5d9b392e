"""The twin against the robot: replay a recording through the MuJoCo twin (``snake twin``)."""
