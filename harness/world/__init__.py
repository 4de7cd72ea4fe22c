"""The world: ground truth outside the agent, an SQLite database per trial.

Simulated tools act only on it; every real execution of a tool is ledgered in
the same transaction as its effect.
"""
