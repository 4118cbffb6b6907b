# SPDX-License-Identifier: Apache-2.0
"""python3 -m stackprov record | perf-import: `stackprov record` and `stackprov perf-import` through
stackprov.record() and stackprov.perf_import(), with the CLI's options, output and exit status.
perf-import's folded and SVG output are written by the CLI's own writers (bindings/cli/
profile_output.cpp, compiled into the extension); its JSON Lines here, field for field as
bindings/cli/cmd_perf.cpp writes them. pprof is not served (the CLI's pprof writer needs Protobuf)."""
import argparse
import math
import os
import signal
import sys

import stackprov
from . import _stackprov
from ._cli import EXIT_FAIL, EXIT_OK, Parser, fail, json_str, run, uint_in, usage, warn_lines

RECORD_DOC = """usage: python3 -m stackprov record [OPTIONS] -p PID
       python3 -m stackprov record [OPTIONS] [--] CMD [ARGS...]

Options:
  -F, --frequency HZ     samples per second per thread, 1 to 100000 (default 999)
      --stack-size BYTES user stack bytes copied per sample, a multiple of 8 from 8 to 65528 (default 8192)
      --duration SECONDS stop after this long (at least 0.001); default: when the target exits
  -o, --output FILE      the capture file (default stackprov.cap), renamed into place when done
  -p, --pid PID          record this running process instead of starting a command
      --with-kernel      take the samples with the eBPF kernel sampler (doc/kernel-stacks.md): the
                         kernel stack, the user registers and user stack per sample (root)
      --off-cpu          with --with-kernel: at each sched:sched_switch of the target (off-CPU)
      --python           also read each sampled thread's CPython 3.11 frames right after its sample
                         (a read during which they changed is kept as torn, without frames);
                         perf-import shows them among the native frames. Not with --with-kernel
  -h, --help             this text

Records as `stackprov record` does, through stackprov.record() (the same C function,
sprov_record): samples a running process (all its threads, including threads created later) or a
command it starts with perf_event_open -- cpu-clock at HZ, the user registers, BYTES of user stack
and the kernel call chain per sample, the module map and build-ids -- into a capture file that
`python3 -m stackprov perf-import` (or `stackprov perf-import`) reads. Stops after --duration, when
the target exits, or on SIGINT, SIGTERM or SIGHUP: the file is finished, a started command is sent
SIGTERM, a -p target keeps running.

On stderr: once sampling has started, what is recorded and how to stop it; at the end a summary
(samples, lost, threads, the file).

Exit status:
  0  the capture file was written (also when the started command exited non-zero)
  1  the recording failed (the command cannot be started, no such process, perf_event_open refused,
     the file cannot be written); no file is left behind
  2  usage: an unknown option, a missing or invalid value, neither or both of -p and a command
"""

IMPORT_DOC = """usage: python3 -m stackprov perf-import [OPTIONS] FILE

Options:
  -i, --input FILE       the file to read (or give it as the argument)
  -f, --format FORMAT    folded (default), svg, json or none
  -o, --output FILE      write there instead of stdout (under a temp name, renamed when done)
      --sysroot DIR      open module files under DIR
      --store DIR        a bundle store: modules whose file is missing or another build are
                         unwound and named from the bundle of their build-id (must exist)
      --max-frames N     user frames per sample, 1 to 65536 (default 256)
      --title TEXT       the flame graph's title
      --no-inline        folded and svg: only the physical functions, no inlined frames
  -q, --quiet            no summary or warnings on stderr, except what a truncated input lacks
  -h, --help             this text

Reads a perf.data file (perf record, with or without -g or --call-graph dwarf) or a capture file of
`record` and writes its samples' stacks as `stackprov perf-import` does, through
stackprov.perf_import() (the CLI's own reading of a profile: unwinding, naming, inlined functions,
kernel names). Formats:
  folded  one line per unique stack, `comm;root;...;leaf COUNT`; kernel frames end in _[k],
          functions inlined into a frame follow it, each ending in _[i] (--no-inline: none)
  svg     a self-contained flame graph of the folded stacks
  json    JSON Lines, one object per sample ("mode", frames leaf first with their method)
  none    only the summary on stderr
(pprof is not served here: use `stackprov perf-import -f pprof`.)
Python frames: a capture file of `record --python` holds each sample's CPython frames; they are
shown among the native frames, each before the _PyEval_EvalFrameDefault activation that runs it
(folded `qualname (file:line)`; JSON {"method":"runtime","runtime":"python","function","qualname",
"file","line"}), as `stackprov perf-import` shows them. A perf.data file holds no interpreter
memory: its Python programs appear as CPython's C frames (_PyEval_EvalFrameDefault, ...).

The summary on stderr has the CLI's counts without its timing and cache figures.

Exit status:
  0  the output was written (also for an input cut short: every complete record is read and one
     line on stderr says what is lost)
  1  the input cannot be read, the --store directory does not exist, or the output cannot be
     written; no output file is left
  2  usage: an unknown option, a missing or invalid value, no input or more than one
"""


