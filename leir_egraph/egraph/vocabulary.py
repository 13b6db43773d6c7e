"""The relations a rule may read: the shared vocabulary plus the fact providers of rule files.

The **shared vocabulary** is what several strategies use: the nine preconditions and the extra
soundness guards of ``guards.py``, the parameters of ``parameters.py`` (Root, FreshIndex,
FreshTensor, ScopeChange), the value-range guards of ``extensions/`` and the egglog preludes
``rules/prelude/*.egg``. docs/RULES.md §5 lists every shared relation.

A **fact provider** belongs to one strategy (or one family of strategies) and sits beside its
rule files. A rule file names its providers, relative to its own directory::

    providers = ["online.py", "online.egg"]

* a ``.py`` file or a package directory (``__init__.py``) is imported from that path and may
  define ``GUARD_EXTENSIONS`` (a sequence of :class:`GuardExtension`: relations with their CoT
  sentences, the function making their facts (:class:`Fact`, by calling the declared
  :class:`Relation`) from a :class:`LoadedProgram`, egglog rules of
  the ``analysis`` ruleset, or a whole new guard with its refusal sentence) and
  ``PARAMETER_SETS`` (a sequence of :class:`ParameterSet`);
* a ``.egg`` file holds egglog declarations and ``analysis`` rules, loaded once into every
  engine that compiles a strategy naming it.

A provider is a pure function of the program. Because it is loaded from the rule file's own
directory, a user's ``--rules DIR`` brings its facts with it: no edit of ``leir_egraph/``.

A provider is outside code, so it is bounded: its import, and each call computing its facts,
must finish within ``LEIR_PROVIDER_TIMEOUT`` seconds (default :data:`PROVIDER_TIMEOUT`), or
it is a :class:`ProviderError` naming its file. A sampler worker also bounds it by what is left
of the program's ``--program-timeout`` (:func:`provider_deadline`), so the failure row names the
provider rather than only the program.

    >>> vocabulary().guards["dependency"].relations[0].name
    'Independent'
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import sys
import time
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Iterable

from . import extensions
from .facts import Chain, Fact, FactError, Relation, later, located
from .guards import Guard, GuardExtension, base_guards
from .loaded import LoadedProgram
from .parameters import CORE_PARAMETERS, ParameterSet

__all__ = ["Fact", "FactError", "Guard", "GuardExtension", "LoadedProgram", "PROVIDER_TIMEOUT",
           "ParameterSet", "Provider", "ProviderError", "Relation", "Vocabulary", "later",
           "load_provider", "provider_deadline", "provider_seconds", "vocabulary"]


PROVIDER_TIMEOUT = 60.0   # seconds for a provider's import, and for each of its fact calls
_deadline: list[float | None] = [None]   # a monotonic time no provider call may pass


def provider_seconds() -> float:
    """The time a provider call may take now: ``LEIR_PROVIDER_TIMEOUT`` (or the default),
    less than that when :func:`provider_deadline` is nearer."""
    return _provider_limit()[0]


def _provider_limit() -> tuple[float, str]:
    """:func:`provider_seconds`, and what sets it, for the message of an overrun."""
    text = os.environ.get("LEIR_PROVIDER_TIMEOUT", "")
    try:
        seconds = float(text) if text else PROVIDER_TIMEOUT
    except ValueError:
        seconds = PROVIDER_TIMEOUT
    if not seconds > 0 or seconds != seconds:
        seconds = PROVIDER_TIMEOUT
    why = f"within {seconds:g} s (LEIR_PROVIDER_TIMEOUT)"
    if _deadline[0] is not None and _deadline[0] - time.monotonic() < seconds:
        seconds = _deadline[0] - time.monotonic()
        why = "before the program's time ran out (--program-timeout)"
    return max(seconds, 1e-3), why


def provider_deadline(until: float | None) -> None:
    """No provider call of this process runs past the monotonic time ``until`` (None: no
    such bound); a sampler worker sets it at the start of each program."""
    _deadline[0] = until


def _bounded(where: Path | str, what: str, call):
    """``call()`` within :func:`provider_seconds`, else a ProviderError naming ``where`` and the
    provider's line it was stopped at."""
    from ..outside import OutsideInputError, bounded
    seconds, why = _provider_limit()
    try:
        return bounded(call, seconds, f"{what} did not finish {why}")
    except OutsideInputError as err:
        at = provider_frame(err.__cause__) if err.__cause__ is not None else None
        raise ProviderError(where, at[1] if at else None, str(err)) from None


