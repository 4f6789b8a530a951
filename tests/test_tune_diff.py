"""The patch tune and lint --diff print: a unified diff that shows only the changed lines, also in a
long file where one line repeats many times (a llama-swap file lists `-fa on` for every model)."""

from __future__ import annotations

import difflib
import random

from servefit.tune.diff import unified


def test_a_change_in_the_last_of_many_equal_blocks_shows_only_itself() -> None:
    old = "".join(["  cmd: >\n", "    -c 131072\n", "    -fa on\n", "    --parallel 1\n"] * 60)
    lines = old.splitlines(keepends=True)
    lines[-3], lines[-1] = "    -c 262144\n", "    --parallel 2\n"
    assert unified("/x/l.yaml", old, "".join(lines)) == (
        "--- a/x/l.yaml\n+++ b/x/l.yaml\n@@ -235,6 +235,6 @@\n"
        "     -fa on\n     --parallel 1\n   cmd: >\n-    -c 131072\n+    -c 262144\n     -fa on\n-    --parallel 1\n+    --parallel 2\n")


def test_a_repeated_line_between_two_changes_stays_context() -> None:
    block = ["  cmd: >\n", "    llama-server\n", "    -c 131072\n", "    -fa on\n", "    --parallel 1\n"]
    old = "".join(block * 60)  # 300 lines: difflib's autojunk would call `-fa on` junk
    lines = old.splitlines(keepends=True)
    lines[2], lines[4] = "    -c 262144\n", "    --parallel 2\n"
    assert unified("/x/llama-swap.yaml", old, "".join(lines)) == (
        "--- a/x/llama-swap.yaml\n+++ b/x/llama-swap.yaml\n@@ -1,8 +1,8 @@\n"
        "   cmd: >\n     llama-server\n-    -c 131072\n+    -c 262144\n     -fa on\n"
        "-    --parallel 1\n+    --parallel 2\n   cmd: >\n     llama-server\n     -c 131072\n")


def apply(old: str, patch: str) -> str:
    """Apply a unified diff the way patch(1) does, hunk by hunk, checking every context line."""
    a, out, at = old.splitlines(keepends=True), [], 0
    for hunk in patch.split("@@ -")[1:]:
        head, _, body = hunk.partition("\n")
        start = int(head.split()[0].split(",")[0])
        count = int(head.split()[0].split(",")[1]) if "," in head.split()[0] else 1
        start = start - 1 if count else start
        out += a[at:start]
        at = start
        for line in body.splitlines(keepends=True):
            if line.startswith(("-", " ")):
                assert a[at] == line[1:]
                at += 1
            if line.startswith(("+", " ")):
                out.append(line[1:])
    return "".join(out + a[at:])


def test_random_patches_apply_and_change_no_more_than_difflib() -> None:
    rnd = random.Random(7)
    for _ in range(300):
        a = [f"l{rnd.randint(0, 6)}\n" for _ in range(rnd.randint(1, 40))]
        b = list(a)
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(b) + 1)
            if rnd.random() < 0.4 and i < len(b):
                b[i] = f"x{rnd.randint(0, 4)}\n"
            elif rnd.random() < 0.5 or not b:
                b.insert(i, f"y{rnd.randint(0, 4)}\n")
            else:
                del b[min(i, len(b) - 1)]
        if a == b:
            continue
        ours = unified("/f", "".join(a), "".join(b))
        assert apply("".join(a), ours) == "".join(b)
        changed = sum(1 for x in ours.splitlines() if x[:1] in "+-" and not x.startswith(("---", "+++")))
        theirs = sum(1 for x in difflib.unified_diff(a, b) if x[:1] in "+-" and not x.startswith(("---", "+++")))
        assert changed <= theirs
