import gc

gc.disable()  # before the imports: see cli.entry

from servefit.cli import entry  # noqa: E402

entry()
