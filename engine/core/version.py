"""The engine's version, in the ground floor so every layer can name it."""

VERSION = "0.1.0"
