#!/usr/bin/python3
"""The programs the suite and the scripts call are installed by scripts/install-deps.sh
(issue 40): on a fresh Debian 12 root a test called `bc`, which nothing installed.

tests/programs.txt lists every external program that tests/*.sh, scripts/*.sh, the
Makefile and .ci/run invoke, each with the Debian package that provides it. This test
 1. scans those files for the words in a command's position (after a newline, |, ;, &&,
    ||, $( or a keyword; quoted text and here-documents are not scanned) that are
    programs on this machine (bash builtins are not): each must be listed;
 2. finds each listed program (`command -v`, with /usr/sbin and /sbin on the PATH) and
    the package owning it (dpkg -S on the resolved file), which must be the listed one;
 3. requires that package to be in install-deps' list (any of its sets:
    `scripts/install-deps.sh --list`) or in the baseline taken as given: what
    `debootstrap --variant=minbase` installs (every package of Priority required, and
    apt) plus build-essential, cmake, git and python3, each with what it depends on.
Usage: test_programs.py (from anywhere; it reads the checkout it lives in)."""
import os
import re
import shutil
import subprocess
import sys

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE_EXTRAS = ["apt", "build-essential", "cmake", "git", "python3"]
PATH = os.environ.get("PATH", "") + ":/usr/local/sbin:/usr/sbin:/sbin"
# words before the command: keywords, wrappers that run their arguments
SKIP = {"then", "do", "else", "elif", "if", "while", "until", "time", "exec", "command",
        "env", "nohup", "setsid", "nice", "!", "xargs", "stdbuf", "builtin", "shell"}
SKIP_WITH_ARG = {"timeout"}
SEP = re.compile(r"\|\||&&|[|;(){}\n`]")


def shell_text(text):
    """The text with quoted strings, comments and here-document bodies blanked out,
    but the commands inside $( ) kept, even within double quotes."""
    out = []
    stack = ["N"]  # N: shell code, D: inside double quotes
    depth = [0]  # parentheses open in each N level
    i, n = 0, len(text)
    heredocs = []
    while i < n:
        c = text[i]
        state = stack[-1]
        if c == "\\":  # an escaped character; a continued line keeps its newline
            out.append("x\n" if text.startswith("\n", i + 1) else "xx")
            i += 2
            continue
        if state == "D":
            if c == '"':
                stack.pop()
                out.append('"')
            elif text.startswith("$(", i) and not text.startswith("$((", i):
                stack.append("N")
                depth.append(1)
                out.append("(")
                i += 2
                continue
            else:
                out.append("\n" if c == "\n" else "x")
            i += 1
            continue
        # state N
        if c == "'":
            j = text.find("'", i + 1)
            j = n if j < 0 else j
            out.append("xx" + "\n" * text.count("\n", i, j))
            i = j + 1
            continue
        if c == '"':
            stack.append("D")
            out.append('"')
            i += 1
            continue
        if c == "#" and (i == 0 or text[i - 1] in " \t\n;"):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        m = re.match(r"<<-?\s*['\"]?(\w+)['\"]?", text[i:])
        if m:
            heredocs.append(m.group(1))
            out.append(" ")
            i += m.end()
            continue
        if c == "\n" and heredocs:
            # skip the bodies, one after the other
            pos = i + 1
            for delim in heredocs:
                while pos < n:
                    end = text.find("\n", pos)
                    end = n if end < 0 else end
                    line = text[pos:end]
                    pos = end + 1
                    if line.strip() == delim:
                        break
            heredocs = []
            out.append("\n" * (text.count("\n", i, pos) or 1))
            i = pos
            continue
        if c == "(":
            depth[-1] += 1
        elif c == ")":
            depth[-1] -= 1
            if depth[-1] == 0 and len(stack) > 1:
                stack.pop()
                depth.pop()
        out.append(c)
        i += 1
    return "".join(out)


def bash_builtins():
    out = subprocess.run(["bash", "-c", "compgen -b; compgen -k"], capture_output=True,
                         text=True, check=True).stdout
    return set(out.split())


def scanned_files():
    files = []
    for d in ("tests", "scripts"):
        folder = os.path.join(SRC, d)
        files += sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".sh"))
    return files + [os.path.join(SRC, "Makefile"), os.path.join(SRC, ".ci", "run")]


def invoked_programs(builtins):
    """{program: first place it is invoked} over the scanned files."""
    found = {}
    for path in scanned_files():
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        if path.endswith("Makefile"):
            # recipe lines, and $(shell ...)
            parts = [l[1:].lstrip("@-") for l in text.split("\n") if l.startswith("\t")]
            parts += re.findall(r"\$\(shell ([^)]*)\)", text)
            text = "\n".join(parts)
        code = shell_text(text)
        line_of = lambda pos: code.count("\n", 0, pos) + 1
        pos = 0
        for seg in SEP.split(code):
            start = code.find(seg, pos)
            pos = start + len(seg)
            toks = seg.split()
            k = 0
            while k < len(toks):
                t = toks[k]
                if t in SKIP or re.match(r"^\w+=", t) or t.startswith("-") or re.match(r"^[0-9]*[<>&]", t):
                    k += 1
                elif t in SKIP_WITH_ARG:
                    k += 2
                else:
                    break
            if k >= len(toks):
                continue
            word = toks[k]
            if not re.fullmatch(r"[A-Za-z][\w.+-]*", word) or word in builtins:
                continue
            if shutil.which(word, path=PATH):
                found.setdefault(word, "%s:%d" % (os.path.relpath(path, SRC), line_of(start)))
    return found


