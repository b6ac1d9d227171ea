from mgtutor.tui.cli import main

raise SystemExit(main())
