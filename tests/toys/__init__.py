"""Toy extensions, each one module as a user would write it: a channel group, a query term and a VLM rule.
``tests/test_registries.py`` registers each with one line and runs it through encode, select and the hand-off."""
