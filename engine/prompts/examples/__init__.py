"""The examples section of the rulepack format: model, checks, compiler and runtime."""
