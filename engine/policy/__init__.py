"""The policy sections of the rulepack format, one package each (model, checks, compiler,
runtime): triggers and hints, limits and rate limits, gates, conflicts, menus and choices,
rounds."""
