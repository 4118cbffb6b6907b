# SPDX-License-Identifier: Apache-2.0
"""Wrong arguments reported with the public call: `stackprov.Symbolizer.symbolize(): argument path has
the wrong type: 123 (int), not str; expected stackprov.Symbolizer.symbolize(path: str, ...)`, never
pybind11's "incompatible function arguments" text with the extension's internal signature
(`symbolize(self: stackprov._stackprov.Symbolizer, ...)`)."""
import functools
import inspect
import re

from . import _stackprov

_INTERNAL = "stackprov._stackprov."
PATH = "str, bytes or os.PathLike"
# One overload of pybind11's "The following argument types are supported:" list: "1. (self: T, a: int) -> R"
# for a function, "1. stackprov._stackprov.T(a: int)" for a constructor.
_OVERLOAD = re.compile(r"^\s*\d+\. (?:[\w.]+)?\((.*)\)(?: -> .*)?$", re.M)


def _split(text):
    """`text` split at the commas outside brackets ("a: Dict[str, int], b: int" -> two parts)."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        out.append(text[start:].strip())
    return out


def _overloads(message):
    """The parameter lists of the overloads a pybind11 argument error lists: per overload
    [(name, type, default, kind)]: default as written (None: required), kind "pos", "kw" (after
    `*`), "varpos" or "varkw"."""
    out = []
    for m in _OVERLOAD.finditer(message):
        params, kind = [], "pos"
        for p in _split(m.group(1)):
            if p == "*":
                kind = "kw"
            elif p == "/":
                continue
            elif p.startswith("**"):
                params.append((p[2:], "", "", "varkw"))
            elif p.startswith("*"):
                params.append((p[1:], "", "", "varpos"))
                kind = "kw"
            else:
                name, _, t = p.partition(": ")
                t, eq, default = t.partition(" = ")
                params.append((name, t, default if eq else None, kind))
        out.append(params)
    return out


def _public(text):
    return text.replace(_INTERNAL, "stackprov.")


def _show(value):
    """`value` as a message names it: its repr (shortened) and its type."""
    r = repr(value)
    if len(r) > 80:
        r = r[:77] + "..."
    return "%s (%s)" % (_public(r), type(value).__name__)


def _is_sequence(value):
    # pybind11's list caster takes what PySequence_Check accepts, except str and bytes
    return hasattr(type(value), "__getitem__") and hasattr(type(value), "__len__") and \
        not isinstance(value, (str, bytes, bytearray, dict))


def _fits(value, t):
    """Whether pybind11 converts `value` to the parameter type `t` as its signatures spell it
    (int, str, List[int], Optional[str], stackprov._stackprov.Bundle, ...). True for a type it
    does not know, and for an integer of a C type's range it cannot see (uint32_t is "int")."""
    m = re.match(r"^(\w+)\[(.*)\]$", t)
    if m:
        outer, inner = m.group(1), _split(m.group(2))
        if outer == "Optional":
            return value is None or _fits(value, inner[0])
        if outer in ("List", "Set"):
            return _is_sequence(value) and all(_fits(v, inner[0]) for v in value)
        if outer == "Tuple":
            return _is_sequence(value) and len(value) == len(inner) and all(map(_fits, value, inner))
        if outer == "Dict":
            return isinstance(value, dict) and all(_fits(k, inner[0]) and _fits(v, inner[1])
                                                   for k, v in value.items())
        if outer == "Callable":
            return callable(value)
        return True
    if t == "str":
        return isinstance(value, (str, bytes, bytearray))
    if t == "bytes":
        return isinstance(value, bytes)
    if t == "int":
        # an int, or what has __index__ or __int__ (a Decimal), never a float
        return not isinstance(value, float) and (isinstance(value, int) or hasattr(type(value), "__index__") or
                                                 hasattr(type(value), "__int__"))
    if t == "float":
        return hasattr(type(value), "__float__") or hasattr(type(value), "__index__")
    if t == "bool":
        # without noconvert pybind11 takes None and whatever has __bool__ (numbers too)
        return value is None or isinstance(value, (bool, int, float)) or hasattr(type(value), "__bool__")
    if t.startswith(_INTERNAL):
        cls = getattr(_stackprov, t[len(_INTERNAL):], None)
        return cls is None or isinstance(value, cls)
    return True


