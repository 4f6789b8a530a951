from servefit.cli import entry

entry()