def _bounded_facts(where: str, produce):
    """A provider's fact function, bounded (the facts are computed in full inside the
    bound: a lazy generator cannot escape it)."""
    if produce is None:
        return None

    def facts(loaded):
        return _bounded(where, "computing the provider's facts",
                        lambda: checked_facts(produce, loaded))
    if getattr(produce, "makes", None) is not None:
        facts.makes = produce.makes
    return facts


def checked_facts(produce, loaded) -> list[Fact]:
    """Every fact ``produce(loaded)`` makes, each checked to be a :class:`Fact`: anything else
    is a :class:`FactError` at the provider's line that yielded it (the function's first line
    when it returns a list)."""
    produced = produce(loaded)
    out = []
    for fact in produced:
        if type(fact) is not Fact:
            raise FactError(*located(produce, produced),
                            f"a fact provider yields facts made by calling a declared "
                            f"Relation, got {type(fact).__name__} {str(fact)[:40]!r}")
        out.append(fact)
    return out


def _with_bounded_facts(where: str, extensions, parameters):
    """The provider's guard extensions and parameter sets with every fact function bounded."""
    out_ext = []
    for ext in extensions:
        new_guard = ext.new_guard
        if new_guard is not None and new_guard.facts is not None:
            new_guard = dataclasses.replace(new_guard,
                                            facts=_bounded_facts(where, new_guard.facts))
        out_ext.append(dataclasses.replace(ext, facts=_bounded_facts(where, ext.facts),
                                           new_guard=new_guard))
    out_par = [dataclasses.replace(p, facts=_bounded_facts(where, p.facts)) for p in parameters]
    return tuple(out_ext), tuple(out_par)


class ProviderError(ValueError):
    """A fact provider that cannot be loaded, located as ``file:line``."""

    def __init__(self, path: Path | str, line: int | None, message: str):
        self.path, self.line, self.message = str(path), line, message
        super().__init__(f"{path}:{line if line is not None else 1}: {message}")


@dataclass(frozen=True)
class Provider:
    """A loaded fact provider: its guard extensions, parameter sets and egglog text."""
    path: str
    guard_extensions: tuple[GuardExtension, ...] = ()
    parameter_sets: tuple[ParameterSet, ...] = ()
    egglog: str = ""
    module: object = field(default=None, compare=False, hash=False, repr=False)

    @property
    def relations(self) -> tuple[Relation, ...]:
        """Every guard and parameter relation the provider defines (new guards' included)."""
        return tuple([r for e in self.guard_extensions for r in e.relations]
                     + [r for e in self.guard_extensions if e.new_guard
                        for r in e.new_guard.relations]
                     + [r for p in self.parameter_sets for r in p.relations])


def provider_path(rule_file: Path, name: str) -> Path:
    """Where a provider named in a rule file lives (relative to the rule file's directory)."""
    return (rule_file.parent / name).resolve()


PROVIDER_MODULE_PREFIX = "_leir_provider_"   # the module names providers are imported under


def provider_frame(err: BaseException) -> tuple[str, int] | None:
    """``(file, line)`` of the innermost frame of a fact provider's code in ``err``'s
    traceback (a provider module, or a module of a provider package), or None."""
    found, tb = None, err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_globals.get("__name__", "").startswith(PROVIDER_MODULE_PREFIX):
            found = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


def provider_failure(err: BaseException) -> ProviderError | None:
    """``err`` located in the fact provider that raised it, as a one-line
    :class:`ProviderError` (``provider.py:LINE: ...``); None when no provider code raised it."""
    at = provider_frame(err)
    if at is None:
        return None
    return ProviderError(at[0], at[1], f"the provider raised {type(err).__name__} while "
                                       f"computing facts: {err}")


