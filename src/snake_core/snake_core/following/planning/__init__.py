"""Path planning among pegs and mapped obstacles (001 Sec. III and V)."""
