"""Cross-run comparison: tables (and plots) from MLflow runs."""
