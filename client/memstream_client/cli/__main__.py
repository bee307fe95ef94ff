import sys

from memstream_client.cli.commands import main

sys.exit(main())
