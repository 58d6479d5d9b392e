"""Keyboard teleoperation: a pure keymap (:mod:`.keymap`) and thin terminal plumbing (:mod:`.terminal`)."""