@lru_cache(maxsize=None)
def load_provider(path: str) -> Provider:
    """Load a provider once per resolved path (``.py`` file, package directory, ``.egg``)."""
    where = Path(path)
    if where.suffix == ".egg":
        try:
            return Provider(path, egglog=where.read_text())
        except (OSError, UnicodeDecodeError) as err:
            raise ProviderError(where, None, f"cannot read the egglog provider: {err}") from None
    init = where / "__init__.py" if where.is_dir() else where
    if where.suffix != ".py" and not where.is_dir():
        raise ProviderError(where, None, "a provider is a .py file, a package directory or "
                                         "a .egg file")
    if not init.is_file():
        raise ProviderError(init, None, "provider not found")
    digest = hashlib.sha1(str(where).encode()).hexdigest()[:10]
    name = f"{PROVIDER_MODULE_PREFIX}{digest}_{where.stem}"
    spec = importlib.util.spec_from_file_location(
        name, init, submodule_search_locations=[str(where)] if where.is_dir() else None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module   # dataclasses and relative imports look the module up here
    try:
        _bounded(init, "importing the provider", lambda: spec.loader.exec_module(module))
    except ProviderError:
        sys.modules.pop(name, None)
        raise
    except SystemExit as stop:
        sys.modules.pop(name, None)
        raise ProviderError(init, None, f"importing the provider called sys.exit("
                                        f"{stop.code!r})") from None
    except Exception as err:  # noqa: BLE001 -- a user's provider: located, one line
        sys.modules.pop(name, None)
        what, at = f"{type(err).__name__}: {err}", provider_frame(err)
        if isinstance(err, SyntaxError) and err.filename:   # raised before any of its frames
            what, at = f"{type(err).__name__}: {err.msg}", (err.filename, err.lineno)
        raise ProviderError(at[0] if at else init, at[1] if at else None,
                            f"the provider failed to load: {what}") from None
    extensions = tuple(getattr(module, "GUARD_EXTENSIONS", ()))
    parameters = tuple(getattr(module, "PARAMETER_SETS", ()))
    for item in extensions:
        if not isinstance(item, GuardExtension):
            raise ProviderError(init, None, "GUARD_EXTENSIONS must hold GuardExtension values, "
                                            f"got {type(item).__name__}")
    for item in parameters:
        if not isinstance(item, ParameterSet):
            raise ProviderError(init, None, "PARAMETER_SETS must hold ParameterSet values, "
                                            f"got {type(item).__name__}")
    if not extensions and not parameters:
        raise ProviderError(init, None, "the provider defines neither GUARD_EXTENSIONS nor "
                                        "PARAMETER_SETS")
    extensions, parameters = _with_bounded_facts(str(init), extensions, parameters)
    return Provider(str(where), extensions, parameters, module=module)


@dataclass(frozen=True)
class Vocabulary:
    """Guards (with their relations), parameter sets and provider egglog text of one strategy
    set: the shared vocabulary merged with the providers its rule files name."""
    guards: dict[str, Guard]
    parameter_sets: tuple[ParameterSet, ...]
    egglog: tuple[str, ...] = ()

    def __hash__(self):
        return id(self)

    @cached_property
    def relations(self) -> dict[str, tuple[Guard, Relation]]:
        """Guard relation name -> (its guard, the relation)."""
        return {r.name: (g, r) for g in self.guards.values() for r in g.relations}

    @cached_property
    def parameters(self) -> dict[str, Relation]:
        """Parameter relation name -> relation."""
        return {r.name: r for p in self.parameter_sets for r in p.relations}

    def holds(self, relation: str, args: list[str]) -> str:
        """The CoT sentence of a guard or parameter fact with rendered arguments."""
        if relation in self.relations:
            guard, rel = self.relations[relation]
            return f"{guard.name.replace('_', ' ')}: " + rel.holds.format(*args)
        return self.parameters[relation].holds.format(*args)

    @cached_property
    def analysis_rules(self) -> str:
        """Egglog text of the guards' analysis rules and the providers' egglog files."""
        return "\n".join([g.rules for g in self.guards.values() if g.rules] + list(self.egglog))

    def declarations(self) -> str:
        """Relation declarations of every guard and parameter (the providers' egglog files
        declare their own)."""
        lines = [g.declarations() for g in self.guards.values()]
        lines += [r.declaration() for r in self.parameters.values()]
        return "\n".join(line for line in lines if line)

    @cached_property
    def deferred(self) -> dict[str, Relation]:
        """The relations whose last column is deferred (``Relation.deferred``), by name."""
        every = [r for g in self.guards.values() for r in g.relations]
        every += [r for p in self.parameter_sets for r in p.relations]
        return {r.name: r for r in every if r.deferred}

    @cached_property
    def producers(self) -> list[tuple]:
        """``(produce, its guard's or parameter set's relations by name)`` of every producer."""
        out = [(part, {r.name: r for r in g.relations
                       if getattr(part, "makes", None) is None or r.name in part.makes})
               for g in self.guards.values() if g.facts
               for part in getattr(g.facts, "parts", (g.facts,))]
        out += [(p.facts, {r.name: r for r in p.relations}) for p in self.parameter_sets]
        return out

    def facts(self, loaded: LoadedProgram, wanted: set[str], producers=None) -> Iterable[Fact]:
        """The facts of every producer with a relation in ``wanted``, restricted to those
        (``producers``: only those of these :attr:`producers` entries). Every fact such a
        producer makes is checked, wanted or not: one of a relation its guard or parameter set
        does not declare, or anything that is no :class:`Fact`, is a :class:`FactError` located
        where it was made."""
        for produce, declared in self.producers if producers is None else producers:
            if not any(name in wanted for name in declared):
                continue
            for fact in checked_facts(produce, loaded):
                relation = declared.get(fact.relation.name)
                if relation is not fact.relation and relation != fact.relation:
                    raise FactError(fact.path, fact.line,
                                    f"relation '{fact.relation.name}' is not declared by the "
                                    "guard or parameter set whose facts this provider makes")
                if fact.relation.name in wanted:
                    yield fact


def merge(guards: dict[str, Guard], extensions: Iterable[GuardExtension], where: str = ""
          ) -> dict[str, Guard]:
    """Guards with the extensions' relations, fact producers, rules and new guards merged in,
    per guard name (in order, so an extension may extend a guard an earlier one added)."""
    out = dict(guards)
    for ext in extensions:
        if ext.new_guard is not None:
            if ext.new_guard.name in out:
                raise ProviderError(where, None, f"guard '{ext.new_guard.name}' is defined twice")
            out[ext.new_guard.name] = ext.new_guard
        if ext.guard not in out:
            raise ProviderError(where, None, f"extension for unknown guard '{ext.guard}'")
        base = out[ext.guard]
        producers = tuple(f for f in (base.facts, ext.facts) if f is not None)
        out[ext.guard] = Guard(
            base.name, base.doc, base.refusal, base.relations + ext.relations,
            _chain(producers) if producers else None,
            "\n".join(r for r in (base.rules, ext.rules) if r), base.structural)
    return out


def _chain(producers):
    return producers[0] if len(producers) == 1 else Chain(producers)


@lru_cache(maxsize=64)
def vocabulary(providers: tuple[str, ...] = ()) -> Vocabulary:
    """The shared vocabulary plus the given providers (resolved paths, loaded once each).
    Raises :class:`ProviderError` when a provider defines a relation the shared vocabulary or
    another provider already defines."""
    guards = merge(base_guards(), extensions.guard_extensions())
    parameter_sets = (CORE_PARAMETERS, *extensions.parameter_sets())
    seen = {r.name for g in guards.values() for r in g.relations}
    seen |= {r.name for p in parameter_sets for r in p.relations}
    egglog = []
    for path in sorted(set(providers)):
        provider = load_provider(path)
        for relation in provider.relations:
            if relation.name in seen:
                raise ProviderError(path, None, f"relation '{relation.name}' is already defined "
                                                "(by the shared vocabulary or another provider)")
            seen.add(relation.name)
        guards = merge(guards, provider.guard_extensions, path)
        parameter_sets += provider.parameter_sets
        if provider.egglog:
            egglog.append(provider.egglog)
    return Vocabulary(guards, parameter_sets, tuple(egglog))


def vocabulary_of(strategies) -> Vocabulary:
    """The vocabulary of a strategy set: shared relations plus all their providers."""
    return vocabulary(tuple(sorted({p for s in strategies for p in s.providers})))
