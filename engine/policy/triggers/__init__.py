"""The triggers section of the rulepack format: model, checks, compiler and runtime."""
