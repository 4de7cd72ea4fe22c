"""Reads a variable at import that every life has alike: no reason to refuse."""

import os

HOME = os.environ.get("HOME")
