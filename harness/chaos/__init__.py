"""Chaos: scenarios, crash schedules, the supervisor, trials and campaigns."""
