"""Keeps a file open from its import: every fork would share it."""

import os

KEPT = open(os.devnull, "rb")  # noqa: SIM115
