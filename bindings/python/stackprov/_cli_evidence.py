# SPDX-License-Identifier: Apache-2.0
"""`python3 -m stackprov bundle inspect|lookup|unwind|fsck|put|promote`, `trace-verify` and
`verify-sigstore`: what `stackprov <cmd>` prints (bindings/cli/cmd_bundle.cpp, cmd_provenance.cpp),
through the binding."""
import os
import shutil
import sys
import tempfile

import stackprov
from ._cli import (EXIT_FAIL, EXIT_OK, EXIT_USAGE, PROG, Parser, UsageError, is_sha256_digest, is_store_url, run,
                   usage)

_BUNDLE_HELP = """usage: python3 -m stackprov bundle build [--store DIR] [--sign KEY --log DIR [--log-key LOGKEY]]
                                         [--include-debug] [--debug-file-directory DIR]... [-o PATH]
                                         [--name NAME] FILE...
       python3 -m stackprov bundle inspect BUNDLE [--store DIR] [--json]
       python3 -m stackprov bundle lookup BUNDLE [--store DIR] [--build-id HEX] ADDRESS...
       python3 -m stackprov bundle unwind BUNDLE [--store DIR] [--build-id HEX] ADDRESS...
       python3 -m stackprov bundle put [--store DIR] BUNDLEFILE...
       python3 -m stackprov bundle promote [--store DIR] sha256:HEX...
       python3 -m stackprov bundle export BUNDLE --format symbol-index-json|symbfile [--build-id HEX]
                                          [-o FILE] [--store DIR]
       python3 -m stackprov bundle fsck [--store DIR]

options (which subcommand takes which: the usage above):
  --store DIR   the bundle store (doc/bundles.md "Store"); default $STACKPROV_STORE, else
                $XDG_DATA_HOME/stackprov/store, else $HOME/.local/share/stackprov/store.
  -o, --output PATH   build: write the bundle to PATH; export: write to PATH instead of stdout
  --name NAME   build: module name stored in the bundle (one FILE only; default: its basename)
  --debug-file-directory DIR   build: search DIR for separate debug files (repeatable)
  --include-debug   build: embed each module's debug file (or the file itself) in the bundle
  --sign KEY    build: sign the bundle with the private key KEY into the store and the
                transparency log --log DIR
  --log DIR     build, with --sign: the transparency log
  --log-key LOGKEY   build, with --sign: the private key that signs the log's checkpoint
                (default KEY)
  --json        inspect: one JSON object
  --build-id HEX   lookup, unwind, export: the module of that GNU build-id
  --format symbol-index-json|symbfile   export: the format written
  -h, --help    this text

What `stackprov bundle <subcommand>` prints, through the Python binding (see `stackprov bundle
--help` for the fields).

BUNDLE is a bundle file, or sha256:HEX: the bundle of that digest in the store.

build    writes one symbol bundle with a module for each ELF FILE (stackprov.Bundle.build): to PATH
         (default FILE.sbundle of the first FILE) or, with --store or --sign, into the store (and
         PATH when given); --sign KEY signs it into the transparency log --log DIR. Prints its
         sha256:<hex>.
inspect  prints each module: id kind and hex, name, file/debug sha256, range/pad/unwind-row
         counts (--json: one JSON object).
lookup   resolves module-relative (link-time) ADDRESSes (hex with 0x, or decimal) through the
         bundle alone: for each inline frame innermost first the function (linkage name) and
         file:line:column, then a blank line; "??" and "??:0:0" when the bundle has no range
         there. --build-id picks the module (required when the bundle holds more than one).
unwind   prints the unwind row covering each ADDRESS, one line each.
export   writes the bundle's records as symbol-index-json (every module, or --build-id's) or
         symbfile (one module) to stdout or FILE.
put      stores bundle files and indexes their modules; prints each one's sha256:<hex>.
promote  indexes the modules of bundles already stored by content.
fsck     checks the store. Errors on stdout, warnings on stderr.

Exit status: 0 done (fsck: the store is clean); 1 the work failed (a file, bundle or the
store could not be read or written; fsck: errors found); 2 usage error.
"""


