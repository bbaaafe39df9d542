"""The repository's documentation stands alone: every reference a tracked
file makes to a markdown file points at a file the repository holds.

A user has only a clone. So no tracked file (README.md, docs/, code
comments, scripts, CMake files) may send a reader to the directory the
project was once developed beside, and every markdown link or file name
must resolve:

- a relative markdown link [text](target) in a .md file must name a file
  or directory inside the repository, relative to the linking file;
- any other mention of a markdown file name (a code comment's
  "docs/RELIABILITY.md, scenario 8", a backquoted path in the README)
  must resolve from the repository root or from the mentioning file's
  directory. A bare name of a file that lives in docs/ therefore fails
  from tests/system/: write docs/RELIABILITY.md, not just its last part.

Mentions with a placeholder in them ($OUT/report.md, <time>/report.md)
name generated files and are skipped. Needs no build: it reads the
source tree (git ls-files when it is a checkout, else a walk of it).
"""

import os
import re
import subprocess
import unittest

ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))

# Built from parts so that this file does not match itself.
OUTSIDE = re.compile(r"\.\./+" + "shared" + r"\b|/work/" + "shared" + r"\b")
MD_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
MD_NAME = re.compile(r"[A-Za-z0-9_./<>${}*~-]*[A-Za-z0-9_-]\.md\b")
PLACEHOLDER = set("$<>{}*~")
# Walked when the tree is not a git checkout.
SKIP_DIRS = {".git", "node_modules", "__pycache__"}


def tracked_files():
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"],
                             capture_output=True, check=True, timeout=60)
        files = [f for f in out.stdout.decode().split("\0") if f]
        if files:
            return files
    except (OSError, subprocess.SubprocessError):
        pass
    files = []
    for d, dirs, names in os.walk(ROOT):
        rel = os.path.relpath(d, ROOT)
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS
                   and not (rel == "." and x.startswith("build"))]
        files += [os.path.normpath(os.path.join(rel, n)) for n in names]
    return files


def text_files():
    """(path relative to ROOT, text) of every tracked text file, except
    the fuzzers' seed corpora (arbitrary bytes by design)."""
    for rel in tracked_files():
        if rel.startswith("fuzz/corpus/"):
            continue
        path = os.path.join(ROOT, rel)
        if not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                yield rel, f.read()
        except UnicodeDecodeError:
            continue  # binary


def inside_repo(path):
    real = os.path.realpath(path)
    return real == ROOT or real.startswith(ROOT + os.sep)


def resolves(rel_file, target, also_from_root):
    bases = [os.path.dirname(os.path.join(ROOT, rel_file))]
    if also_from_root:
        bases.append(ROOT)
    for base in bases:
        path = os.path.normpath(os.path.join(base, target))
        if inside_repo(path) and os.path.exists(path):
            return True
    return False


def token_at(text, m):
    """The whitespace-delimited word a match sits in."""
    start = max(text.rfind(c, 0, m.start()) for c in " \t\n") + 1
    ends = [i for i in (text.find(c, m.end()) for c in " \t\n") if i >= 0]
    return text[start:min(ends) if ends else len(text)]


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


class DocsLinksTest(unittest.TestCase):

    def setUp(self):
        self.files = list(text_files())
        self.assertTrue(any(rel == "README.md" for rel, _ in self.files),
                        f"README.md not found under {ROOT}")

    def assertNoFindings(self, findings, what):
        if findings:
            self.fail(f"{len(findings)} {what}:\n  " + "\n  ".join(findings))

    def test_nothing_points_outside_the_repository(self):
        bad = [f"{rel}:{line_of(text, m.start())}: {m.group(0)}"
               for rel, text in self.files for m in OUTSIDE.finditer(text)]
        self.assertNoFindings(bad, "references to files outside the "
                              "repository; point them at docs/ instead")

    def test_markdown_links_resolve_inside_the_repository(self):
        bad = []
        for rel, text in self.files:
            if not rel.endswith(".md"):
                continue
            for m in MD_LINK.finditer(text):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target) or \
                        target.startswith("#"):
                    continue  # a URL (https:, mailto:) or an anchor
                target = target.split("#", 1)[0]
                if not resolves(rel, target, also_from_root=False):
                    bad.append(f"{rel}:{line_of(text, m.start())}: {target}")
        self.assertNoFindings(bad, "markdown links to nothing in the "
                              "repository")

    def test_every_markdown_file_named_exists(self):
        bad = []
        for rel, text in self.files:
            for m in MD_NAME.finditer(text):
                name = m.group(0)
                if PLACEHOLDER & set(name) or "://" in token_at(text, m):
                    continue  # a generated file's pattern, or a URL
                if not resolves(rel, name, also_from_root=True):
                    bad.append(f"{rel}:{line_of(text, m.start())}: {name}")
        self.assertNoFindings(bad, "names of markdown files the repository "
                              "does not hold (write the path from the root, "
                              "e.g. docs/RELIABILITY.md)")


if __name__ == "__main__":
    unittest.main(verbosity=2)
