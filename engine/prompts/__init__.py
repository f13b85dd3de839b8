"""Prompts: the templates and examples sections (model, checks, selection), compiling the
pack's templates and rendering prompts."""
