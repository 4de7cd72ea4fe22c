"""The agent under test: a real process that runs a plan through a runtime.

Kept light on purpose (no pydantic, faker, hypothesis or psutil): the harness
restarts it after every kill, so its start-up time is the harness's speed.
"""