def _bind(params, args, kwargs):
    """`args` and `kwargs` bound to one overload's parameters: ({name: value}, problems)."""
    problems, bound = [], {}
    positional = [p for p in params if p[3] == "pos"]
    named = {p[0]: p for p in params if p[3] in ("pos", "kw")}
    varpos = any(p[3] == "varpos" for p in params)
    varkw = any(p[3] == "varkw" for p in params)
    for i, v in enumerate(args):
        if i < len(positional):
            bound[positional[i][0]] = v
        elif not varpos:
            problems.append("unexpected positional argument %s" % _show(v))
    for k, v in kwargs.items():
        if k in bound:
            problems.append("argument %s given twice" % k)
        elif k in named:
            bound[k] = v
        elif not varkw:
            problems.append("unexpected keyword argument %s=%s" % (k, _show(v)))
    problems += ["missing argument %s" % n for n, p in named.items() if n not in bound and p[2] is None]
    return bound, problems


def _type_problems(bound, types):
    """The arguments of `bound` ({name: value}) whose value does not fit the type `types` gives their name."""
    return ["argument %s has the wrong type: %s, not %s" % (n, _show(v), _public(types[n]))
            for n, v in bound.items() if n in types and not _fits(v, types[n])]


def _signature(qualname, params):
    """The public signature of one overload: without self, the public module's type names."""
    shown = []
    for name, t, default, kind in params:
        if name == "self" and not shown:
            continue
        if kind == "kw" and "*" not in shown and not any(s.startswith("*") for s in shown):
            shown.append("*")
        if kind == "varpos":
            shown.append("*" + name)
        elif kind == "varkw":
            shown.append("**" + name)
        else:
            text = "%s: %s" % (name, _public(t)) if t else name
            shown.append(text + (" = " + default if default is not None else ""))
    return "%s(%s)" % (qualname, ", ".join(shown))


def _given(bound):
    return ", ".join("%s=%s" % (k, _show(v)) for k, v in bound.items())


def _range_problems(bound, types):
    """With no argument of a wrong type, pybind11 refused an integer its C type cannot hold (a
    uint32_t's signature says "int" too): the one integer argument, when there is one."""
    ints = [(n, v) for n, v in bound.items() if types.get(n) in ("int", "Optional[int]") and isinstance(v, int)
            and not isinstance(v, bool)]
    return ["argument %s is out of range: %s" % (ints[0][0], _show(ints[0][1]))] if len(ints) == 1 else []


def _error(qualname, problems, expected, overloads, given):
    msg = "%s(): %s; expected %s" % (qualname, "; ".join(problems) if problems else
                                     "an argument has the wrong type or an integer is out of range (given: %s)" % given,
                                     expected)
    err = TypeError(msg)
    err._stackprov_overloads = overloads  # what a public function calling this one checks its own arguments with
    return err


def _pybind_error(fn_name, e):
    """Whether `e` is pybind11's argument error of the call of `fn_name` itself."""
    s = str(e)
    return s.startswith(fn_name + "(): incompatible function arguments") or \
        (fn_name == "__init__" and s.startswith("__init__(): incompatible constructor arguments"))


def public_method(fn, qualname):
    """`fn` (an extension function or method) raising, for arguments it cannot convert, a
    TypeError naming `qualname` (stackprov.Store.put), the arguments at fault and their values,
    and the public signature of each overload."""
    name = fn.__name__

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            # Without keywords no dict: pybind11 looks each parameter up by a C string in a dict it
            # is given, even an empty one (+0.3 us a Bundle.lookup, a third of the call).
            return fn(*args, **kwargs) if kwargs else fn(*args)
        except TypeError as e:
            if not _pybind_error(name, e):
                raise
            overloads = _overloads(str(e))
            if name == "__init__":
                args = args[1:]  # pybind11 lists a constructor's parameters without self
            found = []
            for params in overloads:
                bound, wrong = _bind(params, args, kwargs)
                types = {p[0]: p[1] for p in params}
                wrong = _type_problems(bound, types) + wrong
                found.append((wrong or _range_problems(bound, types), bound, types))
            # The overload the call comes closest to; every one as close when they tie.
            fewest = min((len(f[0]) for f in found), default=0)
            problems, given = [], {}
            for wrong, bound, types in found:
                if len(wrong) == fewest:
                    problems += [p for p in wrong if p not in problems]
                    # the object the method was called on is not at fault
                    given = given or {k: v for k, v in bound.items() if k != "self" or not _fits(v, types[k])}
            expected = " or ".join(_signature(qualname, params) for params in overloads)
            raise _error(qualname, problems, expected, overloads, _given(given)) from None

    wrapper.__qualname__ = qualname[len("stackprov."):]
    wrapper.__module__ = "stackprov"
    if fn.__doc__:
        wrapper.__doc__ = _public(fn.__doc__)
    return wrapper


