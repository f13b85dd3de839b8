"""The budgets and breakers sections of the rulepack format: model, checks and runtime."""
