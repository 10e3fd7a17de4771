import sys

from dlci.cli import main

sys.exit(main())
