"""The README and docs/ as a new user reads them: every `pip install` works
from a checkout, and the API lines run as written (offline, in a fresh
interpreter, as a user's first `import gpu_tok` would)."""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

from conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def pip_installs() -> list[tuple[str, str]]:
    """(file:line, the arguments after `pip install`) of every install the docs show."""
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        # The arguments may start on the next line (prose wraps), and end at a
        # backtick, comment, `&&`, `|`, `;` or the line's end.
        for match in re.finditer(r"pip install\s+([^`#&|;\n]+)", text):
            found.append((f"{doc.name}:{text.count(chr(10), 0, match.start()) + 1}", match.group(1).strip()))
    return found


def test_every_pip_install_in_the_docs_works_from_a_checkout() -> None:
    """gpu_tok is not on PyPI: "gpu_tok[serve]" finds no distribution; ".[serve]"
    installs the checkout with the extra, which must exist."""
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
                 ["project"]["optional-dependencies"])
    installs = pip_installs()
    assert len(installs) >= 5, installs  # the README's set-up and extras lines were found
    for where, arguments in installs:
        for target in shlex.split(arguments):
            if target.startswith("-"):
                continue
            name = re.split(r"[\[<>=!~ ]", target, maxsplit=1)[0]
            assert name.lower().replace("-", "_") != "gpu_tok", f"{where}: {target!r} is not on PyPI; say \".[...]\""
            if name == ".":
                wanted = re.findall(r"[\w-]+", target[1:])
                assert set(wanted) <= extras, f"{where}: {target!r} names an extra pyproject.toml lacks"


def test_install_hints_in_messages_work_from_a_checkout() -> None:
    """What the package prints when an extra is missing must install too: not
    `pip install 'gpu_tok[serve]'` (no matching distribution) but the extra from
    the checkout."""
    sources = sorted((ROOT / "python" / "gpu_tok").rglob("*.py"))
    wrong = [f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
             for path in sources for text in [path.read_text(encoding="utf-8")]
             for match in re.finditer(r"pip install\s+[\"']?gpu_tok\[", text)]
    assert not wrong, wrong


def api_block() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## API"):readme.index("### Migrating from transformers")]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


# Runs the README's API block statement by statement. A statement that rebinds a
# name set earlier without reading it (`tok = ...from_file(...)`, shown as an
# alternative to the line above) runs on a copy of the names, so the lines after
# it use the first.
RUNNER = r"""
import ast, json, sys
source, names = sys.argv[1], json.loads(sys.argv[2])
import gpu_tok, pyarrow  # nothing else of gpu_tok: the block imports what it uses
scope = {"ids": names["ids"], "texts": names["texts"], "messages": names["messages"],
         "ranks": {bytes([b]): b for b in range(256)}, "pattern": r"\s+|\S+",
         "pyarrow_string_array": pyarrow.array(names["texts"])}
bound = set()
for node in ast.parse(source).body:
    code = compile(ast.Module([node], []), "<README>", "exec")
    targets = {t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)}
    reads = {n.id for n in ast.walk(getattr(node, "value", node)) if isinstance(n, ast.Name)}
    alternative = bool(targets & bound) and not targets & reads
    exec(code, dict(scope) if alternative else scope)
    bound |= targets
print("ran", len(ast.parse(source).body), "statements")
"""


def test_the_readme_api_lines_run_as_written(tmp_path: Path) -> None:
    from gpu_tok import _data

    model = tmp_path / "model"
    model.mkdir()
    (model / "tokenizer.json").write_text(_data.default_tokenizer_json(), encoding="utf-8")
    (model / "tokenizer_config.json").write_text(json.dumps(_data.default_tokenizer_config()), encoding="utf-8")
    (model / "chat_template.jinja").write_text(
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}", encoding="utf-8")
    (tmp_path / "tokenizer.json").write_text(_data.default_tokenizer_json(), encoding="utf-8")
    source = api_block().replace("path/to/model", str(model))
    names = {"ids": [9707, 1879], "texts": ["Hello world", "a longer second text"],
             "messages": [{"role": "user", "content": "Hi"}]}
    done = subprocess.run([sys.executable, "-c", RUNNER, source, json.dumps(names)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "out" / "tokenizer.json").is_file()  # save_pretrained("out/") ran
    statements = len(ast.parse(source).body)
    assert statements >= 20 and f"ran {statements} statements" in done.stdout


def test_convert_is_reachable_from_the_package() -> None:
    """The README's `gpu_tok.convert...` after a bare `import gpu_tok`, in a fresh interpreter."""
    code = "import gpu_tok; print(len(gpu_tok.convert.cl100k_tokenizer_json()) > 10**6)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr[-2000:]
