"""A Dynamixel servo in physical terms: the model's data, its equations and the pendulum rig.

``model``: the servo model files (``config/servos/<model>.yaml``: motor, firmware, friction);
``actuator``: the voltage-limited DC motor behind the firmware's P gain and the friction
structures; ``pendulum``: a servo on a pendulum bench, rolled out against recorded logs.
"""
