"""mkdocs hook: replace ``<!-- knorm-help[: COMMAND] -->`` with that command's ``--help`` text.

The help comes from ``knorm.cli.build_parser()`` of this checkout at build time, so the
command-line reference can never drift from the parser.
"""

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"<!-- knorm-help(?::\s*(\w+))?\s*-->")


def _help(command):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # document this checkout, whatever is installed
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal width: fix it
    from knorm.cli import build_parser

    parser = build_parser()
    if command:
        sub = next(a for a in parser._actions if a.dest == "command")
        if command not in sub.choices:
            raise ValueError(f"docs: knorm has no command {command!r} (markers: <!-- knorm-help: NAME -->)")
        parser = sub.choices[command]
    return parser.format_help()


def on_page_markdown(markdown, page, config, files):
    return MARKER.sub(lambda m: "```text\n" + _help(m.group(1)).rstrip() + "\n```", markdown)
