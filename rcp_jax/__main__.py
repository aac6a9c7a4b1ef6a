import sys

from rcp_jax.cli import main

sys.exit(main())
