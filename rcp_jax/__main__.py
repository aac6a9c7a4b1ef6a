import sys

from rcp_jax.cli.app import main

sys.exit(main())
