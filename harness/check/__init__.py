"""Invariant checkers: functions of a trial's files that return verdicts, never raise."""
