"""Subcommands, one module each."""
