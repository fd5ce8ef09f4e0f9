"""Webhook `matchConditions`: CEL expressions compiled once (cel-python), evaluated per admission.

Semantics are kube-apiserver's (admissionregistration.k8s.io/v1, GA in 1.30): variables `object` (null for
DELETE), `oldObject` (null for CREATE), `request` (the AdmissionRequest fields) and `authorizer`; any
condition false skips the webhook, else any evaluation error is the failurePolicy's to decide, else the
webhook is called. cel-python has no type checker, so the create-time validation catches syntax errors and
undeclared variables/functions; a non-bool result is an evaluation error.
"""

from __future__ import annotations

import functools
import json
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import celpy
import lark
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, base_functions

Obj = dict[str, Any]
Causes = list[tuple[str, str]]

MAX_MATCH_CONDITIONS = 64
VARIABLES = frozenset({"object", "oldObject", "request", "authorizer"})
UNSUPPORTED_VARIABLES = frozenset({"authorizer"})
# Macros that bind their first argument as a loop variable; `has` is a macro on a field selection.
BINDING_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
GLOBAL_FUNCTIONS = frozenset(name for name in base_functions if name.isidentifier()) | {"has", "dyn"}
TYPE_NAMES = frozenset(
    {"bool", "bytes", "double", "int", "list", "map", "null_type", "string", "type", "uint"}
)

_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_ENVIRONMENT = celpy.Environment()


class CompileError(ValueError):
    """The expression does not compile (the configuration is Invalid, 422)."""


Path = tuple[str, ...]


@dataclass(frozen=True)
class Program:
    expression: str
    runner: celpy.Runner
    # The request variables it reads, each with the field paths it reads (None: the whole value): only
    # those parts are converted to CEL values, and they key the memo of results (CEL is pure).
    reads: Mapping[str, frozenset[Path] | None]

    @property
    def variables(self) -> frozenset[str]:
        return frozenset(self.reads)


@dataclass(frozen=True)
class MatchCondition:
    name: str
    program: Program | None
    compile_error: str = ""  # a stored configuration that bypassed validation: evaluating it is an error


@dataclass(frozen=True)
class MatchResult:
    """`skipped_by` names the first false condition; `errors` matter only when none was false."""

    skipped_by: str | None = None
    errors: tuple[str, ...] = ()

    @property
    def matches(self) -> bool:
        return self.skipped_by is None and not self.errors


@functools.lru_cache(maxsize=1024)
def compile_expression(expression: str) -> Program:
    """Parse and check one expression; cached, so validation and every configuration version share it."""
    try:
        tree = _ENVIRONMENT.compile(expression.strip())
    except CELParseError as exc:
        raise CompileError(f"compilation failed: {_syntax_error(expression.strip(), exc)}") from exc
    variables, undeclared = _references(tree)
    if undeclared:
        raise CompileError(f"compilation failed: undeclared reference to '{sorted(undeclared)[0]}'")
    return Program(
        expression, _ENVIRONMENT.program(tree), {name: _paths_read(tree, name) for name in variables}
    )


def _syntax_error(expression: str, error: CELParseError) -> str:
    """cel-go's shape: `ERROR: <input>:LINE:COLUMN: Syntax error: …` and the line with a caret under it."""
    line, column = error.line or 1, error.column or 1
    source = expression.splitlines()[line - 1] if expression else ""
    what = "unexpected character" if "Characters" in type(error.__context__).__name__ else "unexpected token"
    return f"ERROR: <input>:{line}:{column}: Syntax error: {what}\n | {source}\n | {'.' * (column - 1)}^"


