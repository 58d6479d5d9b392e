"""``snake bench`` benchmarks: one module each, with ``register(subparsers)``."""
