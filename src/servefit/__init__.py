"""servefit: lint and tune LLM serving configs against the memory the engine will plan."""

__version__ = "0.1.0"
