"""The templates section of the rulepack format: model, checks, compiler and runtime."""
