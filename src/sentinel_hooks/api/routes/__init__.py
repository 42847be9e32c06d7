"""HTTP route tables, one module per area."""