def _parser(cmd, doc):
    p = Parser(cmd, usage=argparse.SUPPRESS, description=doc, add_help=False)
    p.add_argument("-h", "--help", action="store_true")
    return p


# ------------------------------------------------------------------ record

def record_main(argv):
    p = _parser("record", RECORD_DOC)
    p.once("-F", "--frequency")
    p.once("--stack-size")
    p.once("--duration")
    p.once("-o", "--output")
    p.once("-p", "--pid")
    p.add_argument("--with-kernel", action="store_true")
    p.add_argument("--off-cpu", action="store_true")
    p.add_argument("--python", action="store_true")
    p.add_argument("command", nargs="...")
    return run(p, argv, _record)


def _seconds_ms(text):
    try:
        secs = float(text) if text.strip() == text and text else math.nan
    except ValueError:
        secs = math.nan
    ms = round(secs * 1000.0) if math.isfinite(secs) else 0
    return ms if 1 <= ms <= 4294967295 else None


def _record(a):
    if a.help:
        sys.stdout.write(RECORD_DOC)
        return EXIT_OK
    freq, stack_size, ms, pid = 999, 8192, None, None
    if a.frequency is not None and (freq := uint_in(a.frequency, 1, 100000)) is None:
        return usage("record", "invalid value '%s' for -F/--frequency: expected an integer from 1 to 100000"
                     % a.frequency)
    if a.stack_size is not None and ((stack_size := uint_in(a.stack_size, 8, 65528)) is None or stack_size % 8):
        return usage("record", "invalid value '%s' for --stack-size: expected a multiple of 8 from 8 to 65528"
                     % a.stack_size)
    if a.duration is not None and (ms := _seconds_ms(a.duration)) is None:
        return usage("record", "invalid value '%s' for --duration: expected seconds from 0.001 to 4294967 (e.g. 2.5)"
                     % a.duration)
    if a.pid is not None and (pid := uint_in(a.pid, 1, 4194304)) is None:
        return usage("record", "invalid value '%s' for -p/--pid: expected an integer from 1 to 4194304" % a.pid)
    command = list(a.command)
    if command and command[0] == "--":
        command = command[1:]
    output = a.output if a.output is not None else "stackprov.cap"
    if not output:
        return usage("record", "-o/--output needs a file name")
    if pid is not None and command:
        return usage("record", "give either -p PID or a command, not both ('%s')" % command[0])
    if pid is None and not command:
        return usage("record", "give -p PID or a command to start (after --)")
    if a.off_cpu and not a.with_kernel:
        return usage("record", "--off-cpu needs --with-kernel")
    if a.python and a.with_kernel:
        return usage("record", "--python cannot be combined with --with-kernel (not supported yet)")
    what = "process %d (all its threads)" % pid if pid is not None else "'%s'" % command[0]
    until = "for %s s or until" % a.duration if ms else "until"
    how = ("at each sched:sched_switch (eBPF, off-CPU)" if a.off_cpu else
           "at %d Hz (eBPF, kernel + user)" % freq if a.with_kernel else "at %d Hz" % freq)
    start = ("python3 -m stackprov record: recording %s %s, %d-byte user stacks, into %s %s %s; Ctrl-C "
             "(SIGINT), SIGTERM or SIGHUP stops it and finishes the file\n"
             % (what, how, stack_size, output, until, "the process exits" if pid is not None else "the command exits"))
    started = []

    def progress(samples, lost):
        if not started:
            started.append(True)
            sys.stderr.write(start)
            sys.stderr.flush()

    try:
        r = stackprov.record(pid=pid, command=command or None, output=output,
                             duration=ms / 1000.0 if ms else None, frequency=freq, stack_size=stack_size,
                             with_kernel=a.with_kernel, off_cpu=a.off_cpu, python=a.python, progress=progress)
    except stackprov.Error as e:
        return fail("record", e.message.splitlines()[0] if e.message else str(e))
    status = ""
    if r.exit_status is not None and os.WIFEXITED(r.exit_status) and os.WEXITSTATUS(r.exit_status) != 0:
        status = "; the command exited with status %d" % os.WEXITSTATUS(r.exit_status)
    elif r.exit_status is not None and os.WIFSIGNALED(r.exit_status) and os.WTERMSIG(r.exit_status) != 15:
        status = "; the command was killed by signal %s" % signal.strsignal(os.WTERMSIG(r.exit_status))
    sys.stderr.write("python3 -m stackprov record: %d samples, %d lost, %d threads -> %s%s\n"
                     % (r.samples, r.lost, r.threads, output, status))
    if a.python:
        if r.python_processes == 0:
            sys.stderr.write("python3 -m stackprov record: python: no CPython 3.11 interpreter was found in the "
                             "target: no Python frames\n")
        else:
            sys.stderr.write("python3 -m stackprov record: python: %d samples with their Python frames, %d torn (the "
                             "frames changed while read: none kept), %d damaged, %d of threads without a Python thread "
                             "state\n" % (r.python_read, r.python_torn, r.python_damaged, r.python_no_thread))
    return EXIT_OK


