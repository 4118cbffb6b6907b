# SPDX-License-Identifier: Apache-2.0
"""What the subcommands of `python3 -m stackprov` share: option parsing as the C CLI's (bindings/cli/args.cpp),
its error lines and exit codes, and reading the library's JSON as the CLI's Json does."""
import argparse
import errno
import json
import os
import stat
import sys

PROG = "python3 -m stackprov"
EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A bad option or value: one line naming it, exit status 2."""


def usage(cmd, message):
    """`stackprov CMD: MESSAGE (see 'stackprov CMD --help')` (bindings/cli/args.cpp usage_error); 2."""
    sys.stderr.write("%s %s: %s (see '%s %s --help')\n" % (PROG, cmd, message, PROG, cmd))
    return EXIT_USAGE


def fail(cmd, message):
    sys.stderr.write("%s %s: %s\n" % (PROG, cmd, message))
    return EXIT_FAIL


def warn_lines(text):
    for line in (text or "").splitlines():
        if line:
            sys.stderr.write("stackprov: warning: %s\n" % line)


def lib_fail(cmd, what, err):
    """The CLI's lib_fail (bindings/cli/cmd_trace.cpp): the message's first line after WHAT, the
    others as warnings. 1."""
    first, _, rest = err.message.partition("\n")
    sys.stderr.write("%s %s: %s%s%s\n" % (PROG, cmd, what, ": " if what else "", first))
    warn_lines(rest)
    return EXIT_FAIL


class _Once(argparse.Action):
    """An option that may be given once ("option --X given twice" otherwise, as the CLI's Args.repeated)."""

    def __call__(self, parser, namespace, values, option_string=None):
        seen = namespace.__dict__.setdefault("_given", set())
        if self.dest in seen:
            raise UsageError("option %s given twice" % self.option_strings[-1])
        seen.add(self.dest)
        setattr(namespace, self.dest, values)


class _Flag(argparse.Action):
    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, default=False, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, True)


class HelpLayout:
    """--help laid out as the CLI's (issue 36): the usage, then the options (argparse's positional
    arguments after them), then the description and the epilog -- argparse prints the description
    before the options."""

    def format_help(self):
        f = self._get_formatter()
        f.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        positional = lambda g: bool(g._group_actions) and all(not a.option_strings for a in g._group_actions)
        for g in sorted(self._action_groups, key=positional):  # stable: options first, in their order
            f.start_section(g.title)
            f.add_text(g.description)
            f.add_arguments(g._group_actions)
            f.end_section()
        f.add_text(self.description)
        f.add_text(self.epilog)
        return f.format_help()


class Parser(HelpLayout, argparse.ArgumentParser):
    """argparse whose errors are the CLI's usage errors of one command (exit 2, one line)."""

    def __init__(self, cmd, **kw):
        kw.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(prog="%s %s" % (PROG, cmd), allow_abbrev=False, **kw)
        self.cmd = cmd

    def error(self, message):
        raise UsageError(message)

    def once(self, *names, **kw):
        """An option with a value, given at most once."""
        return self.add_argument(*names, action=_Once, **kw)

    def flag(self, *names, **kw):
        return self.add_argument(*names, action=_Flag, **kw)


def run(parser, argv, body):
    """Parses argv with `parser` and runs body(args); a UsageError from either is exit 2."""
    try:
        args = parser.parse_args(argv)
        return body(args)
    except UsageError as e:
        return usage(parser.cmd, str(e))


def uint_in(text, lo, hi):
    """A decimal integer in [lo, hi] as the CLI's parse_uint reads it (digits only), else None."""
    if not text or not text.isascii() or not text.isdigit():
        return None
    v = int(text)
    return v if lo <= v <= hi else None


def unreadable_file(path):
    """"" when `path` is a readable file, else why not (strerror, or "is a directory"), as the CLI's."""
    try:
        st = os.stat(path)
    except OSError as e:
        return os.strerror(e.errno)
    if stat.S_ISDIR(st.st_mode):
        return "is a directory"
    if not os.access(path, os.R_OK):
        return os.strerror(errno.EACCES)
    return ""


def not_a_directory(path):
    """"" when `path` is a directory, else why not."""
    try:
        st = os.stat(path)
    except OSError as e:
        return os.strerror(e.errno)
    return "" if stat.S_ISDIR(st.st_mode) else "not a directory"


def is_sha256_digest(s):
    h = s[7:]
    return len(s) == 71 and s.startswith("sha256:") and all(c in "0123456789abcdef" for c in h)


def is_store_url(s):
    return s.startswith("sqlite:") or s.startswith("postgresql://") or s.startswith("postgres://")


def json_str(s):
    """A JSON string as the CLI writes it (bindings/cli/print.cpp json_escape)."""
    out = []
    for c in s or "":
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif ord(c) < 0x20:
            out.append("\\u%04x" % ord(c))
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


# ---- the library's JSON, read as the CLI's Json (bindings/cli/args.hpp): a number keeps its text
# as written (95.0 stays "95.0"), and str() of a member is its string or number text, else "".

class Obj(list):
    """A JSON object as its (key, value) pairs in document order; get() finds the first."""

    def get(self, key):
        for k, v in self:
            if k == key:
                return v
        return None


class Num(str):
    """A JSON number's text, as written."""


def parse_json(text):
    return json.loads(text, parse_int=Num, parse_float=Num, parse_constant=Num, object_pairs_hook=Obj)


def jstr(o, key):
    v = o.get(key) if isinstance(o, Obj) else None
    return v if isinstance(v, str) else ""


def jarr(o, key):
    v = o.get(key) if isinstance(o, Obj) else None
    return v if isinstance(v, list) and not isinstance(v, Obj) else []


def jnum(o, key):
    """A member's number (its text read as strtod does), else 0 (a string member is not a number)."""
    v = o.get(key) if isinstance(o, Obj) else None
    return float(v) if isinstance(v, Num) else 0.0


def write_text(text):
    """The library's document on stdout with one trailing newline (the CLI adds it when missing)."""
    sys.stdout.write(text)
    if not text.endswith("\n"):
        sys.stdout.write("\n")
