"""The reviews section of the rulepack format: which decisions a person reviews, and what
happens to a review nobody resolves in time."""