def _paths_read(tree: lark.Tree[Any], variable: str) -> frozenset[Path] | None:
    """The field paths of `variable` read (`object.metadata.annotations`), None if it is used whole."""
    parents: dict[int, lark.Tree[Any]] = {}
    for node in tree.iter_subtrees():
        for child in node.children:
            parents[id(child)] = node
    paths: set[Path] = set()
    for node in tree.iter_subtrees():
        if node.data != "ident" or str(node.children[0]) != variable:
            continue
        primary = parents.get(id(node))
        member = parents.get(id(primary)) if primary is not None else None
        path: list[str] = []
        while member is not None and member.data == "member":
            selection = parents.get(id(member))
            if selection is None or selection.data != "member_dot" or selection.children[0] is not member:
                break
            path.append(str(selection.children[1]))
            member = parents.get(id(selection))
        if not path:
            return None
        paths.add(tuple(path))
    return frozenset(paths)


def _references(tree: lark.Tree[Any]) -> tuple[set[str], set[str]]:
    """(request variables read, undeclared identifiers and functions). Loop variables are declared."""
    bound: set[str] = set()
    for node in tree.iter_subtrees():
        if (
            node.data == "member_dot_arg"
            and len(node.children) == 3
            and str(node.children[1]) in BINDING_MACROS
        ):
            first = _first_argument(node.children[2])
            if first:
                bound.add(first)
    variables: set[str] = set()
    undeclared: set[str] = set()
    for node in tree.iter_subtrees():
        if node.data == "ident":
            name = str(node.children[0])
            if name in VARIABLES:
                variables.add(name)
            elif name not in bound and name not in TYPE_NAMES:
                undeclared.add(name)
        elif node.data == "ident_arg" and str(node.children[0]) not in GLOBAL_FUNCTIONS:
            undeclared.add(str(node.children[0]))
    return variables, undeclared


def _first_argument(exprlist: Any) -> str | None:
    """The identifier a binding macro's first argument names (`x` in `list.all(x, ...)`)."""
    if not isinstance(exprlist, lark.Tree) or not exprlist.children:
        return None
    idents = [n for n in exprlist.children[0].iter_subtrees() if n.data == "ident"]
    return str(idents[0].children[0]) if len(idents) == 1 else None


def compile_conditions(raw: Iterable[Obj]) -> tuple[MatchCondition, ...]:
    """The compiled conditions of one webhook (validated when its configuration was written)."""
    conditions = []
    for condition in raw:
        name, expression = str(condition.get("name", "")), str(condition.get("expression", ""))
        try:
            conditions.append(MatchCondition(name, compile_expression(expression)))
        except CompileError as exc:
            conditions.append(MatchCondition(name, None, f"expression '{expression}': {exc}"))
    return tuple(conditions)


def evaluate(conditions: tuple[MatchCondition, ...], variables: Mapping[str, Obj | None]) -> MatchResult:
    """kube-apiserver's rule: a false condition skips the webhook whatever else errs."""
    errors: list[str] = []
    for condition in conditions:
        outcome = _outcome(condition, variables)
        if outcome is False:
            return MatchResult(skipped_by=condition.name)
        if isinstance(outcome, str):
            errors.append(outcome)
    return MatchResult(errors=tuple(errors))


_MEMO: OrderedDict[tuple[str, str], bool | str] = OrderedDict()
MEMO_SIZE = 4096


def _outcome(condition: MatchCondition, variables: Mapping[str, Obj | None]) -> bool | str:
    """True, False, or the error message of one condition."""
    program = condition.program
    if program is None:
        return condition.compile_error
    unsupported = program.variables & UNSUPPORTED_VARIABLES
    if unsupported:
        return (
            f"expression '{program.expression}' resulted in error: "
            f"{', '.join(sorted(unsupported))} is not supported by kubesim"
        )
    inputs = {name: _prune(variables.get(name), paths) for name, paths in program.reads.items()}
    key = (program.expression, json.dumps(inputs, sort_keys=True, separators=(",", ":"), default=str))
    outcome = _MEMO.get(key)
    if outcome is not None:
        _MEMO.move_to_end(key)
        return outcome
    outcome = _run(program, {name: json_to_cel(value) for name, value in inputs.items()})
    _MEMO[key] = outcome
    if len(_MEMO) > MEMO_SIZE:
        _MEMO.popitem(last=False)
    return outcome


