"""`python -m pin` is the `pin` command."""

from pin.cli import main

main()
