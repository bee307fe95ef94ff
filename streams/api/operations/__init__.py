"""The views of the other planes and of operators: run history and run events, planning,
consolidation counts and reports, dead letters, API keys."""
