"""``snake experiment`` experiments: one module each, with ``register(subparsers)``."""
