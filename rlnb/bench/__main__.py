from rlnb.bench import main

raise SystemExit(main())
