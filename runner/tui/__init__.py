"""``runner monitor``: a Textual app attached to a store (live, finished or interrupted)."""