# ------------------------------------------------------------------ perf-import

def import_main(argv):
    p = _parser("perf-import", IMPORT_DOC)
    p.once("-i", "--input")
    p.once("-f", "--format")
    p.once("-o", "--output")
    p.once("--sysroot")
    p.once("--store")
    p.once("--max-frames")
    p.once("--title")
    p.flag("--no-inline")
    p.flag("-q", "--quiet")
    p.add_argument("inputs", nargs="*")
    return run(p, argv, _import)


def sample_json(s, kernel_id):
    """One sample of `stackprov perf-import -f json` (bindings/cli/cmd_perf.cpp), byte for byte."""
    frames = []
    for f in s.frames:
        if f.inlined:
            continue
        if f.method == "runtime":  # a CPython frame of record --python
            frames.append('{"pc":"0x0","method":"runtime","runtime":"python","function":%s,"qualname":%s,"file":%s,'
                          '"line":%d}' % (json_str(f.function), json_str(f.qualname), json_str(f.file), f.line))
            continue
        o = '{"pc":"0x%x","function":%s,"linkage_name":%s' % (
            f.pc, json_str(f.function) if f.function is not None else "null",
            json_str(f.linkage_name) if f.function is not None and f.linkage_name else "null")
        if f.function is not None:
            o += ',"symbol_start":"0x%x"' % f.symbol_start
        o += ',"module":%s,"module_offset":"0x%x","method":"%s"' % (
            json_str(f.module) if f.module is not None else "null", f.module_offset, f.method)
        if f.kernel and kernel_id:
            o += ',"build_id":"%s"' % kernel_id
        frames.append(o + "}")
    return ('{"time":%d,"pid":%d,"tid":%d,"mode":"%s","comm":%s,"frames":[%s],"truncated":%s,"stop_reason":"%s"}\n'
            % (s.time, s.pid, s.tid, s.mode, json_str(s.comm), ",".join(frames), "true" if s.truncated else "false",
               s.stop_reason))


