"""Griffe extension: adapt the docstrings' reStructuredText habits to Markdown.

1. Sphinx roles (``:class:`~knorm.Sampler```, ``:func:`table3```) become code spans of
   their target, shortened to the last component when the target starts with ``~`` (as
   Sphinx displays it); Markdown would otherwise show them verbatim.
2. A paragraph of prose after a numpy ``Parameters`` / ``Attributes`` list (a line at
   the section's indentation, after a blank line, that is not a ``name : type`` entry)
   gets its own ``Notes`` heading, so the parser does not read it as more entries.
"""

import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):`(~?)([^`]+)`")
LIST_SECTIONS = {"Parameters", "Attributes", "Other Parameters"}
ENTRY = re.compile(r"^[\w*][\w*, ]*\s:\s|^[\w*]+$")


def _span(match):
    tilde, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def _notes_after_lists(text):
    lines = text.split("\n")
    out, in_list, blank = [], False, False
    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if nxt.strip() and set(nxt.strip()) == {"-"}:  # a section heading (underlined)
            in_list = line.strip() in LIST_SECTIONS
        elif in_list and blank and line.strip() and not line[:1].isspace() and not ENTRY.match(line):
            out += ["Notes", "-----"]
            in_list = False
        out.append(line)
        blank = not line.strip()
    return "\n".join(out)


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj, **kwargs):
        if obj.docstring is not None:
            obj.docstring.value = _notes_after_lists(ROLE.sub(_span, obj.docstring.value))
