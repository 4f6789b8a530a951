from servefit.cli import main

raise SystemExit(main())
