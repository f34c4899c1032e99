"""Great Expectations suites over the audit tables, and the validation that runs them."""