def _bundle_fail(message):
    sys.stderr.write("%s bundle: %s\n" % (PROG, message))
    return EXIT_FAIL


def _open_store(store_dir, create=False):
    """--store DIR ("" or None: the default directory) as a Store."""
    return stackprov.Store(store_dir or None, create=create)


def _open_bundle(arg, store_dir):
    """BUNDLE as a file, or sha256:HEX through the store (the CLI's open_bundle_arg)."""
    if arg.startswith("sha256:"):
        with _open_store(store_dir) as st:
            return st.open(arg)
    if os.path.isdir(arg):
        raise UsageError("'%s' is a directory, not a bundle file" % arg)
    return stackprov.Bundle.open(arg)


def _json_str(s):
    """A JSON string as cmd_bundle.cpp writes it: '"' and '\\' escaped, control bytes as \\u00XX."""
    return '"' + "".join("\\" + c if c in '"\\' else "\\u%04x" % ord(c) if ord(c) < 0x20 else c for c in s) + '"'


def _inspect(argv):
    p = Parser("bundle inspect")
    p.add_argument("bundle", metavar="BUNDLE")
    p.once("--store", metavar="DIR")
    p.flag("--json")
    a = p.parse_args(argv)
    b = _open_bundle(a.bundle, a.store)
    mods = b.modules
    out = sys.stdout
    if a.json:
        out.write('{"bundle":%s,"size":%d,"modules":[' % (_json_str(b.digest), b.size))
        out.write(",".join('{"id_kind":"%s","id":"%s","name":%s,"sha256_file":"%s","sha256_debug":"%s",'
                           '"ranges":%d,"return_pads":%d,"unwind_rows":%d,"debug_blob":%d}'
                           % (m.id_kind, m.id, _json_str(m.name), m.sha256_file, m.sha256_debug, m.ranges,
                              m.return_pads, m.unwind_rows, m.debug_blob) for m in mods))
        out.write("]}\n")
        return EXIT_OK
    out.write("bundle %s (%d bytes, %d module%s)\n" % (b.digest, b.size, len(mods), "" if len(mods) == 1 else "s"))
    for m in mods:
        out.write("module %s %s name %s\n" % (m.id_kind, m.id, m.name))
        out.write("  sha256_file  %s\n  sha256_debug %s\n" % (m.sha256_file, m.sha256_debug))
        out.write("  ranges %d return_pads %d unwind_rows %d debug_blob %d bytes\n"
                  % (m.ranges, m.return_pads, m.unwind_rows, m.debug_blob))
    return EXIT_OK


def _parse_addr(s):
    """hex with 0x, or decimal (the CLI's parse_addr), else None."""
    hexa = len(s) > 2 and s[0] == "0" and s[1] in "xX"
    digits = s[2:] if hexa else s
    if not digits or not all(c in ("0123456789abcdefABCDEF" if hexa else "0123456789") for c in digits):
        return None
    v = int(digits, 16 if hexa else 10)
    return v if v < 1 << 64 else None


def _query(argv, verb, answer):
    p = Parser("bundle " + verb)
    p.add_argument("bundle", metavar="BUNDLE")
    p.add_argument("addresses", metavar="ADDRESS", nargs="*")
    p.once("--store", metavar="DIR")
    p.once("--build-id", metavar="HEX")
    a = p.parse_intermixed_args(argv)
    b = _open_bundle(a.bundle, a.store)
    n = len(b.modules)
    if a.build_id:
        try:
            b.lookup(0, build_id=a.build_id)
        except stackprov.InvalidArgumentError:
            raise UsageError("--build-id '%s' is not a hex build-id" % a.build_id)
        except stackprov.NotFoundError:
            return _bundle_fail("no module with build-id %s in '%s'" % (a.build_id, a.bundle))
    elif n != 1:
        raise UsageError("'%s' holds %d modules: name one with --build-id" % (a.bundle, n))
    for s in a.addresses:
        addr = _parse_addr(s)
        if addr is None:
            sys.stdout.flush()
            raise UsageError("'%s' is not an address (hex with 0x, or decimal)" % s)
        sys.stdout.write(answer(b, addr, a.build_id or None))
    return EXIT_OK


