"""python -m memdesigner.cli"""

from memdesigner.cli.commands import main

raise SystemExit(main())
