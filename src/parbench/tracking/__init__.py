"""MLflow: one child run per job under one parent run per sweep."""