def _lookup_text(b, addr, build_id):
    chain = b.lookup(addr, build_id=build_id)
    if not chain:
        return "??\n??:0:0\n\n"
    return "".join("%s\n%s:%d:%d\n" % (f.function or "??", f.file or "??", f.line or 0, f.column or 0) for f in chain) + "\n"


def _fsck(argv):
    p = Parser("bundle fsck")
    p.once("--store", metavar="DIR")
    a = p.parse_args(argv)
    with _open_store(a.store) as st:
        try:
            report, errors = st.fsck()
        except stackprov.Error as e:
            return _bundle_fail("fsck: " + e.message)
        for line in report.split("\n")[:-1]:  # whole lines only, as the CLI
            (sys.stderr if line.startswith("warning ") else sys.stdout).write(line + "\n")
        sys.stdout.write("%s: %s\n" % (st.dir, "ERRORS" if errors else "clean"))
    return EXIT_FAIL if errors else EXIT_OK


def _put(argv, promote):
    sub = "promote" if promote else "put"
    p = Parser("bundle " + sub)
    p.add_argument("items", metavar="sha256:HEX" if promote else "BUNDLEFILE", nargs="*")
    p.once("--store", metavar="DIR")
    a = p.parse_intermixed_args(argv)
    if not a.items:
        raise UsageError(sub + (" needs sha256:HEX" if promote else " needs a BUNDLEFILE"))
    for it in a.items:
        if promote and not is_sha256_digest(it):
            raise UsageError("invalid digest '%s' (expected sha256:<64 lowercase hex digits>)" % it)
        if not promote and os.path.isdir(it):
            raise UsageError("'%s' is a directory, not a bundle file" % it)
    with _open_store(a.store, create=not promote) as st:
        for it in a.items:
            try:
                if promote:
                    st.promote(it)
                    sys.stdout.write(it + "\n")
                else:
                    sys.stdout.write(st.put_file(it) + "\n")
            except stackprov.Error as e:
                return _bundle_fail("%s: %s" % (it, e.message))
    return EXIT_OK


def _build(argv):
    p = Parser("bundle build")
    p.add_argument("files", nargs="*")
    p.once("-o", "--output", "--out")
    p.once("--name")
    p.once("--store")
    p.once("--sign")
    p.once("--log")
    p.once("--log-key")
    p.add_argument("--debug-file-directory", action="append", default=[])
    p.flag("--include-debug")
    a = p.parse_intermixed_args(argv)
    if not a.files:
        raise UsageError("build needs a FILE")
    for f in a.files:
        if os.path.isdir(f):
            raise UsageError("'%s' is a directory, not an ELF file" % f)
    if a.output and os.path.isdir(a.output):
        raise UsageError("'%s' is a directory, not a file to write" % a.output)
    if a.name and len(a.files) != 1:
        raise UsageError("--name names one module: give one FILE")
    if a.sign is not None and not a.sign:
        raise UsageError("--sign needs a KEY")
    if a.sign and not a.log:
        raise UsageError("--sign KEY needs --log DIR (the transparency log)")
    if not a.sign and (a.log or a.log_key):
        raise UsageError("--log and --log-key go with --sign KEY")
    to_store = a.store is not None or bool(a.sign)
    b = stackprov.Bundle.build(a.files, names=[a.name] if a.name else None,
                               debug_dirs=a.debug_file_directory or None, include_debug=a.include_debug)
    if to_store:
        with _open_store(a.store, create=True) as st:
            st.put(b)
            if a.sign:
                try:
                    index = st.sign(b.digest, key=a.sign, log_dir=a.log, log_key=a.log_key or a.sign)
                except stackprov.Error as e:
                    return _bundle_fail("sign: " + e.message)
                sys.stderr.write("%s bundle: signed %s, log '%s' entry %d\n" % (PROG, b.digest, a.log, index))
    if a.output or not to_store:
        out = a.output or os.path.basename(a.files[0]) + ".sbundle"
        stackprov._stackprov._file_write(out, b.to_bytes(), 0o644)
    sys.stdout.write(b.digest + "\n")
    return EXIT_OK


