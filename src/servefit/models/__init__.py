"""Model architectures: the catalog and reference resolution. config.json parsing is
servefit.models.config_json, imported where a config.json is read (a catalogued model needs none)."""

from servefit.models.architecture import count_params
from servefit.models.catalog import lookup, nearest
from servefit.models.catalog_entries import all_models
from servefit.models.resolve import resolve_model
from servefit.models.spec import ModelSpec

__all__ = ["ModelSpec", "all_models", "count_params", "lookup", "nearest", "resolve_model"]
