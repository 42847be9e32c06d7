"""Template source text → a checked, rewritten Jinja2 template, when a watcher is loaded.

Everything that can be known before fire time is checked here: syntax (with the line),
forbidden tags (``include``, ``import``, ``extends``, ``block``, ``macro``, ``call``),
filter and test names, ``${…}`` paths and variable names against the allowed roots.
Then the tree is rewritten to call :class:`~.environment.TemplateBridge`:

* ``${payload.a.b}`` in text, and constant chains such as ``payload.a[0]`` in expressions,
  become ``resolve(payload, "payload", ("a", "b"))`` — path semantics, and an error that
  names the whole path;
* ``a ~ b`` becomes ``concat(a, b)`` (size-checked, JSON for non-strings);
* ``{% for x in xs %}`` iterates ``iterate(context, xs)`` (the per-render loop budget).

The calls are ``ExtensionAttribute`` nodes, which no template text can produce, so a
template cannot reach the bridge with arguments of its own.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, NoReturn, cast

import jinja2
from jinja2 import nodes
from jinja2.visitor import NodeTransformer

from sentinel_hooks.core.paths import is_index, parse_path
from sentinel_hooks.core.templates.environment import TemplateBridge
from sentinel_hooks.core.templates.filters import SAFE_FILTERS
from sentinel_hooks.core.templates.variables import Leaf, Roots
from sentinel_hooks.errors import TemplateError

RESULT_NAME: Final = "sentinel_result"
"""Variable a single-expression template assigns its (typed) value to."""

PLACEHOLDER: Final = re.compile(r"\$\{(?!\{)([^{}]*)\}")
_NOT_A_PATH: Final = re.compile(r"""[\s|()'"*+<>=!,~%]""")
_FORBIDDEN: Final = (
    (nodes.Extends, "extends"),
    (nodes.Include, "include"),
    (nodes.Import, "import"),
    (nodes.FromImport, "from … import"),
    (nodes.Block, "block"),
    (nodes.Macro, "macro"),
    (nodes.CallBlock, "call"),
)


@dataclass(frozen=True)
class PathRef:
    """A ``${…}`` placeholder: ``root`` then ``keys``, ``shown`` as written (trimmed)."""

    root: str
    keys: tuple[str, ...]
    shown: str


class CompiledSource:
    """A checked template; ``typed`` when it assigns one value to :data:`RESULT_NAME`.

    Jinja2's code generation and Python's ``compile`` are two thirds of a template's load
    cost (``sentinel validate`` of 500 watchers spent 0.7 s on them), so they run at the first
    render. Nothing is left for them to refuse: every error they can raise for the syntax that
    passes :meth:`VariableChecker.check_tree` (unknown filters and tests, assigning ``loop``
    in a for loop, and the forbidden block, macro and extends tags) is refused at load.
    """

    __slots__ = ("_env", "_template", "_tree", "has_loops", "typed")

    def __init__(self, env: jinja2.Environment, tree: nodes.Template, *, typed: bool, has_loops: bool):
        self._env = env
        self._tree: nodes.Template | None = tree
        self._template: jinja2.Template | None = None
        self.typed = typed
        self.has_loops = has_loops

    @property
    def template(self) -> jinja2.Template:
        """The compiled template (compiled on first use; the tree is dropped then)."""
        if self._template is None:
            self._template = self._env.from_string(cast("nodes.Template", self._tree))
            self._tree = None
        return self._template


def has_template_syntax(text: str) -> bool:
    """Whether ``text`` contains anything a template would change (else it is a constant)."""
    return any(marker in text for marker in ("${", "{{", "{%", "{#"))


def exact_placeholder(text: str) -> str | None:
    """The inside of ``${…}`` when ``text`` is exactly one such placeholder."""
    match = PLACEHOLDER.fullmatch(text)
    return match.group(1) if match else None


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class VariableChecker:
    """Checks names and paths of one template; errors name ``where`` and the template."""

    def __init__(self, roots: Roots, *, where: str, template: str) -> None:
        self.roots = roots
        self.where = where
        self.template = template
        self.local_names: frozenset[str] = frozenset()
        self.has_loops = False

    def fail(self, message: str, line: int | None = None, variable: str | None = None) -> NoReturn:
        """Raise the TemplateError for this template."""
        multiline = "\n" in self.template
        at = f"{self.where}: line {line}" if multiline and line is not None else self.where
        raise TemplateError(f"{at}: {message}", template=self.template, variable=variable)

    def placeholder(self, inner: str, line: int | None = None) -> PathRef:
        """Parse and check the inside of a ``${…}`` placeholder."""
        path = inner.strip()
        if not path:
            self.fail("'${}' is empty; write a path such as ${payload.price}", line)
        if _NOT_A_PATH.search(path):
            self.fail(
                f"'${{{path}}}' is not a dotted path; use {{{{ {path} }}}} for Jinja2 "
                "expressions and filters",
                line,
                path,
            )
        try:
            segments = parse_path(path)
        except ValueError as exc:
            self.fail(f"'${{{path}}}' is not a valid path: {exc}", line, path)
        self.check(segments[0], segments[1:], line)
        return PathRef(segments[0], segments[1:], path)

    def check(self, root: str, keys: Sequence[str | int] = (), line: int | None = None) -> None:
        """Refuse an unknown root, or a path below a known variable that it does not have."""
        if root in self.local_names:
            return
        if root not in self.roots:
            names = ", ".join(self.roots)
            hint = _did_you_mean(root, list(self.roots))
            self.fail(f"unknown variable {root!r}{hint}; templates can use {names}", line, root)
        shape = self.roots[root]
        if shape is None or not keys:
            return
        if not isinstance(shape, Mapping):
            self._check_leaf(root, shape, keys, line)
            return
        shown = f"{root}.{keys[0]}"
        if keys[0] not in shape:
            hint = _did_you_mean(shown, [f"{root}.{name}" for name in shape])
            self.fail(f"unknown variable {shown!r}: {root} has {', '.join(shape)}{hint}", line, shown)
        self._check_leaf(shown, shape[str(keys[0])], keys[1:], line)

    def _check_leaf(self, shown: str, leaf: Leaf, keys: Sequence[str | int], line: int | None) -> None:
        """Refuse keys below a known variable that holds ``leaf``: a string has none (a Jinja2
        subscript ``[0]`` takes a character), an array of strings only item indices."""
        if not keys:
            return
        key, rest = keys[0], keys[1:]
        item = isinstance(key, int) if leaf == "text" else isinstance(key, int) or is_index(key)
        if item:  # an array's item, or a string's character
            self._check_leaf(f"{shown}.{key}", "text", rest, line)
            return
        what = "a string" if leaf == "text" else "an array of strings"
        wrong = f"{shown}.{key}"
        hint = f" (did you mean the filter {{{{ {shown} | {key} }}}}?)" if key in SAFE_FILTERS else ""
        self.fail(
            f"unknown variable {wrong!r}: {shown} is {what} and has no key {str(key)!r}{hint}", line, wrong
        )

    def check_tree(self, tree: nodes.Template, env: jinja2.Environment) -> None:
        """Forbidden tags, unknown filters/tests, unknown variables — first problem wins.

        One walk collects every node (in document order); each check then filters that list.
        A variable is unknown when it is read and never bound in the template (``set``,
        ``for``, ``with``): the names Jinja2's ``meta.find_undeclared_variables`` reports,
        without the code generation pass it runs to find them.
        """
        every = list(tree.find_all(nodes.Node))
        for node_type, tag in _FORBIDDEN:
            found = next((node for node in every if isinstance(node, node_type)), None)
            if found is not None:
                self.fail(f"{{% {tag} %}} is not allowed in templates", found.lineno)
        for node in every:
            if not isinstance(node, nodes.Filter | nodes.Test):
                continue
            kind, table = ("filter", env.filters) if isinstance(node, nodes.Filter) else ("test", env.tests)
            if node.name not in table:
                hint = _did_you_mean(node.name, sorted(table))
                self.fail(
                    f"unknown {kind} {node.name!r}{hint}; available: {', '.join(sorted(table))}",
                    node.lineno,
                )
        names = [node for node in every if isinstance(node, nodes.Name)]
        loops = [node for node in every if isinstance(node, nodes.For)]
        self.has_loops = bool(loops)
        for loop in loops:  # what Jinja2's code generator would refuse (the first render compiles)
            for name_node in loop.find_all(nodes.Name):
                if name_node.ctx == "store" and name_node.name == "loop":
                    self.fail("cannot assign to 'loop' inside a for loop", name_node.lineno)
        self.local_names, unbound = bound_and_unbound(every)
        lines: dict[str, int] = {}
        for name_node in names:
            lines.setdefault(name_node.name, name_node.lineno)
        if "self" in lines:  # Jinja2 binds ``self`` to the template itself: refuse it outright
            self.fail("unknown variable 'self' (templates have no Jinja2 globals)", lines["self"], "self")
        for name in sorted(unbound, key=lambda n: (lines.get(n, 0), n)):
            self.check(name, (), lines.get(name))
        for candidate in every:
            if isinstance(candidate, nodes.Getattr | nodes.Getitem):
                chain = _constant_chain(candidate)
                if chain is not None and chain[0] in self.roots:
                    self.check(chain[0], chain[1], candidate.lineno)


def bound_and_unbound(every: Sequence[nodes.Node]) -> tuple[frozenset[str], frozenset[str]]:
    """``(bound, unbound)`` names of a template's nodes: bound by ``set``/``for``/``with`` (and
    ``loop`` inside a loop), and read without being bound anywhere in the template."""
    names = [node for node in every if isinstance(node, nodes.Name)]
    bound = {n.name for n in names if n.ctx in ("store", "param")}
    if any(isinstance(node, nodes.For) for node in every):
        bound.add("loop")
    read = {n.name for n in names if n.ctx == "load"}
    read |= {node.name for node in every if isinstance(node, nodes.NSRef)}
    return frozenset(bound), frozenset(read - bound)


def _constant_chain(node: nodes.Getattr | nodes.Getitem) -> tuple[str, list[str | int]] | None:
    """``(root, keys)`` of ``root.a[0].b`` when every key is a constant; None otherwise."""
    keys: list[str | int] = []
    current: nodes.Node = node
    while isinstance(current, nodes.Getattr | nodes.Getitem):
        key = _constant_key(current)
        if key is None:
            return None
        keys.append(key)
        current = current.node
    if not isinstance(current, nodes.Name) or current.ctx != "load":
        return None
    return current.name, keys[::-1]


def _constant_key(node: nodes.Getattr | nodes.Getitem) -> str | int | None:
    if isinstance(node, nodes.Getattr):
        return node.attr
    arg = node.arg
    if not isinstance(arg, nodes.Const) or isinstance(arg.value, bool):
        return None
    return arg.value if isinstance(arg.value, str | int) else None


class _Rewriter(NodeTransformer):
    """Rewrites placeholders, constant chains, ``~`` and loops into bridge calls."""

    def __init__(self, bridge: TemplateBridge, checker: VariableChecker) -> None:
        self.bridge = bridge
        self.checker = checker

    def _call(self, method: str, args: list[nodes.Expr], line: int) -> nodes.Call:
        return nodes.Call(self.bridge.attr(method, lineno=line), args, [], None, None, lineno=line)

    def _resolve(self, root: nodes.Name, keys: Sequence[str | int], line: int) -> nodes.Call:
        args: list[nodes.Expr] = [root, nodes.Const(root.name), nodes.Const(tuple(keys))]
        return self._call("resolve", args, line)

    def visit_Output(self, node: nodes.Output) -> nodes.Output:
        children: list[nodes.Expr] = []
        for child in node.nodes:
            if isinstance(child, nodes.TemplateData):
                children.extend(self._split_data(child))
            else:
                children.append(self.visit(child))
        node.nodes = children
        return node

    def _split_data(self, data: nodes.TemplateData) -> list[nodes.Expr]:
        text, pieces, start = data.data, [], 0
        for match in PLACEHOLDER.finditer(text):
            pieces.extend(self._literal(text[start : match.start()], data.lineno))
            line = data.lineno + text.count("\n", 0, match.start())
            ref = self.checker.placeholder(match.group(1), line)
            pieces.append(self._resolve(nodes.Name(ref.root, "load", lineno=line), ref.keys, line))
            start = match.end()
        pieces.extend(self._literal(text[start:], data.lineno))
        return pieces

    def _literal(self, text: str, line: int) -> list[nodes.Expr]:
        if "${" in text:
            self.checker.fail("'${' without a closing '}' (for a literal '${' write {{ '${' }})", line)
        return [nodes.TemplateData(text, lineno=line)] if text else []

    def visit_Getattr(self, node: nodes.Getattr) -> nodes.Expr:
        return self._chain(node)

    def visit_Getitem(self, node: nodes.Getitem) -> nodes.Expr:
        return self._chain(node)

    def _chain(self, node: nodes.Getattr | nodes.Getitem) -> nodes.Expr:
        keys: list[str | int] = []
        current: nodes.Expr = node
        while isinstance(current, nodes.Getattr | nodes.Getitem):
            key = _constant_key(current)
            if key is None:
                break
            keys.append(key)
            current = current.node
        if isinstance(current, nodes.Name) and current.ctx == "load":
            return self._resolve(current, keys[::-1], node.lineno)
        return cast("nodes.Expr", self.generic_visit(node))

    def visit_Concat(self, node: nodes.Concat) -> nodes.Expr:
        self.generic_visit(node)
        return self._call("concat", list(node.nodes), node.lineno)

    def visit_For(self, node: nodes.For) -> nodes.For:
        self.generic_visit(node)
        iterable = cast("nodes.Expr", node.iter)
        node.iter = self._call("iterate", [nodes.ContextReference(), iterable], node.lineno)
        return node


def _single_expression(text: str, tree: nodes.Template) -> nodes.Expr | None:
    if not (text.startswith("{{") and text.endswith("}}")) or len(tree.body) != 1:
        return None
    output = tree.body[0]
    if not isinstance(output, nodes.Output) or len(output.nodes) != 1:
        return None
    expression = output.nodes[0]
    return None if isinstance(expression, nodes.TemplateData) else expression


def compile_source(
    env: jinja2.Environment, text: str, *, where: str, roots: Roots, typed: bool
) -> CompiledSource:
    """Parse, check and compile ``text``; ``typed`` keeps a lone ``{{ expr }}``'s value."""
    checker = VariableChecker(roots, where=where, template=text)
    try:
        tree = env.parse(text)
    except jinja2.TemplateSyntaxError as exc:
        checker.fail(f"syntax error: {exc.message}", exc.lineno)
    checker.check_tree(tree, env)
    bridge = cast("TemplateBridge", env.extensions[TemplateBridge.identifier])
    tree = _Rewriter(bridge, checker).visit(tree)
    expression = _single_expression(text, tree) if typed else None
    if expression is not None:
        result = nodes.Name(RESULT_NAME, "store", lineno=1)
        tree = nodes.Template([nodes.Assign(result, expression, lineno=1)], lineno=1)
    tree.set_environment(env)
    return CompiledSource(env, tree, typed=expression is not None, has_loops=checker.has_loops)
