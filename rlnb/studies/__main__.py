from rlnb.studies.cli import main

raise SystemExit(main())