def convert(name, value, conversion, expected):
    """conversion(value) (list, os.fspath) for a public function's argument `name`; its TypeError
    as the function's wrapper reports it: argument `name` has the wrong type: `value`, not `expected`."""
    try:
        return conversion(value)
    except TypeError:
        err = TypeError("argument %s has the wrong type: %s, not %s" % (name, _show(value), expected))
        err._stackprov_problems = [str(err)]
        raise err from None


def public_function(fn):
    """`fn` (a Python function of the package that calls the extension) raising, for an argument
    the extension cannot convert, a TypeError naming stackprov.<fn>, the arguments at fault (those
    of its own parameters whose name and value the extension's parameter of that name refuses)
    and its own signature; a public function calling another is reported as the one the caller
    called."""
    qualname = "stackprov." + fn.__name__
    sig = inspect.signature(fn)
    expected = "%s%s" % (qualname, sig)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TypeError as e:
            overloads = getattr(e, "_stackprov_overloads", None)
            converted = getattr(e, "_stackprov_problems", None)  # from convert(): no extension call
            if overloads is None and converted is None and "incompatible function arguments" not in str(e):
                raise  # not an argument the extension refused (Python's own arity errors among them)
            bound = sig.bind_partial(*args, **kwargs).arguments
            problems = converted
            if problems is None:
                if overloads is None:
                    overloads = _overloads(str(e))
                types = {}
                for params in overloads:
                    for p in params:
                        types.setdefault(p[0], p[1])
                problems = _type_problems(bound, types) or _range_problems(bound, types)
            err = _error(qualname, problems, expected, overloads, _given(bound))
            err._stackprov_problems = converted
            raise err from None
    return wrapper


def _no_constructor(qualname):
    # pybind11's own "stackprov._stackprov.Frame: No constructor defined!" names the type by its
    # tp_name, which keeps the extension's module; the package makes these objects only from C++.
    def __init__(self, *args, **kwargs):
        raise TypeError("%s has no constructor: the package's calls return %s objects" %
                        (qualname, qualname[len("stackprov."):]))
    return __init__


def publish(namespace, names):
    """Every public class of `names` in `namespace` shown as stackprov.<name> (tracebacks, reprs),
    its constructor and public methods (static ones too) wrapped by public_method, or a
    constructor that says it has none; every extension function wrapped by public_method, every
    Python function by public_function."""
    for n in names:
        obj = namespace.get(n)
        if inspect.isclass(obj) and obj.__module__ == _stackprov.__name__:
            obj.__module__ = "stackprov"
            if "__init__" not in vars(obj) or type(vars(obj)["__init__"]).__name__ != "instancemethod":
                obj.__init__ = _no_constructor("stackprov." + n)
            for attr, v in list(vars(obj).items()):
                # The dunders an argument reaches through the language: T(...) and `x in store`
                # (__len__, __iter__, __repr__, __enter__ take none, __exit__ any).
                if attr.startswith("_") and attr not in ("__init__", "__contains__"):
                    continue
                qual = "stackprov.%s" % n if attr == "__init__" else "stackprov.%s.%s" % (n, attr)
                if isinstance(v, staticmethod) and inspect.isbuiltin(v.__func__):
                    setattr(obj, attr, staticmethod(public_method(v.__func__, qual)))
                elif type(v).__name__ == "instancemethod":  # pybind11's methods (PyInstanceMethod)
                    setattr(obj, attr, public_method(v.__func__, qual))
        elif inspect.isbuiltin(obj):
            namespace[n] = public_method(obj, "stackprov." + n)
        elif inspect.isfunction(obj) and obj.__module__ == "stackprov":
            namespace[n] = public_function(obj)
