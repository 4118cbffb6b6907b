# SPDX-License-Identifier: Apache-2.0
"""The layout every --help text has (issue 36): the usage, then the option list, then the prose.

Used by tests/integration/cli/cli_test.py (the CLI) and bindings/python/tests (python3 -m stackprov),
so that both hold their help texts to one rule. The terms:

usage block  the text's first paragraph (up to the first empty line); its first line starts with
             "usage:", and every line of it is a usage line (continuations included).
option line  a line that starts with whitespace and then '-' ("  -p, --pid PID  ...", "  -- CMD").
option head  what an option line names: the line up to its first run of two spaces (the option's
             spellings and value names, before the description).
heading      a line ending in ':' directly followed by an option line ("options:", "Options
             (--opt VALUE or --opt=VALUE):").
prose line   outside the usage block, a line of at least 40 characters that is neither an option
             line nor a heading (a sentence of a paragraph; short lines such as "Exit status:" are
             not prose either).

A text is laid out right when it has an option line, its first option line comes before its first
prose line, and every --name of the usage block is named by an option head.
"""
import re

PROSE_MIN = 40
_OPTION_LINE = re.compile(r"^\s+-")
_LONG_NAME = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def usage_block(lines):
    """(the usage block's lines, the index of the first line after it) of a text's lines."""
    start = next((i for i, l in enumerate(lines) if l.strip()), len(lines))
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end], end


def problems(text):
    """What is wrong with `text`'s layout: [] when it is usage, options, prose."""
    out = []
    lines = text.split("\n")
    first = next((l for l in lines if l.strip()), "")
    if not first.startswith("usage:"):
        out.append("the first non-empty line does not start with 'usage:' (%r)" % first[:80])
    usage, after = usage_block(lines)
    rest = lines[after:]
    opt_at = next((i for i, l in enumerate(rest) if _OPTION_LINE.match(l)), None)
    def heading(i):
        return rest[i].rstrip().endswith(":") and i + 1 < len(rest) and bool(_OPTION_LINE.match(rest[i + 1]))

    prose_at = next((i for i, l in enumerate(rest)
                     if len(l) >= PROSE_MIN and not _OPTION_LINE.match(l) and not heading(i)), None)
    if opt_at is None:
        out.append("no option line (whitespace, then '-')")
    elif prose_at is not None and prose_at < opt_at:
        out.append("prose (line %d: %r) before the first option line (line %d: %r)"
                   % (after + prose_at + 1, rest[prose_at][:60], after + opt_at + 1, rest[opt_at][:60]))
    heads = set()
    for l in rest:
        if _OPTION_LINE.match(l):
            heads.update(_LONG_NAME.findall(re.split(r"\s{2,}", l.strip(), maxsplit=1)[0]))
    missing = sorted(set(_LONG_NAME.findall("\n".join(usage))) - heads)
    if missing:
        out.append("the usage names %s, which no option line names" % ", ".join(missing))
    return out