def _export(argv):
    p = Parser("bundle export")
    p.add_argument("bundles", nargs="*")
    p.once("--format")
    p.once("-o", "--output", "--out")
    p.once("--build-id")
    p.once("--store")
    a = p.parse_intermixed_args(argv)
    if not a.bundles:
        raise UsageError("export needs a BUNDLE")
    if len(a.bundles) > 1:
        raise UsageError("unexpected argument '%s' (export takes one BUNDLE)" % a.bundles[1])
    if a.output and os.path.isdir(a.output):
        raise UsageError("'%s' is a directory, not a file to write" % a.output)
    if a.format not in ("symbol-index-json", "symbfile"):
        raise UsageError("export needs --format symbol-index-json or --format symbfile")
    b = _open_bundle(a.bundles[0], a.store)
    n = len(b.modules)
    if a.format == "symbfile" and not a.build_id and n != 1:
        raise UsageError("'%s' holds %d modules and a symbfile holds one: name it with --build-id" % (a.bundles[0], n))
    data = b.export(a.format, build_id=a.build_id or None)
    if a.output:
        stackprov._stackprov._file_write(a.output, data, 0o644)
    else:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    return EXIT_OK


def bundle_main(argv):
    if not argv or argv[0] in ("--help", "-h", "help") or "--help" in argv[1:] or "-h" in argv[1:]:
        (sys.stdout if argv else sys.stderr).write(_BUNDLE_HELP)
        return EXIT_OK if argv else EXIT_USAGE
    sub, rest = argv[0], argv[1:]
    subs = {"inspect": _inspect, "lookup": lambda v: _query(v, "lookup", _lookup_text),
            "unwind": lambda v: _query(v, "unwind", lambda b, x, i: b.unwind_row(x, build_id=i) + "\n"),
            "fsck": _fsck, "put": lambda v: _put(v, False), "promote": lambda v: _put(v, True), "build": _build,
            "export": _export}
    try:
        if sub not in subs:
            raise UsageError("unknown subcommand '%s' (build, inspect, lookup, unwind, export, put, promote or fsck)"
                             % sub)
        return subs[sub](rest)
    except UsageError as e:
        return usage("bundle", str(e))
    except stackprov.Error as e:
        sys.stdout.flush()
        return _bundle_fail(e.message)


# ---------------------------------------------------------------- trace-verify

def verify_parser():
    p = Parser("trace-verify", usage="python3 -m stackprov trace-verify --bundle sha256:HEX [--envelope ENVELOPE] "
               "[--artifact FILE]\n"
               "                              [--store DIR|URL]\n"
               "                              [--dsse --key PUB [--key PUB]... [--threshold N]]\n"
               "                              [--rekor --trusted-root FILE [--log DIR | --proof PROOF]]",
               description="Offline verification of a content-addressed file's provenance, as `stackprov "
               "trace-verify` (see its\n--help for what each check does).",
               epilog="PUB is a public key: a private key given as --key is refused (give KEY.pub).\n\n"
               "Exit status: 0 verified; 1 a check failed, or the store could not be read (one line\n"
               "names it); 2 usage error.")
    p.once("--bundle", metavar="sha256:HEX", help="the file's digest; ENVELOPE's in-toto statement must name it")
    p.once("--envelope", metavar="ENVELOPE", help="the DSSE envelope (default: from the store, see --store)")
    p.once("--artifact", metavar="FILE", help="also check that FILE hashes to that digest")
    p.once("--store", metavar="DIR|URL", help="a symbol-bundle store directory, or a trace store URL "
                   "(sqlite:PATH of an existing file, postgresql://...) whose bundle is copied into a temporary "
                   "bundle store: without --envelope, the blob, its dsse.json and (for --rekor without --log/--proof) "
                   "its tlog-proof come from there")
    p.flag("--dsse", help="verify the DSSE signatures: at least N (default 1, at most 256) distinct keys among the "
           "--key files")
    p.add_argument("--key", metavar="PUB", action="append", default=[], help="a public key (repeatable)")
    p.once("--threshold", metavar="N", help="with --dsse: how many distinct keys must have signed, 1 to 256")
    p.flag("--rekor", help="verify that ENVELOPE is an entry of a transparency log under a checkpoint signed by a log "
           "of --trusted-root FILE (required)")
    p.once("--trusted-root", metavar="FILE", help="with --rekor: the log's pinned trusted_root.json")
    p.once("--log", metavar="DIR", help="with --rekor: build the proof from the log's tiles")
    p.once("--proof", metavar="PROOF", help="with --rekor: a C2SP tlog-proof@v1 file")
    return p


