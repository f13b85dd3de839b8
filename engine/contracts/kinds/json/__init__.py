"""The json contract kind: JSON documents checked against a JSON Schema."""
