"""The audit: replay the broker's producer rules over an export and give every batch a verdict."""
