"""The contract compatibility gate: ``python -m pin.contract_check [--committed DIR]`` (CI runs it before the tests).

Generates the JSON Schema of every published contract from its model and compares it with the committed schema
of the same name in DIR (default ``docs/contracts``, the golden files). Prints one line per breaking change
(contract, field, kind of break) and exits 1; 0 when every change is additive; 2 on bad usage. A successor
contract (a v2, docs/runbooks/contract-migration.md) has its own schema file, which must be committed with it:
from then on it is checked as every other, and the v1's stays frozen.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, NoReturn

from pin.calendar.contracts import DOCUMENTS as CALENDAR_DOCUMENTS
from pin.messaging.contract_compat import BREAKING_HELP, compare, schema_files
from pin.messaging.contract_docs import ContractSet
from pin.promotion.contracts import DOCUMENTS as PROMOTION_DOCUMENTS

# Every context that publishes contracts.
CONTRACT_SETS: tuple[ContractSet, ...] = (CALENDAR_DOCUMENTS, PROMOTION_DOCUMENTS)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """Bad usage: one line and exit 2 (SPEC section 9)."""
        self.exit(2, f"usage error: {message}\n")


def current_schemas() -> dict[str, dict[str, Any]]:
    """The schema of every published contract as the models generate it now: file name -> schema."""
    return {name: schema for documents in CONTRACT_SETS for name, schema in documents.message_schemas().items()}


def uncommitted_successors(committed: dict[str, dict[str, Any]], sets: tuple[ContractSet, ...]) -> list[str]:
    """One line per successor contract whose schema is not committed (a v2 is gated from its first commit)."""
    return [
        f"{name.removesuffix('.schema.json')}: (contract): a successor of {contract.PREDECESSOR.__name__} without its"
        " committed schema (generate it and commit it with the v2)"
        for documents in sets
        for contract in documents.contracts
        if contract.PREDECESSOR is not None
        for name in documents.message_schemas_of((contract,))
        if name not in committed
    ]


def main(argv: list[str]) -> int:
    """Run the gate; the exit code is the verdict (0 compatible, 1 breaking, 2 usage)."""
    parser = _Parser(prog="python -m pin.contract_check", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--committed", type=Path, default=Path("docs/contracts"), help="the golden schemas")
    args = parser.parse_args(argv)
    committed = schema_files(args.committed) if args.committed.is_dir() else {}
    if not committed:
        parser.error(f"no committed contract schemas (*.schema.json) in {args.committed}")
    breaks = compare(committed, current_schemas()) + uncommitted_successors(committed, CONTRACT_SETS)
    for line in breaks:
        sys.stdout.write(f"{line}\n")
    if breaks:
        sys.stderr.write(f"{len(breaks)} breaking change(s) of published contracts: {BREAKING_HELP}\n")
        return 1
    sys.stdout.write(f"{len(committed)} committed contract schemas checked: every change is additive\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