def _verify_fail(check, message):
    sys.stderr.write("trace-verify: FAIL %s: %s\n" % (check, message))
    return EXIT_FAIL


def verify_main(a):
    if a.bundle is None:
        raise UsageError("--bundle sha256:HEX is required")
    digest = a.bundle.lower()
    if not is_sha256_digest(digest):
        raise UsageError("invalid --bundle value '%s' (expected sha256:<64 hex digits>)" % a.bundle)
    if not a.dsse and not a.rekor:
        raise UsageError("nothing to verify: give --dsse, --rekor or both")
    if a.dsse and not a.key:
        raise UsageError("--dsse needs at least one --key PUB")
    threshold = 1
    if a.threshold is not None:
        t = a.threshold
        threshold = int(t) if t and t.isascii() and t.isdigit() else 0
        if not 1 <= threshold <= 256:
            raise UsageError("--threshold '%s' is not an integer in 1..256" % t)
    from_store = a.envelope is None
    store_proof = a.rekor and a.log is None and a.proof is None
    if not from_store and store_proof:
        raise UsageError("--rekor needs --log DIR or --proof PROOF (or the store: no --envelope)")
    if a.rekor and a.trusted_root is None:
        raise UsageError("--rekor needs --trusted-root FILE (the log's pinned trusted_root.json: a log directory or a "
                         "store never vouches for itself)")
    artifact, envelope, proof = a.artifact or "", a.envelope or "", a.proof or ""
    store_dir, trace_url = a.store or "", ""
    if a.store is not None and is_store_url(a.store):
        trace_url = a.store
        if trace_url.startswith("sqlite:") and len(trace_url) > 7 and not os.path.exists(trace_url[7:]):
            try:
                os.stat(trace_url[7:])
            except OSError as e:
                raise UsageError("--store '%s': %s: %s" % (trace_url, trace_url[7:], os.strerror(e.errno)))
    elif a.store is not None and "://" in a.store:
        raise UsageError("--store '%s' is neither a directory nor a trace store URL (sqlite:PATH, postgresql://..., "
                         "postgres://...)" % a.store)
    elif a.store is None and is_store_url(os.environ.get("STACKPROV_STORE", "")):
        trace_url = os.environ["STACKPROV_STORE"]
    temp = None
    try:
        if from_store and trace_url:
            base = os.environ.get("TMPDIR") or "/tmp"
            try:
                temp = tempfile.mkdtemp(prefix="stackprov-verify-", dir=base)
            except OSError as e:
                return _verify_fail("store", "cannot create a temporary directory under '%s': %s" % (base, e.strerror))
            store_dir = os.path.join(temp, "bundles")
            try:
                with stackprov.TraceStore(trace_url) as ts, stackprov.Store(store_dir, create=True) as bs:
                    ts.export_bundle(a.bundle, bs)
            except stackprov.Error as e:
                return _verify_fail("store", e.message)
        if from_store:
            check = "store"
            try:
                with stackprov.Store(store_dir or None) as st:
                    if not artifact:
                        check = "artifact-digest"
                        artifact = st.blob_path(a.bundle)
                    check = "envelope"
                    envelope = st.sidecar_path(a.bundle, "dsse.json")
                    if store_proof:
                        check = "log-proof"
                        proof = st.sidecar_path(a.bundle, "tlog-proof")
            except stackprov.Error as e:
                return _verify_fail(check, e.message)
        try:
            report = stackprov.trace_verify(a.bundle, envelope=envelope, artifact=artifact or None, keys=list(a.key),
                                            threshold=threshold, dsse=a.dsse, log=a.rekor,
                                            trusted_root=a.trusted_root, log_dir=a.log, proof=proof or None)
        except stackprov.Error as e:
            sys.stderr.write("trace-verify: FAIL %s\n" % e.message)
            return EXIT_FAIL
        sys.stdout.write(report)
        sys.stdout.write("trace-verify: OK %s\n" % a.bundle)
        return EXIT_OK
    finally:
        if temp:
            shutil.rmtree(temp, ignore_errors=True)


