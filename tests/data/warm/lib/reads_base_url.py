"""Reads the model's address at import: a fork would keep the first life's."""

import os

BASE_URL = os.environ.get("OPENAI_BASE_URL")
