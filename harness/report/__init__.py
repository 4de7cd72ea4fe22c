"""Reports: writers that turn results and verdicts into files and tables; they never decide."""