def _import(a):
    if a.help:
        sys.stdout.write(IMPORT_DOC)
        return EXIT_OK
    inputs = ([a.input] if a.input is not None else []) + list(a.inputs)
    if not inputs:
        return usage("perf-import", "no input file (give FILE or -i FILE)")
    if len(inputs) > 1:
        return usage("perf-import", "more than one input ('%s', '%s')" % (inputs[0], inputs[1]))
    path = inputs[0]
    if not path:
        return usage("perf-import", "the input file name is empty")
    fmt = a.format if a.format is not None else "folded"
    if fmt == "pprof":
        return usage("perf-import", "-f pprof is not served by python3 -m stackprov: use stackprov perf-import")
    if fmt not in ("folded", "svg", "json", "none"):
        return usage("perf-import", "invalid value '%s' for -f/--format: expected folded, svg, json or none" % fmt)
    max_frames = 256
    if a.max_frames is not None and (max_frames := uint_in(a.max_frames, 1, 65536)) is None:
        return usage("perf-import", "invalid value '%s' for --max-frames: expected an integer from 1 to 65536"
                     % a.max_frames)
    if a.sysroot is not None and not a.sysroot:
        return usage("perf-import", "--sysroot needs a directory")
    if a.store is not None and not a.store:
        return usage("perf-import", "--store needs a directory")
    if a.store is not None and not os.path.isdir(a.store):
        return fail("perf-import", "bundle store '%s' %s" % (a.store, "is not a directory" if os.path.exists(a.store)
                                                              else "does not exist"))
    title = a.title if a.title is not None else "Flame Graph"
    inlines = fmt in ("folded", "svg") and not a.no_inline
    try:
        prof = stackprov.perf_import(path, sysroot=a.sysroot, store=a.store, max_frames=max_frames, inlines=inlines,
                                     _log_stderr=not a.quiet)
    except stackprov.Error as e:
        return fail("perf-import", e.message)
    if not a.quiet:
        warn_lines(prof.warnings)
    if prof.truncation:
        sys.stderr.write("python3 -m stackprov perf-import: warning: %s\n" % prof.truncation)
    if fmt == "folded":
        text = prof.folded_text()
    elif fmt == "svg":
        text = prof.svg(title)
    elif fmt == "json":
        kid = prof.kernel_build_id
        text = "".join(sample_json(s, kid) for s in prof.samples)
    else:
        text = ""
    if a.output is not None and a.output != "-":
        if os.path.isdir(a.output):
            return fail("perf-import", "output '%s' is a directory" % a.output)
        try:
            _stackprov._file_write(a.output, text.encode("utf-8", "surrogateescape"), 0o644)
        except stackprov.Error as e:
            return fail("perf-import", e.message)
    elif fmt != "none":
        sys.stdout.write(text)
        sys.stdout.flush()
    if prof.kernel_frames and not a.quiet:
        sys.stderr.write("python3 -m stackprov perf-import: %s%s\n"
                         % ("" if prof.kernel_naming == "named" else "warning: ", prof.kernel_note))
    if not a.quiet or fmt == "none":
        m = prof.modes
        sys.stderr.write("python3 -m stackprov perf-import: %d samples (%d lost; user frames: %d unwound from copied "
                         "stacks (dwarf), %d from call chains (callchain), %d ip only; %d truncated, %d failed), %d "
                         "frames (%d kernel, %d of them named), %d folded stacks\n"
                         % (prof.sample_count, prof.lost,
                            m["dwarf"], m["callchain"], m["ip"], prof.truncated, prof.failed, prof.frames,
                            prof.kernel_frames, prof.kernel_named, len(prof.folded)))
    return EXIT_OK


def main(cmd, argv):
    return record_main(argv) if cmd == "record" else import_main(argv)
