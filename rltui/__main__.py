import sys

from rltui.cli import main

sys.exit(main())