# ------------------------------------------------------------- verify-sigstore

def sigstore_parser():
    p = Parser("verify-sigstore", usage="python3 -m stackprov verify-sigstore BUNDLE.json --trusted-root FILE\n"
               "                                 [--artifact FILE | --digest sha256:HEX] [--quiet]",
               description="Offline verification of a Sigstore bundle against a trusted root, as `stackprov "
               "verify-sigstore`\n(see its --help for what is and is not verified).",
               epilog="Exit status: 0 verified; 1 a check failed (one line: the check and the values);\n"
               "2 usage error.")
    p.add_argument("bundles", metavar="BUNDLE.json", nargs="*")
    p.once("--trusted-root", metavar="FILE", help="the trusted root JSON (required)")
    p.once("--artifact", metavar="FILE", help="the artifact whose digest the bundle must name")
    p.once("--digest", metavar="sha256:HEX", help="that digest, without the file")
    p.flag("--quiet", help="only the last line (no report)")
    return p


def sigstore_main(a):
    if len(a.bundles) != 1:
        raise UsageError("exactly one BUNDLE.json is required")
    if a.trusted_root is None:
        raise UsageError("--trusted-root FILE is required")
    if a.artifact is not None and a.digest is not None:
        raise UsageError("give --artifact or --digest, not both")
    for f in (a.bundles[0], a.trusted_root, a.artifact):
        if f is not None and os.path.isdir(f):
            raise UsageError("'%s' is a directory, not a file" % f)
    try:
        report = stackprov.sigstore_verify(a.bundles[0], a.trusted_root, artifact=a.artifact, artifact_digest=a.digest)
    except stackprov.Error as e:
        sys.stderr.write("verify-sigstore: FAIL %s: %s\n" % (a.bundles[0], e.message))
        return EXIT_FAIL
    if not a.quiet:
        sys.stdout.write(report)
    sys.stdout.write("verify-sigstore: OK %s\n" % a.bundles[0])
    return EXIT_OK


# ------------------------------------------------------------------ keygen, sign

KEYGEN_DOC = """usage: python3 -m stackprov keygen -o KEY [--pub PUB]

options:
  -o, --output KEY  the private key file to create (--out KEY: the same)
  --pub PUB         the public key file (default KEY.pub)
  -h, --help        this text

Generates an ECDSA P-256 signing key as `stackprov keygen` does (stackprov.key_generate): the
private key to KEY as SEC1 PEM with mode 0600 (KEY must not exist), the public key to PUB (default
KEY.pub) as SPKI PEM. Prints the key id: hex SHA-256 of the DER public key.

Exit status: 0 the key was written; 1 it could not be (KEY or PUB exists, a write failed);
2 usage error.
"""

