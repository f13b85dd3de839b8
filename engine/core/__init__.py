"""The ground floor: errors, text decoding, linear-time patterns, placeholders, clock,
resource bounds, parse results and verdicts. Imports nothing else of the engine."""
