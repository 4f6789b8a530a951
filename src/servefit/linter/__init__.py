"""linter."""