def _run(program: Program, activation: dict[str, Any]) -> bool | str:
    result: Any
    try:
        result = program.runner.evaluate(activation)
    except CELEvalError as exc:
        result = exc
    if isinstance(result, CELEvalError):
        return f"expression '{program.expression}' resulted in error: {_eval_message(result)}"
    if isinstance(result, (bool, celpy.celtypes.BoolType)):
        return bool(result)
    got = type(result).__name__
    return f"expression '{program.expression}' resulted in error: must evaluate to bool, got {got}"


def _prune(value: Any, paths: frozenset[Path] | None) -> Any:
    """The parts of `value` on `paths` (exactly what an expression reading only them can observe)."""
    if paths is None or () in paths or not isinstance(value, dict):
        return value
    pruned: Obj = {}
    for head in {path[0] for path in paths}:
        if head in value:
            pruned[head] = _prune(value[head], frozenset(p[1:] for p in paths if p[0] == head))
    return pruned


def _eval_message(error: CELEvalError) -> str:
    message = str(error.args[0]) if error.args else str(error)
    return message.split(" (in activation", 1)[0]  # cel-python appends the whole activation


def validate_match_conditions(conditions: Any, path: str) -> Causes:
    """kube-apiserver's create/update validation of one webhook's `matchConditions`."""
    if conditions is None:
        return []
    if not isinstance(conditions, list):
        return [(path, "Invalid value: must be a list")]
    causes: Causes = []
    if len(conditions) > MAX_MATCH_CONDITIONS:
        causes.append((path, f"Too many: {len(conditions)}: must have at most {MAX_MATCH_CONDITIONS} items"))
    seen: set[str] = set()
    for i, condition in enumerate(conditions):
        item = f"{path}[{i}]"
        if not isinstance(condition, dict):
            causes.append((item, "Invalid value: must be an object"))
            continue
        expression = str(condition.get("expression") or "")
        if not expression.strip():
            causes.append((f"{item}.expression", "Required value"))
        else:
            try:
                compile_expression(expression)
            except CompileError as exc:
                causes.append((f"{item}.expression", f"Invalid value: {_quoted(expression)}: {exc}"))
        name = str(condition.get("name") or "")
        if not name:
            causes.append((f"{item}.name", "Required value"))
            continue
        causes += [
            (f"{item}.name", f"Invalid value: {_quoted(name)}: {why}") for why in _qualified_name(name)
        ]
        if name in seen:
            causes.append((f"{item}.name", f"Duplicate value: {_quoted(name)}"))
        seen.add(name)
    return causes


def validate_webhook_configuration(config: Obj) -> Causes:
    """The matchConditions of every webhook of a Mutating/ValidatingWebhookConfiguration."""
    webhooks = config.get("webhooks") or []
    if not isinstance(webhooks, list):
        return [("webhooks", "Invalid value: must be a list")]
    causes: Causes = []
    for i, webhook in enumerate(webhooks):
        if isinstance(webhook, dict):
            causes += validate_match_conditions(
                webhook.get("matchConditions"), f"webhooks[{i}].matchConditions"
            )
    return causes


def validate_webhook_configuration_update(old: Obj, new: Obj) -> Causes:
    """Updates are checked like creates (kubesim's CEL environment does not change between versions)."""
    del old
    return validate_webhook_configuration(new)


def _qualified_name(name: str) -> list[str]:
    """Kubernetes' IsQualifiedName: an optional DNS-subdomain prefix and `/`, then a 63-character name."""
    prefix, _, short = name.rpartition("/") if "/" in name else ("", "", name)
    reasons = []
    if "/" in name and (not prefix or not _DNS_SUBDOMAIN.match(prefix) or len(prefix) > 253):
        reasons.append("prefix part must be a lowercase RFC 1123 subdomain")
    if not short or len(short) > 63 or not _QUALIFIED_NAME.match(short) or name.count("/") > 1:
        reasons.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (max 63 characters)"
        )
    return reasons


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