def read_list():
    """tests/programs.txt: 'program package' per line; '#' comments."""
    listed = {}
    with open(os.path.join(SRC, "tests", "programs.txt"), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].split()
            if not line:
                continue
            if len(line) != 2:
                sys.exit("FAIL: tests/programs.txt line %d: not 'program package'" % n)
            listed[line[0]] = line[1]
    return listed


DEBIAN_DIRS = ["/usr/bin", "/usr/sbin", "/bin", "/sbin"]


def candidates(program):
    """The files that may be the program: the one the PATH finds (resolved, and as
    found), then Debian's own in /usr/bin and the like (where the first is a /usr/local
    or pyenv shim no package owns); each also under merged /usr's other name."""
    found = shutil.which(program, path=PATH)
    if found is None:
        return None, []
    paths = []
    for path in [found] + [os.path.join(d, program) for d in DEBIAN_DIRS]:
        if os.path.exists(path):
            for p in (os.path.realpath(path), path):
                paths += [p, p[4:] if p.startswith("/usr/") else "/usr" + p]
    return found, paths


def owners(programs):
    """{program: (package or None, file)} for the programs installed here; one dpkg -S
    for them all."""
    cands = {prog: candidates(prog) for prog in programs}
    paths = sorted({p for _, ps in cands.values() for p in ps})
    r = subprocess.run(["dpkg", "-S"] + paths, capture_output=True, text=True)
    owner_of = {}
    for line in r.stdout.splitlines():
        if line.startswith("diversion") or ": " not in line:
            continue
        pkgs, path = line.split(": ", 1)
        owner_of.setdefault(path, pkgs.split(",")[0].strip().split(":")[0])
    result = {}
    for prog, (found, ps) in cands.items():
        if found is None:
            continue
        hit = next((p for p in ps if p in owner_of), None)
        result[prog] = (owner_of[hit], hit) if hit else (None, found)
    return result


def installed_packages():
    """{package: [its Depends and Pre-Depends, one installed alternative of each group,
    or a virtual package's installed provider]}, and the packages of Priority required."""
    out = subprocess.run(["dpkg-query", "-W", "-f",
                          "${Package}\t${Status}\t${Priority}\t${Provides}\t${Pre-Depends}, ${Depends}\n"],
                         capture_output=True, text=True, check=True).stdout
    rows, required, provider = [], set(), {}
    for line in out.splitlines():
        pkg, status, prio, provides, depends = (line.split("\t") + [""] * 5)[:5]
        if "install ok installed" not in status:
            continue
        rows.append((pkg, depends))
        if prio == "required":
            required.add(pkg)
        for v in provides.split(","):
            v = v.split("(")[0].strip()
            if v:
                provider.setdefault(v, pkg)
    names = {pkg for pkg, _ in rows}
    deps = {}
    for pkg, depends in rows:
        chosen = []
        for group in depends.split(","):
            alts = [a.split("(")[0].strip().split(":")[0] for a in group.split("|")]
            for a in alts:  # apt takes the first alternative it can
                if a in names:
                    chosen.append(a)
                    break
                if a in provider:
                    chosen.append(provider[a])
                    break
        deps[pkg] = chosen
    return deps, required


def closure(deps, roots):
    seen, todo = set(), list(roots)
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo += deps.get(p, [])
    return seen


def main():
    failures, notes = [], []
    listed = read_list()
    invoked = invoked_programs(bash_builtins())
    for prog, where in sorted(invoked.items()):
        if prog not in listed:
            failures.append("%s (%s) is invoked but not in tests/programs.txt" % (prog, where))
    sets = {}
    for opt in ("", "--bench", "--dev"):
        r = subprocess.run([os.path.join(SRC, "scripts", "install-deps.sh"), "--list"] + ([opt] if opt else []),
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("FAIL: scripts/install-deps.sh --list %s: exit %d: %s" % (opt, r.returncode, r.stderr.strip()))
        sets[opt] = set(r.stdout.split())
        if not sets[opt]:
            sys.exit("FAIL: scripts/install-deps.sh --list %s printed no package" % opt)
    deps, required = installed_packages()
    found = owners(listed)
    base = closure(deps, sorted(required) + BASE_EXTRAS)
    for prog, pkg in sorted(listed.items()):
        if pkg in base:
            where = "the baseline"
        elif pkg in sets[""]:
            where = "install-deps"
        elif pkg in sets["--bench"] or pkg in sets["--dev"]:
            where = "optional"
        else:
            failures.append("%s: its package %s is neither in scripts/install-deps.sh's lists nor in the"
                            " baseline (minbase + build-essential cmake git python3)" % (prog, pkg))
            continue
        found_pkg, path = found.get(prog, (None, None))
        if path is None:
            if where == "optional":
                opt = "--bench" if pkg in sets["--bench"] else "--dev"
                notes.append("%s is not installed here (scripts/install-deps.sh %s installs %s)" % (prog, opt, pkg))
            else:
                failures.append("%s (package %s, %s) is not installed here: scripts/install-deps.sh installs it"
                                % (prog, pkg, where))
            continue
        if found_pkg is None:
            failures.append("%s: no Debian package owns %s (tests/programs.txt says %s)" % (prog, path, pkg))
        elif found_pkg not in closure(deps, [pkg]):
            failures.append("%s: dpkg -S %s says %s, which package %s (tests/programs.txt) does not bring"
                            % (prog, path, found_pkg, pkg))
    unscanned = sorted(set(listed) - set(invoked))
    for n in notes:
        print("note: " + n)
    for f in failures:
        print("FAIL: " + f)
    print("%d programs found invoked by the scan, %d listed in tests/programs.txt%s; baseline: %d packages;"
          " install-deps: %d" % (len(invoked), len(listed),
                                  " (listed, not found by the scan: %s)" % " ".join(unscanned) if unscanned else "",
                                  len(base), len(sets[""])))
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
