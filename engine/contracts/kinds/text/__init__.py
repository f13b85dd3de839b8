"""The text contract kind: size, line and pattern rules over plain text."""