SIGN_DOC = """usage: python3 -m stackprov sign --key KEY [-o ENVELOPE] [--subject-name NAME]
                                 [--predicate-type URI] [--predicate FILE.json] FILE

options:
  --key KEY              the private key (not KEY.pub)
  -o, --output ENVELOPE  write the envelope JSON to ENVELOPE (default: standard output; --out: the same)
  --subject-name NAME    the subject's name (default: FILE's base name)
  --predicate-type URI   the statement's predicateType
  --predicate FILE.json  the statement's predicate
  -h, --help             this text

Signs an in-toto Statement v1 whose subject is FILE's sha256 as a DSSE envelope, as `stackprov
sign` does (stackprov.dsse_sign_file: the same C function, RFC 6979 deterministic ECDSA P-256).

Exit status: 0 signed; 1 signing failed (the key cannot sign, FILE cannot be read, ENVELOPE cannot
be written); 2 usage error.
"""


def _doc_parser(cmd, doc):
    import argparse
    p = Parser(cmd, usage=argparse.SUPPRESS, description=doc, add_help=False)
    p.add_argument("-h", "--help", action="store_true")
    return p


def _keygen(a):
    if a.help:
        sys.stdout.write(KEYGEN_DOC)
        return EXIT_OK
    if a.args:
        raise UsageError("unexpected argument '%s'" % a.args[0])
    if a.output is None:
        raise UsageError("-o KEY (the private key file to create) is required")
    pub = a.pub if a.pub is not None else a.output + ".pub"
    for f in (a.output, pub):
        if os.path.isdir(f):
            raise UsageError("'%s' is a directory: give a key file to create" % f)
    try:
        kid = stackprov.key_generate(a.output, pub)
    except stackprov.Error as e:
        sys.stderr.write("%s keygen: %s\n" % (PROG, e.message))
        return EXIT_FAIL
    sys.stdout.write("private key: %s (mode 0600)\npublic key:  %s\nkey id:      %s\n" % (a.output, pub, kid))
    return EXIT_OK


def _sign(a):
    if a.help:
        sys.stdout.write(SIGN_DOC)
        return EXIT_OK
    if a.key is None:
        raise UsageError("--key KEY is required")
    if len(a.args) != 1:
        raise UsageError("exactly one FILE to sign is required")
    for f in (a.key, a.args[0], a.output):
        if f is not None and os.path.isdir(f):
            raise UsageError("'%s' is a directory, not a file" % f)
    predicate = None
    if a.predicate is not None:
        try:
            with open(a.predicate, "rb") as fh:
                predicate = fh.read().decode("utf-8", "surrogateescape")
        except OSError as e:
            raise UsageError("cannot read '%s': %s" % (a.predicate, e.strerror))
    try:
        env = stackprov.dsse_sign_file(a.key, a.args[0], subject_name=a.subject_name,
                                       predicate_type=a.predicate_type, predicate_json=predicate)
    except stackprov.Error as e:
        sys.stderr.write("%s sign: %s\n" % (PROG, e.message))
        return EXIT_FAIL
    if a.output is None or a.output == "-":
        sys.stdout.write(env)
        return EXIT_OK
    try:
        stackprov._stackprov._file_write(a.output, env.encode("utf-8", "surrogateescape"), 0o644)
    except stackprov.Error as e:
        sys.stderr.write("%s sign: %s\n" % (PROG, e.message))
        return EXIT_FAIL
    sys.stderr.write("signed %s (%s) -> %s\n" % (a.args[0], stackprov.digest_file(a.args[0]), a.output))
    return EXIT_OK


def keygen_parser():
    p = _doc_parser("keygen", KEYGEN_DOC)
    p.once("-o", "--output", "--out")
    p.once("--pub")
    p.add_argument("args", nargs="*")
    return p


def sign_parser():
    p = _doc_parser("sign", SIGN_DOC)
    p.once("--key")
    p.once("-o", "--output", "--out")
    p.once("--subject-name")
    p.once("--predicate-type")
    p.once("--predicate")
    p.add_argument("args", nargs="*")
    return p


def main(cmd, argv):
    if cmd == "keygen":
        return run(keygen_parser(), argv, _keygen)
    if cmd == "sign":
        return run(sign_parser(), argv, _sign)
    if cmd == "bundle":
        return bundle_main(argv)
    if cmd == "trace-verify":
        return run(verify_parser(), argv, verify_main)
    return run(sigstore_parser(), argv, sigstore_main)
