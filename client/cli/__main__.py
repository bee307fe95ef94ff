import sys

from client.cli.commands import main

sys.exit(main())
